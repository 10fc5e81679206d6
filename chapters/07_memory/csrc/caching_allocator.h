#pragma once

/**
 * @file
 * What chapter 07's caching device allocator offers beyond
 * `c10::DeviceAllocator`: the per-process memory cap, raw allocations, a
 * snapshot of its segments, private memory pools and a pluggable allocator,
 * for the `torch.accinte` functions of the same names as `torch.cuda`'s.
 */

#include <accinte/export.h>
#include <accinte/runtime.h>

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace accinte {

/**
 * Caps the bytes the caching allocator may reserve on `device` at
 * `fraction` (0 to 1) of the device's memory, as
 * `torch.cuda.set_per_process_memory_fraction`: a request that would
 * reserve more frees the cache, retries, then raises
 * `torch.OutOfMemoryError` as if the device were full.
 */
ACCINTE_EXPORT void setMemoryFraction(double fraction, c10::DeviceIndex device);

/** The cap of setMemoryFraction() for `device` (1 until one is set). */
ACCINTE_EXPORT double memoryFraction(c10::DeviceIndex device);

/**
 * `nbytes` of device memory from the caching allocator on the current device
 * and stream, owned by the caller until rawDelete() (as
 * `torch.cuda.caching_allocator_alloc`). 0 bytes give nullptr.
 */
ACCINTE_EXPORT void* rawAlloc(size_t nbytes);

/** Frees memory of rawAlloc(); raises for a pointer it did not return. */
ACCINTE_EXPORT void rawDelete(void* ptr);

/**
 * Switches the cache off (each tensor is then one device allocation, freed
 * when the tensor is) or on again, as `torch.cuda.caching_allocator_enable`.
 */
ACCINTE_EXPORT void setCachingAllocatorEnabled(bool enabled);

/** Whether the cache is on (it is unless switched off). */
ACCINTE_EXPORT bool cachingAllocatorEnabled();

/** One block of a segment, as `torch.cuda.memory_snapshot` reports it. */
struct BlockSnapshot {
  /** Where the block starts on the device. */
  uintptr_t address;
  /** Its size, rounded as the allocator rounds requests. */
  size_t size;
  /** What was asked for (0 unless a tensor uses the block). */
  size_t requested_size;
  /** "active_allocated", "active_pending_free" (freed, but a stream that
   * used it may still run) or "inactive" (cached). */
  std::string state;
};

/** One segment (one device allocation) and its blocks in address order. */
struct SegmentSnapshot {
  /** The device the segment is on. */
  c10::DeviceIndex device;
  /** Where the segment starts on the device. */
  uintptr_t address;
  /** Its size, as reserved from the device. */
  size_t total_size;
  /** The bytes of its blocks in use by tensors. */
  size_t allocated_size;
  /** The bytes of its blocks in use or waiting for a stream to finish. */
  size_t active_size;
  /** The bytes asked for by the allocations of its blocks in use. */
  size_t requested_size;
  /** The emulator handle of the stream the segment was reserved for. */
  uintptr_t stream;
  /** "small" or "large": the pool of the segment. */
  std::string segment_type;
  /** The private pool (MemPool) the segment belongs to; {0, 0} for the
   * allocator's general pools. */
  c10::MempoolId_t pool_id;
  /** Its blocks, in address order. */
  std::vector<BlockSnapshot> blocks;
};

// LITERALINCLUDE START: CH07_CALLBACK_API
/**
 * A function that gives device memory the process holds outside the
 * caching allocator's cache back to it, as CUDA's `FreeMemoryCallback`
 * (chapter 14 collects the memory of tensors sent to other processes that
 * every consumer has released). Returns whether it freed anything.
 */
using FreeMemoryCallback = bool (*)();

/**
 * Adds `callback` to the caching allocator's free-memory callbacks: when a
 * request finds no room on the device (or under the process's cap), the
 * allocator calls every callback, in the order they were registered, then
 * tries again, before it frees its cache and raises
 * `torch.OutOfMemoryError`. `name` (unique) names it in
 * freeMemoryCallbacks().
 *
 * NB: the callbacks run with none of the allocator's locks held, so they may
 * free (and allocate) tensors; they may run on any thread that allocates.
 */
ACCINTE_EXPORT void registerFreeMemoryCallback(const std::string& name,
                                               FreeMemoryCallback callback);

/** The names of the registered free-memory callbacks, oldest first. */
ACCINTE_EXPORT std::vector<std::string> freeMemoryCallbacks();
// LITERALINCLUDE END: CH07_CALLBACK_API

/** Every segment the caching allocator holds, of every device, ordered by
 * device and address. */
ACCINTE_EXPORT std::vector<SegmentSnapshot> memorySnapshot();

/**
 * Device memory functions of a shared library, as `CUDAPluggableAllocator`
 * takes them: `alloc` returns `size` bytes of device memory of `device`
 * for use on `stream` (nullptr when it has none), `free` takes back what
 * `alloc` returned, with the same size, device and stream.
 */
struct PluggableAllocator {
  /** Allocates device memory; nullptr means out of memory. */
  void* (*alloc)(ssize_t size, int device, accinteStream_t stream);
  /** Frees memory of `alloc`. */
  void (*free)(void* ptr, ssize_t size, int device, accinteStream_t stream);
};

/**
 * Makes `allocator` allocate every tensor from now on instead of the caching
 * allocator, as `torch.cuda.memory.change_current_allocator`: no cache, no
 * statistics, no pools. Raises once the caching allocator has allocated.
 */
ACCINTE_EXPORT void changeCurrentAllocator(
    std::shared_ptr<PluggableAllocator> allocator);

/** "native" (the caching allocator) or "pluggable" (after
 * changeCurrentAllocator()). */
ACCINTE_EXPORT std::string allocatorBackend();

/**
 * A private pool of the caching allocator, as `c10::cuda::MemPool`: its id
 * names the pool while allocations of a thread are routed to it
 * (beginAllocateToPool()). Its blocks serve no allocation outside the pool,
 * and the pool's blocks none outside; the pool's cached segments go back to
 * the device once the object is destroyed and its tensors are freed.
 */
class ACCINTE_EXPORT MemPool {
 public:
  /** A new pool on the current device, whose segments come from
   * `allocator` if one is given (else from accinteMalloc). */
  explicit MemPool(std::shared_ptr<PluggableAllocator> allocator = nullptr);
  ~MemPool();
  MemPool(const MemPool&) = delete;
  MemPool& operator=(const MemPool&) = delete;

  /** {0, n}: n counts the pools of the process from 1. */
  c10::MempoolId_t id() const {
    return id_;
  }
  /** The device the pool was made on. */
  c10::DeviceIndex device() const {
    return device_;
  }
  /** Where the pool's segments come from (nullptr: accinteMalloc). */
  const std::shared_ptr<PluggableAllocator>& allocator() const {
    return allocator_;
  }
  /** The references to the pool on its device: this object and each
   * use_mem_pool block that routes to it. */
  int useCount() const;

 private:
  c10::MempoolId_t id_;
  c10::DeviceIndex device_;
  std::shared_ptr<PluggableAllocator> allocator_;
};

/**
 * Routes the allocations of the calling thread on `device` to the pool `id`
 * (created on `device` with `allocator` if it has no such pool yet) and
 * takes a reference to it. While several pools route one thread, the one
 * routed first serves it, as on CUDA.
 */
ACCINTE_EXPORT void beginAllocateToPool(
    c10::DeviceIndex device, c10::MempoolId_t id,
    std::shared_ptr<PluggableAllocator> allocator = nullptr);

/** Ends the routing of beginAllocateToPool() (the reference stays). */
ACCINTE_EXPORT void endAllocateToPool(c10::DeviceIndex device,
                                      c10::MempoolId_t id);

// LITERALINCLUDE START: CH07_FILTERED_ROUTES
/** Which allocations a route takes, by the stream they are made on. */
using AllocationFilter = std::function<bool(accinteStream_t stream)>;

/**
 * Routes to the pool `id` on `device` (created if it has no such pool yet)
 * every allocation, of any thread, whose stream `filter` accepts, and takes
 * a reference to the pool; as CUDA's `beginAllocateToPool` with a filter,
 * which a graph's capture uses to give everything allocated on its
 * capturing streams (the autograd engine's threads included) a pool of its
 * own (chapter 15_graphs).
 */
ACCINTE_EXPORT void beginAllocateToPool(c10::DeviceIndex device,
                                        c10::MempoolId_t id,
                                        AllocationFilter filter);

/** Ends the filtered route of beginAllocateToPool() to `id` (the reference
 * stays). */
ACCINTE_EXPORT void endFilteredAllocateToPool(c10::DeviceIndex device,
                                              c10::MempoolId_t id);
// LITERALINCLUDE END: CH07_FILTERED_ROUTES

/** Drops a reference to pool `id` on `device`; at none, the pool's cached
 * segments go back to the device, the rest once their tensors are freed and
 * the cache is emptied. */
ACCINTE_EXPORT void releasePool(c10::DeviceIndex device, c10::MempoolId_t id);

/** The references to pool `id` on `device` (0 if it has no such pool). */
ACCINTE_EXPORT int poolUseCount(c10::DeviceIndex device, c10::MempoolId_t id);

/** The pools routing the calling thread's allocations on `device`, oldest
 * first. */
ACCINTE_EXPORT std::vector<c10::MempoolId_t> poolRoutes(
    c10::DeviceIndex device);

} // namespace accinte
