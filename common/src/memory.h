#pragma once

#include <accinte/runtime.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

namespace accinte::emulator {

/** Identifies one allocation for the whole life of the process.
 *
 * NB: the base address alone is not enough, because a freed address may be
 * handed out again by the next mmap(); work enqueued before a free must not
 * open the unrelated allocation that replaced it. */
struct AllocationRef {
  /** Start of the allocation. */
  uintptr_t base = 0;
  /** Serial number, unique per process. */
  uint64_t serial = 0;
};

/** What the registry knows about the allocation a pointer points into. */
struct AllocationInfo {
  /** ::accinteMemoryTypeDevice or ::accinteMemoryTypeHost. */
  accinteMemoryType type = accinteMemoryTypeUnregistered;
  /** Owning device, or -1 for pinned host memory. */
  int device = -1;
  /** Which allocation. */
  AllocationRef ref;
  /** Size requested by the caller. */
  size_t size = 0;
  /** True for device memory opened from another process's IPC handle. */
  bool imported = false;
};

struct IpcMemHandleData;

/**
 * Every live device and pinned host allocation of the process, ordered by
 * address so that any interior pointer can be resolved to its allocation.
 *
 * Device allocations are mappings that stay `PROT_NONE` except while at
 * least one copy, memset or kernel has them open (see open() and close()).
 */
class MemoryRegistry {
 public:
  /** The process-wide registry (intentionally never destroyed). */
  static MemoryRegistry& instance();

  /** Maps `size` (> 0) inaccessible bytes on `device`, within its capacity. */
  accinteError_t allocateDevice(int device, size_t size, void** ptr);

  /** Unmaps the device allocation `ref` once nothing has it open. The caller
   * has already drained the owning device's streams. */
  accinteError_t freeDevice(const AllocationRef& ref);

  /** Maps `size` (> 0) bytes of readable, writable, best-effort locked host
   * memory. */
  accinteError_t allocateHost(size_t size, void** ptr);

  /** Unmaps the pinned allocation `ref`. */
  accinteError_t freeHost(const AllocationRef& ref);

  /**
   * Describes the device allocation `ref` in `data`, first making it
   * shareable if it is not yet: its pages move to a memfd mapped at the same
   * address, once nothing has it open. Imported memory gives
   * ::accinteErrorInvalidValue.
   */
  accinteError_t exportDevice(const AllocationRef& ref, IpcMemHandleData* data);

  /** Maps the allocation `data` describes (checked against the exporter's
   * descriptor) and writes its base; the same allocation opened again gives
   * the same base and counts one more open. */
  accinteError_t importDevice(const IpcMemHandleData& data, void** ptr);

  /** Undoes one importDevice() of `ref`; the last one unmaps it once nothing
   * has it open. The caller has already drained every stream. */
  accinteError_t closeImported(const AllocationRef& ref);

  /** Resolves `ptr` (which may point inside an allocation). */
  std::optional<AllocationInfo> find(const void* ptr);

  /** Bytes allocated on `device`, counted as requested (not page-rounded). */
  size_t usedBytes(int device);

  /**
   * Makes the allocations readable and writable until the matching close().
   *
   * Returns false, leaving nothing open, if any of them has been freed since
   * `refs` was taken.
   */
  bool open(const std::vector<AllocationRef>& refs);

  /** Undoes one open() of each allocation. */
  void close(const std::vector<AllocationRef>& refs);

 private:
  /** One live allocation. */
  struct Allocation {
    size_t size = 0;
    size_t mappedSize = 0;
    int device = -1;
    accinteMemoryType type = accinteMemoryTypeUnregistered;
    uint64_t serial = 0;
    /** Number of operations currently using the allocation. */
    int openCount = 0;
    /** The memfd holding the pages once exported (else -1); closed by the
     * free. */
    int ipcFd = -1;
    /** The nonce in the memfd's name, once exported or if imported. */
    uint64_t ipcNonce = 0;
    /** For imported memory: the exporting process, else 0. */
    int32_t exporterPid = 0;
    /** Imported from another process (not counted in usedBytes_). */
    bool imported = false;
    /** For imported memory: opens not yet closed. */
    int importCount = 0;
  };

  /** Moves the pages of `allocation` at `base` into a new memfd mapped at
   * the same address. Needs mutex_, and nothing has it open. */
  accinteError_t makeShareableLocked(uintptr_t base, Allocation& allocation);

  MemoryRegistry() = default;

  /** Returns the live allocation `ref` designates, or nullptr. Needs mutex_.
   */
  Allocation* lookupLocked(const AllocationRef& ref);

  /** Waits (releasing `lock` meanwhile) until nothing has `ref` open; returns
   * it then, or nullptr if it was freed meanwhile. Needs mutex_ in `lock`. */
  Allocation* waitUntilClosedLocked(std::unique_lock<std::mutex>& lock,
                                    const AllocationRef& ref);

  /** Decrements the open count of `ref`, protecting it again at zero. Needs
   * mutex_. */
  void closeLocked(const AllocationRef& ref);

  std::mutex mutex_;
  /** Signalled whenever an allocation's open count drops to zero. */
  std::condition_variable allocationClosed_;
  std::map<uintptr_t, Allocation> allocations_;
  /** Requested bytes in use, per device. */
  std::vector<size_t> usedBytes_;
  uint64_t nextSerial_ = 1;
};

/** Waits for every operation enqueued so far on `device` (-1: on every
 * device) to finish, without consuming pending failures. */
void drainStreams(int device);

/**
 * Keeps a set of allocations open for as long as it lives.
 *
 * Construct it, check ok(), then touch the memory; the destructor closes.
 */
class OpenAllocations {
 public:
  /** Opens every allocation of `refs`. */
  explicit OpenAllocations(std::vector<AllocationRef> refs);
  ~OpenAllocations();
  OpenAllocations(const OpenAllocations&) = delete;
  OpenAllocations& operator=(const OpenAllocations&) = delete;

  /** False if some allocation was freed before it could be opened. */
  bool ok() const {
    return opened_;
  }

 private:
  std::vector<AllocationRef> refs_;
  bool opened_ = false;
};

} // namespace accinte::emulator
