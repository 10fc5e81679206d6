#include "ipc.h"

#include "event.h"
#include "lifecycle.h"
#include "memory.h"
#include "stream.h"
#include "trace.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <random>

namespace accinte::emulator {

namespace {

/** Reads `/proc/<pid>/stat`: the state letter and the start time. False if
 * the process does not exist (any more). */
bool readProcStat(int32_t pid, char* state, uint64_t* startTime) {
  // NB: plain system calls, not a stream: a process that ends while its
  // file is read makes the read fail (ESRCH), which a C++ stream may turn
  // into an exception, and this runs on stream workers and inside C calls.
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return false;
  }
  char buffer[1024];
  size_t length = 0;
  while (length < sizeof(buffer) - 1) {
    const ssize_t n = ::read(fd, buffer + length, sizeof(buffer) - 1 - length);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      if (n < 0) {
        ::close(fd);
        return false;
      }
      break;
    }
    length += static_cast<size_t>(n);
  }
  ::close(fd);
  buffer[length] = '\0';
  // NB: field 2, the command name, is in parentheses and may itself contain
  // spaces and parentheses; the fields after the last ')' are plain.
  const char* close = std::strrchr(buffer, ')');
  if (close == nullptr) {
    return false;
  }
  // Field 3 is the state; field 22 the start time.
  const char* cursor = close + 1;
  for (int index = 3; index <= 22; ++index) {
    while (*cursor == ' ') {
      ++cursor;
    }
    if (*cursor == '\0') {
      return false;
    }
    if (index == 3) {
      *state = *cursor;
    }
    if (index == 22) {
      *startTime = std::strtoull(cursor, nullptr, 10);
      return true;
    }
    while (*cursor != ' ' && *cursor != '\0') {
      ++cursor;
    }
  }
  return false;
}

} // namespace

const ProcessIdentity& selfIdentity() {
  // NB: recomputed when the pid changed: a child forked before the runtime
  // was initialised may use it, and is another process.
  thread_local ProcessIdentity identity;
  const auto pid = static_cast<int32_t>(getpid());
  if (identity.pid != pid) {
    char state = 0;
    uint64_t startTime = 0;
    identity.startTime = readProcStat(pid, &state, &startTime) ? startTime : 0;
    identity.pid = pid;
  }
  return identity;
}

bool processIsAlive(const ProcessIdentity& identity) {
  char state = 0;
  uint64_t startTime = 0;
  if (!readProcStat(identity.pid, &state, &startTime)) {
    return false;
  }
  // A zombie (Z) or dead (X) process runs no more work.
  return state != 'Z' && state != 'X' && startTime == identity.startTime;
}

uint64_t newIpcNonce() {
  uint64_t nonce = 0;
  if (getrandom(&nonce, sizeof(nonce), 0) ==
      static_cast<ssize_t>(sizeof(nonce))) {
    return nonce;
  }
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

std::string ipcMemfdName(const char* prefix, uint64_t nonce) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(nonce));
  return std::string(prefix) + hex;
}

int createIpcMemfd(const char* prefix, uint64_t nonce, size_t size) {
  const std::string name = ipcMemfdName(prefix, nonce);
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) {
    return -1;
  }
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int error = errno;
    close(fd);
    errno = error;
    return -1;
  }
  return fd;
}

accinteError_t ipcResourceError(int error) {
  return error == EMFILE || error == ENFILE ? accinteErrorOperatingSystem
                                            : accinteErrorMemoryAllocation;
}

// LITERALINCLUDE START: EMULATOR_IPC_OPEN_PEER
int openPeerMemfd(const ProcessIdentity& owner, int fd, const char* prefix,
                  uint64_t nonce, size_t minSize) {
  if (owner.pid <= 0 || fd < 0 || !processIsAlive(owner)) {
    return -1;
  }
  // NB: the owner's descriptor, reopened through procfs: Linux lets a
  // process of the same user open another's open files this way (the same
  // check as reading its memory). The result is a new open file of the same
  // memfd, so the memory outlives the owner's descriptor.
  const std::string path =
      "/proc/" + std::to_string(owner.pid) + "/fd/" + std::to_string(fd);
  // LITERALINCLUDE EMPHASIZE NEXT
  const int local = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (local < 0) {
    return -1;
  }
  // NB: checked on the descriptor opened, not on the owner's: the owner may
  // have closed its descriptor and reused the number for another file since
  // the handle was made. The nonce in the name tells the files apart.
  char target[256];
  const std::string self = "/proc/self/fd/" + std::to_string(local);
  const ssize_t length = readlink(self.c_str(), target, sizeof(target) - 1);
  const std::string expected = "/memfd:" + ipcMemfdName(prefix, nonce);
  struct stat status;
  bool ok = length > 0 && fstat(local, &status) == 0 &&
            static_cast<uint64_t>(status.st_size) >= minSize;
  if (ok) {
    target[length] = '\0';
    const std::string actual(target);
    // LITERALINCLUDE EMPHASIZE NEXT 2
    ok = actual == expected || actual == expected + " (deleted)";
  }
  // The owner's pid may have been reused between the checks: check it again
  // now that the file is held.
  if (!ok || !processIsAlive(owner)) {
    close(local);
    return -1;
  }
  return local;
}
// LITERALINCLUDE END: EMULATOR_IPC_OPEN_PEER

uint64_t packRecorder(const ProcessIdentity& identity) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(identity.pid)) << 32) |
         (identity.startTime & 0xffffffffu);
}

bool recorderIsAlive(uint64_t recorder) {
  ProcessIdentity identity;
  identity.pid = static_cast<int32_t>(recorder >> 32);
  char state = 0;
  uint64_t startTime = 0;
  if (!readProcStat(identity.pid, &state, &startTime)) {
    return false;
  }
  return state != 'Z' && state != 'X' &&
         (startTime & 0xffffffffu) == (recorder & 0xffffffffu);
}

