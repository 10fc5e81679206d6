#include "memory.h"

#include "config.h"
#include "graph.h"
#include "ipc.h"
#include "lifecycle.h"
#include "stream.h"
#include "trace.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <limits>
#include <utility>

namespace accinte::emulator {

namespace {

/** Rounds `size` up to a multiple of `unit`; 0 if that overflows. */
size_t roundUp(size_t size, size_t unit) {
  if (size > std::numeric_limits<size_t>::max() - (unit - 1)) {
    return 0;
  }
  return (size + unit - 1) / unit * unit;
}

/** Rounds `size` up to whole pages; 0 if that overflows. */
size_t roundUpToPages(size_t size) {
  static const size_t pageSize = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return roundUp(size, pageSize);
}

/** The size of a transparent huge page on x86-64 and most arm64 kernels. */
constexpr size_t kHugePageSize = size_t{2} << 20;

/** The size of the mapping that holds a device allocation of `size` bytes:
 * whole pages, and whole huge pages from one huge page on; 0 on overflow. */
size_t deviceMappingSize(size_t size) {
  return size < kHugePageSize ? roundUpToPages(size)
                              : roundUp(size, kHugePageSize);
}

/** Copies the pages of `src` that are not all zero to `dst`, which is
 * zero-filled; `size` is a whole number of pages. */
void copyNonZeroPages(unsigned char* dst, const unsigned char* src,
                      size_t size) {
  static const size_t pageSize = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // NB: a device allocation is MAP_NORESERVE and mostly never written; its
  // untouched pages read as the shared zero page. Writing them all to the
  // memfd would commit host memory for the whole allocation.
  for (size_t offset = 0; offset < size; offset += pageSize) {
    const unsigned char* page = src + offset;
    bool zero = true;
    for (size_t i = 0; i < pageSize; i += sizeof(uint64_t)) {
      uint64_t word = 0;
      std::memcpy(&word, page + i, sizeof(word));
      if (word != 0) {
        zero = false;
        break;
      }
    }
    if (!zero) {
      std::memcpy(dst + offset, page, pageSize);
    }
  }
}

} // namespace

void drainStreams(int device) {
  for (auto& stream : StreamRegistry::instance().streamsOf(device)) {
    stream->waitIdle();
  }
}

MemoryRegistry& MemoryRegistry::instance() {
  // NB: leaked on purpose. Worker threads may still close allocations while
  // the process runs its exit handlers; a registry with static storage could
  // already be destroyed by then. The pointer keeps it reachable, so leak
  // checkers do not report it.
  static MemoryRegistry* registry = new MemoryRegistry();
  return *registry;
}

// LITERALINCLUDE START: EMULATOR_MALLOC
accinteError_t MemoryRegistry::allocateDevice(int device, size_t size,
                                              void** ptr) {
  const size_t capacity = config().deviceMemory;
  {
    // Reserve the capacity first so that concurrent requests cannot both
    // succeed past it.
    std::lock_guard<std::mutex> lock(mutex_);
    usedBytes_.resize(static_cast<size_t>(config().deviceCount), 0);
    // LITERALINCLUDE EMPHASIZE NEXT 2
    if (size > capacity - usedBytes_[device]) {
      return accinteErrorMemoryAllocation;
    }
    usedBytes_[device] += size;
  }
  // NB: PROT_NONE makes every host access fault, as a device pointer would
  // on real hardware; MAP_NORESERVE lets a large emulated capacity exist
  // without committing host memory until pages are written.
  const size_t mappedSize = deviceMappingSize(size);
  // LITERALINCLUDE EMPHASIZE NEXT 5
  void* mapping =
      mappedSize == 0
          ? MAP_FAILED
          : mmap(nullptr, mappedSize, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  // NB: every open and close of the allocation (an mprotect) rewrites one
  // page-table entry per page, so with 4 KiB pages a 64 MiB tensor costs
  // milliseconds per kernel. Huge pages make that 512 times fewer entries.
  // The advice is a hint: where the kernel has no transparent huge pages,
  // or none free, the allocation keeps small pages and works the same.
  if (mapping != MAP_FAILED && mappedSize >= kHugePageSize) {
    (void)madvise(mapping, mappedSize, MADV_HUGEPAGE);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (mapping == MAP_FAILED) {
    usedBytes_[device] -= size;
    return accinteErrorMemoryAllocation;
  }
  Allocation allocation;
  allocation.size = size;
  allocation.mappedSize = mappedSize;
  allocation.device = device;
  allocation.type = accinteMemoryTypeDevice;
  allocation.serial = nextSerial_++;
  allocations_.emplace(reinterpret_cast<uintptr_t>(mapping), allocation);
  *ptr = mapping;
  return accinteSuccess;
}
// LITERALINCLUDE END: EMULATOR_MALLOC

accinteError_t MemoryRegistry::freeDevice(const AllocationRef& ref) {
  std::unique_lock<std::mutex> lock(mutex_);
  // NB: the serial, not just the address, must match: after a concurrent
  // accinteFree() of the same pointer, the address may already belong to a
  // new allocation.
  Allocation* allocation = lookupLocked(ref);
  if (allocation == nullptr) {
    return accinteErrorInvalidDevicePointer;
  }
  // A copy enqueued on another device's stream may still be using it.
  allocation = waitUntilClosedLocked(lock, ref);
  if (allocation == nullptr) {
    return accinteErrorInvalidDevicePointer;
  }
  if (allocation->imported) {
    return accinteErrorInvalidDevicePointer;
  }
  const size_t mappedSize = allocation->mappedSize;
  const int ipcFd = allocation->ipcFd;
  usedBytes_[allocation->device] -= allocation->size;
  allocations_.erase(ref.base);
  lock.unlock();
  munmap(reinterpret_cast<void*>(ref.base), mappedSize);
  // NB: closed after the unmap: from here on, a handle of the allocation no
  // longer opens (its descriptor is gone from /proc/<pid>/fd), while the
  // processes that opened it keep their own mappings of the memfd.
  if (ipcFd >= 0) {
    ::close(ipcFd);
  }
  return accinteSuccess;
}

// LITERALINCLUDE START: EMULATOR_IPC_SHARE
accinteError_t MemoryRegistry::makeShareableLocked(uintptr_t base,
                                                   Allocation& allocation) {
  void* const address = reinterpret_cast<void*>(base);
  const size_t mappedSize = allocation.mappedSize;
  const uint64_t nonce = newIpcNonce();
  const int fd = createIpcMemfd(kIpcMemPrefix, nonce, mappedSize);
  if (fd < 0) {
    // NB: most often the process's limit of open files: each exported
    // allocation keeps one open, for importers to open it through.
    return ipcResourceError(errno);
  }
  void* staging = mmap(nullptr, mappedSize, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (staging == MAP_FAILED) {
    ::close(fd);
    return accinteErrorMemoryAllocation;
  }
  // The contents so far move into the memfd...
  mprotect(address, mappedSize, PROT_READ);
  copyNonZeroPages(static_cast<unsigned char*>(staging),
                   static_cast<const unsigned char*>(address), mappedSize);
  munmap(staging, mappedSize);
  // ...which then replaces the private pages at the same address, so that
  // every pointer into the allocation, queued work included, stays valid.
  // LITERALINCLUDE EMPHASIZE NEXT 2
  void* mapping = mmap(address, mappedSize, PROT_NONE,
                       MAP_SHARED | MAP_FIXED | MAP_NORESERVE, fd, 0);
  if (mapping != address) {
    // NB: MAP_FIXED over an existing mapping of the same size only fails if
    // the kernel is out of memory for its bookkeeping; the old pages are
    // still there then, protected again.
    mprotect(address, mappedSize, PROT_NONE);
    ::close(fd);
    return accinteErrorMemoryAllocation;
  }
  if (mappedSize >= kHugePageSize) {
    (void)madvise(mapping, mappedSize, MADV_HUGEPAGE);
  }
  allocation.ipcFd = fd;
  allocation.ipcNonce = nonce;
  return accinteSuccess;
}
// LITERALINCLUDE END: EMULATOR_IPC_SHARE

accinteError_t MemoryRegistry::exportDevice(const AllocationRef& ref,
                                            IpcMemHandleData* data) {
  std::unique_lock<std::mutex> lock(mutex_);
  Allocation* allocation = lookupLocked(ref);
  if (allocation == nullptr || allocation->type != accinteMemoryTypeDevice) {
    return accinteErrorInvalidDevicePointer;
  }
  if (allocation->imported) {
    return accinteErrorInvalidValue;
  }
  if (allocation->ipcFd < 0) {
    // NB: a copy or kernel running on it would write to the private pages
    // while they are copied; queued work is not in the way, since it
    // designates the allocation by address and serial, which stay the same.
    allocation = waitUntilClosedLocked(lock, ref);
    if (allocation == nullptr) {
      return accinteErrorInvalidDevicePointer;
    }
    if (allocation->ipcFd < 0) {
      ACCINTE_RETURN_IF_ERROR(makeShareableLocked(ref.base, *allocation));
    }
  }
  const ProcessIdentity& self = selfIdentity();
  std::memset(data, 0, sizeof(*data));
  data->magic = kIpcMemMagic;
  data->version = kIpcHandleVersion;
  data->pid = self.pid;
  data->fd = allocation->ipcFd;
  data->startTime = self.startTime;
  data->nonce = allocation->ipcNonce;
  data->size = allocation->size;
  data->mappedSize = allocation->mappedSize;
  data->device = allocation->device;
  return accinteSuccess;
}

accinteError_t MemoryRegistry::importDevice(const IpcMemHandleData& data,
                                            void** ptr) {
  const auto findImported = [&]() -> Allocation* {
    for (auto& entry : allocations_) {
      Allocation& allocation = entry.second;
      if (allocation.imported && allocation.importCount > 0 &&
          allocation.ipcNonce == data.nonce &&
          allocation.exporterPid == data.pid) {
        *ptr = reinterpret_cast<void*>(entry.first);
        return &allocation;
      }
    }
    return nullptr;
  };
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (Allocation* existing = findImported()) {
      ++existing->importCount;
      return accinteSuccess;
    }
  }
  const size_t mappedSize = static_cast<size_t>(data.mappedSize);
  const int fd = openPeerMemfd({data.pid, data.startTime}, data.fd,
                               kIpcMemPrefix, data.nonce, mappedSize);
  if (fd < 0) {
    return accinteErrorInvalidIpcHandle;
  }
  // LITERALINCLUDE START: EMULATOR_IPC_IMPORT
  // NB: the mapping holds the memfd's pages by itself: the descriptor can
  // go, and the memory stays until this process unmaps it, whatever the
  // exporter does meanwhile.
  // LITERALINCLUDE EMPHASIZE NEXT 2
  void* mapping =
      mmap(nullptr, mappedSize, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  ::close(fd);
  // LITERALINCLUDE END: EMULATOR_IPC_IMPORT
  if (mapping == MAP_FAILED) {
    return accinteErrorMemoryAllocation;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (Allocation* existing = findImported()) {
    // Opened by another thread meanwhile: keep the first mapping.
    ++existing->importCount;
    munmap(mapping, mappedSize);
    return accinteSuccess;
  }
  Allocation allocation;
  allocation.size = static_cast<size_t>(data.size);
  allocation.mappedSize = mappedSize;
  allocation.device = data.device;
  allocation.type = accinteMemoryTypeDevice;
  allocation.serial = nextSerial_++;
  allocation.ipcNonce = data.nonce;
  allocation.exporterPid = data.pid;
  allocation.imported = true;
  allocation.importCount = 1;
  allocations_.emplace(reinterpret_cast<uintptr_t>(mapping), allocation);
  *ptr = mapping;
  return accinteSuccess;
}

accinteError_t MemoryRegistry::closeImported(const AllocationRef& ref) {
  std::unique_lock<std::mutex> lock(mutex_);
  Allocation* allocation = lookupLocked(ref);
  if (allocation == nullptr || !allocation->imported) {
    return accinteErrorInvalidDevicePointer;
  }
  if (--allocation->importCount > 0) {
    return accinteSuccess;
  }
  // Work of another thread, enqueued after the caller drained, may use it.
  allocation = waitUntilClosedLocked(lock, ref);
  if (allocation == nullptr) {
    return accinteSuccess;
  }
  const size_t mappedSize = allocation->mappedSize;
  allocations_.erase(ref.base);
  lock.unlock();
  munmap(reinterpret_cast<void*>(ref.base), mappedSize);
  return accinteSuccess;
}

accinteError_t MemoryRegistry::allocateHost(size_t size, void** ptr) {
  const size_t mappedSize = roundUpToPages(size);
  if (mappedSize == 0) {
    return accinteErrorHostMemoryAllocation;
  }
  void* mapping = mmap(nullptr, mappedSize, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) {
    return accinteErrorHostMemoryAllocation;
  }
  // NB: best effort only. Locking is what "pinned" means, but the
  // RLIMIT_MEMLOCK of an unprivileged process is small, and the emulator's
  // copies are plain memcpy() calls that work on unlocked pages just as well.
  (void)mlock(mapping, mappedSize);
  std::lock_guard<std::mutex> lock(mutex_);
  Allocation allocation;
  allocation.size = size;
  allocation.mappedSize = mappedSize;
  allocation.device = -1;
  allocation.type = accinteMemoryTypeHost;
  allocation.serial = nextSerial_++;
  allocations_.emplace(reinterpret_cast<uintptr_t>(mapping), allocation);
  *ptr = mapping;
  return accinteSuccess;
}

accinteError_t MemoryRegistry::freeHost(const AllocationRef& ref) {
  size_t mappedSize = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Allocation* allocation = lookupLocked(ref);
    if (allocation == nullptr) {
      return accinteErrorInvalidHostPointer;
    }
    mappedSize = allocation->mappedSize;
    allocations_.erase(ref.base);
  }
  munmap(reinterpret_cast<void*>(ref.base), mappedSize);
  return accinteSuccess;
}

// LITERALINCLUDE START: EMULATOR_POINTER_LOOKUP
std::optional<AllocationInfo> MemoryRegistry::find(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  // The allocation containing `address`, if any, is the last one starting at
  // or before it.
  auto it = allocations_.upper_bound(address);
  if (it == allocations_.begin()) {
    return std::nullopt;
  }
  --it;
  if (address - it->first >= it->second.size) {
    return std::nullopt;
  }
  AllocationInfo info;
  info.type = it->second.type;
  info.device = it->second.device;
  info.ref = AllocationRef{it->first, it->second.serial};
  info.size = it->second.size;
  info.imported = it->second.imported;
  return info;
}
// LITERALINCLUDE END: EMULATOR_POINTER_LOOKUP

size_t MemoryRegistry::usedBytes(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto index = static_cast<size_t>(device);
  return index < usedBytes_.size() ? usedBytes_[index] : 0;
}

MemoryRegistry::Allocation* MemoryRegistry::waitUntilClosedLocked(
    std::unique_lock<std::mutex>& lock, const AllocationRef& ref) {
  Allocation* allocation = nullptr;
  allocationClosed_.wait(lock, [&] {
    allocation = lookupLocked(ref);
    return allocation == nullptr || allocation->openCount == 0;
  });
  return allocation;
}

MemoryRegistry::Allocation* MemoryRegistry::lookupLocked(
    const AllocationRef& ref) {
  auto it = allocations_.find(ref.base);
  if (it == allocations_.end() || it->second.serial != ref.serial) {
    return nullptr;
  }
  return &it->second;
}

// LITERALINCLUDE START: EMULATOR_OPEN_CLOSE
bool MemoryRegistry::open(const std::vector<AllocationRef>& refs) {
  // NB: counting under one lock is what makes sharing safe: two kernels on
  // two streams may use the same allocation at once, and only the last one
  // to finish may make it inaccessible again.
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < refs.size(); ++i) {
    Allocation* allocation = lookupLocked(refs[i]);
    bool opened = allocation != nullptr;
    // LITERALINCLUDE EMPHASIZE NEXT 3
    if (opened && allocation->openCount == 0) {
      opened = mprotect(reinterpret_cast<void*>(refs[i].base),
                        allocation->mappedSize, PROT_READ | PROT_WRITE) == 0;
    }
    if (!opened) {
      // Freed since the operation was enqueued: undo what was opened.
      for (size_t j = 0; j < i; ++j) {
        closeLocked(refs[j]);
      }
      return false;
    }
    ++allocation->openCount; // LITERALINCLUDE EMPHASIZE
  }
  return true;
}

void MemoryRegistry::closeLocked(const AllocationRef& ref) {
  Allocation* allocation = lookupLocked(ref);
  // LITERALINCLUDE EMPHASIZE NEXT
  if (allocation == nullptr || --allocation->openCount > 0) {
    return;
  }
  // LITERALINCLUDE EMPHASIZE NEXT 2
  mprotect(reinterpret_cast<void*>(ref.base), allocation->mappedSize,
           PROT_NONE);
  allocationClosed_.notify_all();
}
// LITERALINCLUDE END: EMULATOR_OPEN_CLOSE

void MemoryRegistry::close(const std::vector<AllocationRef>& refs) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& ref : refs) {
    closeLocked(ref);
  }
}

OpenAllocations::OpenAllocations(std::vector<AllocationRef> refs)
    : refs_(std::move(refs)) {
  opened_ = MemoryRegistry::instance().open(refs_);
}

OpenAllocations::~OpenAllocations() {
  if (opened_) {
    MemoryRegistry::instance().close(refs_);
  }
}

} // namespace accinte::emulator

