#pragma once

/**
 * @file
 * What chapter 07's caching device allocator offers beyond
 * `c10::DeviceAllocator`: the per-process memory cap, raw allocations and a
 * snapshot of its segments, for the `torch.accinte` functions of the same
 * names as `torch.cuda`'s.
 */

#include <accinte/export.h>

#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
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
  /** Its blocks, in address order. */
  std::vector<BlockSnapshot> blocks;
};

/** Every segment the caching allocator holds, of every device, ordered by
 * device and address. */
ACCINTE_EXPORT std::vector<SegmentSnapshot> memorySnapshot();

} // namespace accinte