void futexWakeAll(std::atomic<uint32_t>* word) {
  // NB: not FUTEX_PRIVATE_FLAG: the word is in a shared mapping, and the
  // waiters are in other processes.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX,
          nullptr, nullptr, 0);
}

void futexWait(std::atomic<uint32_t>* word, uint32_t expected, int timeoutMs) {
  struct timespec timeout;
  timeout.tv_sec = timeoutMs / 1000;
  timeout.tv_nsec = static_cast<long>(timeoutMs % 1000) * 1000000L;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected,
          &timeout, nullptr, 0);
}

} // namespace accinte::emulator

using namespace accinte::emulator;

namespace {

/** Copies a handle's bytes into `data`; false unless `magic` and the
 * version match. */
template <typename Data>
bool decodeHandle(const char (&bytes)[ACCINTE_IPC_HANDLE_SIZE], uint32_t magic,
                  Data* data) {
  std::memcpy(data, bytes, sizeof(*data));
  return data->magic == magic && data->version == kIpcHandleVersion;
}

} // namespace

accinteError_t accinteIpcGetMemHandle(accinteIpcMemHandle_t* handle,
                                      void* ptr) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteIpcGetMemHandle");
  if (handle == nullptr) {
    return accinteErrorInvalidValue;
  }
  // NB: the first export waits until no copy or kernel has the allocation
  // open; from inside one, that could be forever.
  ACCINTE_RETURN_IF_ERROR(checkNotOnStreamWorker());
  auto info = MemoryRegistry::instance().find(ptr);
  if (!info || info->type != accinteMemoryTypeDevice) {
    return accinteErrorInvalidDevicePointer;
  }
  if (info->imported) {
    return accinteErrorInvalidValue;
  }
  IpcMemHandleData data;
  ACCINTE_RETURN_IF_ERROR(
      MemoryRegistry::instance().exportDevice(info->ref, &data));
  std::memset(handle->reserved, 0, sizeof(handle->reserved));
  std::memcpy(handle->reserved, &data, sizeof(data));
  return accinteSuccess;
}

accinteError_t accinteIpcOpenMemHandle(void** ptr, accinteIpcMemHandle_t handle,
                                       unsigned int flags) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteIpcOpenMemHandle");
  if (ptr == nullptr || (flags & ~static_cast<unsigned int>(
                                     accinteIpcMemLazyEnablePeerAccess)) != 0) {
    return accinteErrorInvalidValue;
  }
  *ptr = nullptr;
  IpcMemHandleData data;
  if (!decodeHandle(handle.reserved, kIpcMemMagic, &data) ||
      data.pid == selfIdentity().pid || data.size == 0 ||
      data.mappedSize < data.size) {
    return accinteErrorInvalidIpcHandle;
  }
  ACCINTE_RETURN_IF_ERROR(checkDevice(data.device));
  markInitialised();
  return MemoryRegistry::instance().importDevice(data, ptr);
}

accinteError_t accinteIpcCloseMemHandle(void* ptr) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteIpcCloseMemHandle");
  ACCINTE_RETURN_IF_ERROR(checkNotOnStreamWorker());
  auto info = MemoryRegistry::instance().find(ptr);
  if (!info || !info->imported ||
      info->ref.base != reinterpret_cast<uintptr_t>(ptr)) {
    return accinteErrorInvalidDevicePointer;
  }
  // NB: every stream of every device, on every close: a copy from this
  // memory may be queued on another device's stream, and the caller will
  // tell the exporter that it may reuse the memory once this returns.
  drainStreams(-1);
  return MemoryRegistry::instance().closeImported(info->ref);
}

accinteError_t accinteIpcGetEventHandle(accinteIpcEventHandle_t* handle,
                                        accinteEvent_t event) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (handle == nullptr) {
    return accinteErrorInvalidValue;
  }
  std::shared_ptr<Event> resolved;
  ACCINTE_RETURN_IF_ERROR(EventRegistry::instance().resolve(event, &resolved));
  // NB: an event opened from a handle is re-exported by the process that
  // created it, not by an importer (which holds no descriptor of its page).
  if (!resolved->shared() || resolved->isOpened()) {
    return accinteErrorInvalidResourceHandle;
  }
  const ProcessIdentity& self = selfIdentity();
  IpcEventHandleData data;
  std::memset(&data, 0, sizeof(data));
  data.magic = kIpcEventMagic;
  data.version = kIpcHandleVersion;
  data.pid = self.pid;
  data.fd = resolved->shared()->fd();
  data.startTime = self.startTime;
  data.nonce = resolved->shared()->nonce();
  data.offset = resolved->shared()->offset();
  data.eventId = resolved->shared()->eventId();
  std::memset(handle->reserved, 0, sizeof(handle->reserved));
  std::memcpy(handle->reserved, &data, sizeof(data));
  return accinteSuccess;
}

accinteError_t accinteIpcOpenEventHandle(accinteEvent_t* event,
                                         accinteIpcEventHandle_t handle) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (event == nullptr) {
    return accinteErrorInvalidValue;
  }
  IpcEventHandleData data;
  if (!decodeHandle(handle.reserved, kIpcEventMagic, &data) ||
      data.pid == selfIdentity().pid) {
    return accinteErrorInvalidIpcHandle;
  }
  auto shared = SharedEventState::open(data);
  if (!shared) {
    return accinteErrorInvalidIpcHandle;
  }
  auto opened = std::make_shared<Event>(
      static_cast<unsigned int>(accinteEventDisableTiming |
                                accinteEventInterprocess),
      std::move(shared), /*opened=*/true);
  return EventRegistry::instance().add(std::move(opened), event);
}