using namespace accinte::emulator;

accinteError_t accinteMalloc(void** ptr, size_t size) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteMalloc");
  if (ptr == nullptr) {
    return accinteErrorInvalidValue;
  }
  *ptr = nullptr;
  ACCINTE_RETURN_IF_ERROR(checkBlockingAllowed());
  if (size == 0) {
    return accinteSuccess;
  }
  markInitialised();
  return MemoryRegistry::instance().allocateDevice(currentDevice(), size, ptr);
}

accinteError_t accinteFree(void* ptr) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteFree");
  ACCINTE_RETURN_IF_ERROR(checkNotOnStreamWorker());
  ACCINTE_RETURN_IF_ERROR(checkBlockingAllowed());
  if (ptr == nullptr) {
    return accinteSuccess;
  }
  auto info = MemoryRegistry::instance().find(ptr);
  if (!info || info->type != accinteMemoryTypeDevice || info->imported ||
      info->ref.base != reinterpret_cast<uintptr_t>(ptr)) {
    return accinteErrorInvalidDevicePointer;
  }
  // Like cudaFree: nothing already enqueued on the device may still use it.
  drainStreams(info->device);
  return MemoryRegistry::instance().freeDevice(info->ref);
}

accinteError_t accinteMemGetInfo(size_t* free, size_t* total) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (free == nullptr || total == nullptr) {
    return accinteErrorInvalidValue;
  }
  *total = config().deviceMemory;
  *free = *total - MemoryRegistry::instance().usedBytes(currentDevice());
  return accinteSuccess;
}

accinteError_t accintePointerGetAttributes(accintePointerAttributes* attributes,
                                           const void* ptr) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (attributes == nullptr) {
    return accinteErrorInvalidValue;
  }
  auto info = MemoryRegistry::instance().find(ptr);
  if (!info) {
    attributes->type = accinteMemoryTypeUnregistered;
    attributes->device = -1;
    attributes->base = nullptr;
    attributes->size = 0;
    return accinteSuccess;
  }
  attributes->type = info->type;
  attributes->device = info->device;
  attributes->base = reinterpret_cast<void*>(info->ref.base);
  attributes->size = info->size;
  return accinteSuccess;
}

accinteError_t accinteMallocHost(void** ptr, size_t size) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteMallocHost");
  if (ptr == nullptr) {
    return accinteErrorInvalidValue;
  }
  *ptr = nullptr;
  ACCINTE_RETURN_IF_ERROR(checkBlockingAllowed());
  if (size == 0) {
    return accinteSuccess;
  }
  markInitialised();
  return MemoryRegistry::instance().allocateHost(size, ptr);
}

accinteError_t accinteFreeHost(void* ptr) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteFreeHost");
  ACCINTE_RETURN_IF_ERROR(checkNotOnStreamWorker());
  ACCINTE_RETURN_IF_ERROR(checkBlockingAllowed());
  if (ptr == nullptr) {
    return accinteSuccess;
  }
  auto info = MemoryRegistry::instance().find(ptr);
  if (!info || info->type != accinteMemoryTypeHost ||
      info->ref.base != reinterpret_cast<uintptr_t>(ptr)) {
    return accinteErrorInvalidHostPointer;
  }
  // NB: like cudaFreeHost, wait for all streams: an asynchronous copy from or
  // to this memory may be queued on any device.
  drainStreams(-1);
  return MemoryRegistry::instance().freeHost(info->ref);
}

accinteError_t accinteHostIsPinned(const void* ptr, int* is_pinned) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (is_pinned == nullptr) {
    return accinteErrorInvalidValue;
  }
  auto info = MemoryRegistry::instance().find(ptr);
  *is_pinned = info && info->type == accinteMemoryTypeHost ? 1 : 0;
  return accinteSuccess;
}
