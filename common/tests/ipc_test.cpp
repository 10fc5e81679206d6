// Interprocess memory and events: the argument checks in one process, and
// the sharing itself between this process and scenarios it starts.

#include "test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using accinte::testing::DeviceBuffer;
using accinte::testing::Gate;

namespace {

// ---------------------------------------------------------------------------
// Helpers: handles as hex, and a child process with a pipe each way.
// ---------------------------------------------------------------------------

template <typename Handle>
std::string toHex(const Handle& handle) {
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (char byte : handle.reserved) {
    const auto value = static_cast<unsigned char>(byte);
    hex += digits[value >> 4];
    hex += digits[value & 15];
  }
  return hex;
}

template <typename Handle>
bool fromHex(const std::string& hex, Handle* handle) {
  if (hex.size() != 2 * sizeof(handle->reserved)) {
    return false;
  }
  for (size_t i = 0; i < sizeof(handle->reserved); ++i) {
    handle->reserved[i] =
        static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return true;
}

/** Writes `line` and a newline to `fd`. */
bool sendLine(int fd, const std::string& line) {
  const std::string data = line + "\n";
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = write(fd, data.data() + written, data.size() - written);
    if (n <= 0) {
      return false;
    }
    written += static_cast<size_t>(n);
  }
  return true;
}

/** Reads one line from `fd` (without its newline); "" at end of file. */
std::string receiveLine(int fd) {
  std::string line;
  char c = 0;
  while (read(fd, &c, 1) == 1) {
    if (c == '\n') {
      return line;
    }
    line += c;
  }
  return line;
}

/** The variable that tells a scenario its pipe descriptors: "in,out". */
constexpr const char* kPipesVariable = "IPC_TEST_PIPES";

/**
 * A scenario running in a child process, with a pipe to it and one back.
 * The destructor kills the child if a failed assertion left it running.
 */
class Peer {
 public:
  Peer(const std::string& scenario, std::vector<std::string> env) {
    int toChild[2];
    int fromChild[2];
    if (pipe2(toChild, O_CLOEXEC) != 0 || pipe2(fromChild, O_CLOEXEC) != 0) {
      return;
    }
    // Only the child's ends are inherited.
    fcntl(toChild[0], F_SETFD, 0);
    fcntl(fromChild[1], F_SETFD, 0);
    env.push_back(std::string(kPipesVariable) + "=" +
                  std::to_string(toChild[0]) + "," +
                  std::to_string(fromChild[1]));
    pid_ = accinte::testing::startScenario(scenario, env);
    close(toChild[0]);
    close(fromChild[1]);
    out_ = toChild[1];
    in_ = fromChild[0];
  }
  ~Peer() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      accinte::testing::waitScenario(pid_);
    }
    close(out_);
    close(in_);
  }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  bool started() const {
    return pid_ > 0;
  }
  bool send(const std::string& line) {
    return sendLine(out_, line);
  }
  std::string receive() {
    return receiveLine(in_);
  }
  /** Everything the child writes until it exits. */
  std::string receiveRest() {
    std::string rest;
    char chunk[512];
    ssize_t n = 0;
    while ((n = read(in_, chunk, sizeof(chunk))) > 0) {
      rest.append(chunk, static_cast<size_t>(n));
    }
    return rest;
  }
  /** Waits until the child has exited, leaving it a zombie (not reaped). */
  bool waitExitedUnreaped() {
    siginfo_t info{};
    return waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) ==
           0;
  }
  /** Waits for the child: its exit code, or 128 + the signal. */
  int wait() {
    const int status = accinte::testing::waitScenario(pid_);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int in_ = -1;
};

/** In a scenario: the pipes to the parent. */
struct ParentPipes {
  int in = -1;
  int out = -1;
  ParentPipes() {
    const char* value = std::getenv(kPipesVariable);
    if (value != nullptr) {
      std::sscanf(value, "%d,%d", &in, &out);
    }
  }
  bool send(const std::string& line) {
    return sendLine(out, line);
  }
  std::string receive() {
    return receiveLine(in);
  }
};

/** The handle hex-encoded in variable `name`. */
template <typename Handle>
bool handleFromEnv(const char* name, Handle* handle) {
  const char* value = std::getenv(name);
  return value != nullptr && fromHex(value, handle);
}

std::vector<unsigned char> pattern(size_t size, unsigned char seed) {
  std::vector<unsigned char> bytes(size);
  for (size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<unsigned char>(seed + i * 7 + (i >> 12));
  }
  return bytes;
}

std::vector<unsigned char> readBack(const void* device, size_t size) {
  std::vector<unsigned char> bytes(size);
  if (accinteMemcpy(bytes.data(), device, size, accinteMemcpyDeviceToHost) !=
      accinteSuccess) {
    bytes.clear();
  }
  return bytes;
}

/** How many descriptors this process has open whose target starts with
 * `prefix` (all of them for ""). */
int openFiles(const std::string& prefix = "") {
  int count = 0;
  DIR* directory = opendir("/proc/self/fd");
  if (directory == nullptr) {
    return -1;
  }
  while (const dirent* entry = readdir(directory)) {
    if (entry->d_name[0] == '.' ||
        std::atoi(entry->d_name) == dirfd(directory)) {
      continue;
    }
    char target[256] = {};
    const std::string path = std::string("/proc/self/fd/") + entry->d_name;
    if (readlink(path.c_str(), target, sizeof(target) - 1) > 0 &&
        std::string(target).rfind(prefix, 0) == 0) {
      ++count;
    }
  }
  closedir(directory);
  return count;
}

constexpr size_t kSize = 3 * 4096 + 100;

/** More interprocess events than one growth of the exporter's memfd adds
 * pages for (64), and than a descriptor each would leave room for under a
 * low limit of open files. */
constexpr int kManyEvents = 150;

/** More records than an interprocess event's shared page has slots for. */
constexpr int kManyRecords = 700;

} // namespace

// ---------------------------------------------------------------------------
// One process: arguments and handles of this process.
// ---------------------------------------------------------------------------

TEST(Ipc, NullArgumentsAndBadFlags) {
  DeviceBuffer buffer(64);
  ASSERT_OK(buffer.status());
  accinteIpcMemHandle_t memHandle;
  EXPECT_EQ(accinteIpcGetMemHandle(nullptr, buffer.ptr()),
            accinteErrorInvalidValue);
  ASSERT_OK(accinteIpcGetMemHandle(&memHandle, buffer.ptr()));
  void* opened = nullptr;
  EXPECT_EQ(accinteIpcOpenMemHandle(nullptr, memHandle, 0),
            accinteErrorInvalidValue);
  EXPECT_EQ(accinteIpcOpenMemHandle(&opened, memHandle, 2),
            accinteErrorInvalidValue);
  EXPECT_EQ(accinteIpcCloseMemHandle(nullptr),
            accinteErrorInvalidDevicePointer);

  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreateWithFlags(
      &event, accinteEventInterprocess | accinteEventDisableTiming));
  accinteIpcEventHandle_t eventHandle;
  EXPECT_EQ(accinteIpcGetEventHandle(nullptr, event), accinteErrorInvalidValue);
  ASSERT_OK(accinteIpcGetEventHandle(&eventHandle, event));
  EXPECT_EQ(accinteIpcOpenEventHandle(nullptr, eventHandle),
            accinteErrorInvalidValue);
  ASSERT_OK(accinteEventDestroy(event));
}

TEST(Ipc, InterprocessEventsNeedDisabledTiming) {
  accinteEvent_t event = nullptr;
  EXPECT_EQ(accinteEventCreateWithFlags(&event, accinteEventInterprocess),
            accinteErrorInvalidValue);
  EXPECT_EQ(
      accinteEventCreateWithFlags(
          &event, accinteEventInterprocess | accinteEventDisableTiming | 8),
      accinteErrorInvalidValue);
  ASSERT_OK(accinteEventCreateWithFlags(
      &event, accinteEventInterprocess | accinteEventDisableTiming |
                  accinteEventDisableFailureReport));
  float ms = 0;
  ASSERT_OK(accinteEventRecord(event, nullptr));
  ASSERT_OK(accinteEventSynchronize(event));
  EXPECT_EQ(accinteEventElapsedTime(&ms, event, event),
            accinteErrorTimingDisabled);
  ASSERT_OK(accinteEventDestroy(event));
}

TEST(Ipc, OnlyDeviceAllocationsExport) {
  accinteIpcMemHandle_t handle;
  int onStack = 0;
  EXPECT_EQ(accinteIpcGetMemHandle(&handle, &onStack),
            accinteErrorInvalidDevicePointer);
  EXPECT_EQ(accinteIpcGetMemHandle(&handle, nullptr),
            accinteErrorInvalidDevicePointer);
  void* pinned = nullptr;
  ASSERT_OK(accinteMallocHost(&pinned, 64));
  EXPECT_EQ(accinteIpcGetMemHandle(&handle, pinned),
            accinteErrorInvalidDevicePointer);
  ASSERT_OK(accinteFreeHost(pinned));
  // Freed memory no longer exports.
  void* freed = nullptr;
  ASSERT_OK(accinteMalloc(&freed, 64));
  ASSERT_OK(accinteFree(freed));
  EXPECT_EQ(accinteIpcGetMemHandle(&handle, freed),
            accinteErrorInvalidDevicePointer);
}

TEST(Ipc, OnlyInterprocessEventsExport) {
  accinteIpcEventHandle_t handle;
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreateWithFlags(&event, accinteEventDisableTiming));
  EXPECT_EQ(accinteIpcGetEventHandle(&handle, event),
            accinteErrorInvalidResourceHandle);
  ASSERT_OK(accinteEventDestroy(event));
  EXPECT_EQ(accinteIpcGetEventHandle(&handle, event),
            accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteIpcGetEventHandle(&handle, nullptr),
            accinteErrorInvalidResourceHandle);
}

TEST(Ipc, HandlesOfThisProcessAndMalformedOnesDoNotOpen) {
  DeviceBuffer buffer(kSize);
  ASSERT_OK(buffer.status());
  accinteIpcMemHandle_t handle;
  ASSERT_OK(accinteIpcGetMemHandle(&handle, buffer.ptr()));
  // An interior pointer names the same allocation.
  accinteIpcMemHandle_t interior;
  ASSERT_OK(accinteIpcGetMemHandle(&interior, buffer.as<char>() + 100));
  EXPECT_EQ(std::memcmp(&handle, &interior, sizeof(handle)), 0);

  void* opened = nullptr;
  EXPECT_EQ(accinteIpcOpenMemHandle(&opened, handle, 0),
            accinteErrorInvalidIpcHandle);
  EXPECT_EQ(opened, nullptr);
  accinteIpcMemHandle_t zeros;
  std::memset(&zeros, 0, sizeof(zeros));
  EXPECT_EQ(accinteIpcOpenMemHandle(&opened, zeros, 0),
            accinteErrorInvalidIpcHandle);
  accinteIpcMemHandle_t garbage;
  std::memset(&garbage, 0x5a, sizeof(garbage));
  EXPECT_EQ(accinteIpcOpenMemHandle(&opened, garbage, 0),
            accinteErrorInvalidIpcHandle);

  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreateWithFlags(
      &event, accinteEventInterprocess | accinteEventDisableTiming));
  accinteIpcEventHandle_t eventHandle;
  ASSERT_OK(accinteIpcGetEventHandle(&eventHandle, event));
  accinteEvent_t openedEvent = nullptr;
  EXPECT_EQ(accinteIpcOpenEventHandle(&openedEvent, eventHandle),
            accinteErrorInvalidIpcHandle);
  accinteIpcEventHandle_t eventZeros;
  std::memset(&eventZeros, 0, sizeof(eventZeros));
  EXPECT_EQ(accinteIpcOpenEventHandle(&openedEvent, eventZeros),
            accinteErrorInvalidIpcHandle);
  // A memory handle is not an event handle.
  accinteIpcEventHandle_t memAsEvent;
  std::memcpy(&memAsEvent, &handle, sizeof(memAsEvent));
  EXPECT_EQ(accinteIpcOpenEventHandle(&openedEvent, memAsEvent),
            accinteErrorInvalidIpcHandle);
  ASSERT_OK(accinteEventDestroy(event));
}

// A process may keep many interprocess events (chapter 14 keeps one per
// tensor in flight): they share one open file, and a destroyed event's page
// serves the next one, so the file does not grow either.
TEST(Ipc, InterprocessEventsShareOneOpenFile) {
  // One event first, so that the pool's memfd exists before the count.
  accinteEvent_t first = nullptr;
  ASSERT_OK(accinteEventCreateWithFlags(
      &first, accinteEventInterprocess | accinteEventDisableTiming));
  const int before = openFiles();
  for (int round = 0; round < 2; ++round) {
    std::vector<accinteEvent_t> events(kManyEvents);
    for (auto& event : events) {
      ASSERT_OK(accinteEventCreateWithFlags(
          &event, accinteEventInterprocess | accinteEventDisableTiming));
      ASSERT_OK(accinteEventRecord(event, nullptr));
    }
    EXPECT_EQ(openFiles(), before);
    EXPECT_EQ(openFiles("/memfd:accinte-ipc-event-"), 1);
    for (auto& event : events) {
      ASSERT_OK(accinteEventSynchronize(event));
      ASSERT_OK(accinteEventDestroy(event));
    }
  }
  ASSERT_OK(accinteEventDestroy(first));
}

// Out of open files, exporting memory and making the first interprocess
// event fail with accinteErrorOperatingSystem, not as if the device were out
// of memory (which sends the user after the wrong cause); a file each is
// all they need.
ACCINTE_SCENARIO(IpcOutOfOpenFiles) {
  // An export first: this thread knows its process's identity from then on.
  DeviceBuffer first(kSize);
  accinteIpcMemHandle_t handle;
  SCENARIO_CHECK(accinteIpcGetMemHandle(&handle, first.ptr()) ==
                 accinteSuccess);
  DeviceBuffer buffer(kSize);
  SCENARIO_CHECK(buffer.status() == accinteSuccess);
  // NB: the calls below run once before the limit too. The sanitizers
  // check some accesses with a pipe(), which fails while no descriptor is
  // free; once they have checked a type, they do not check it again.
  accinteEvent_t plain = nullptr;
  SCENARIO_CHECK(accinteEventCreateWithFlags(&plain, accinteEventDefault) ==
                 accinteSuccess);
  SCENARIO_CHECK(accinteEventDestroy(plain) == accinteSuccess);
  SCENARIO_CHECK(accinteIpcGetMemHandle(&handle, first.ptr()) ==
                 accinteSuccess);
  rlimit limit{};
  SCENARIO_CHECK(getrlimit(RLIMIT_NOFILE, &limit) == 0);
  limit.rlim_cur = 64;
  SCENARIO_CHECK(setrlimit(RLIMIT_NOFILE, &limit) == 0);
  std::vector<int> taken;
  int fd = -1;
  while ((fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) {
    taken.push_back(fd);
  }
  SCENARIO_CHECK(errno == EMFILE && taken.size() >= 4);
  SCENARIO_CHECK(accinteIpcGetMemHandle(&handle, buffer.ptr()) ==
                 accinteErrorOperatingSystem);
  accinteEvent_t event = nullptr;
  constexpr unsigned int kFlags =
      accinteEventInterprocess | accinteEventDisableTiming;
  SCENARIO_CHECK(accinteEventCreateWithFlags(&event, kFlags) ==
                 accinteErrorOperatingSystem);
  // One file each is all they need; the sanitizers' pipe() needs two more.
  for (int i = 0; i < 4; ++i) {
    close(taken.back());
    taken.pop_back();
  }
  SCENARIO_CHECK(accinteIpcGetMemHandle(&handle, buffer.ptr()) ==
                 accinteSuccess);
  std::vector<accinteEvent_t> events(kManyEvents);
  for (auto& each : events) {
    SCENARIO_CHECK(accinteEventCreateWithFlags(&each, kFlags) ==
                   accinteSuccess);
  }
  for (auto& each : events) {
    SCENARIO_CHECK(accinteEventDestroy(each) == accinteSuccess);
  }
  for (int each : taken) {
    close(each);
  }
  return 0;
}

TEST(Ipc, OutOfOpenFilesIsNotOutOfMemory) {
  EXPECT_EQ(accinte::testing::runScenario("IpcOutOfOpenFiles", {}), 0);
}

// Exporting moves the pages under the allocation: what was written before
// stays, and work queued before the export lands in the shared pages.
TEST(Ipc, ExportKeepsContentsAddressAndQueuedWork) {
  for (size_t size : {size_t{kSize}, size_t{(2 << 20) + 4096}}) {
    DeviceBuffer buffer(size);
    ASSERT_OK(buffer.status());
    const auto before = pattern(size, 3);
    ASSERT_OK(accinteMemcpy(buffer.ptr(), before.data(), size,
                            accinteMemcpyHostToDevice));
    accinteStream_t stream = nullptr;
    ASSERT_OK(accinteStreamCreate(&stream));
    Gate gate;
    ASSERT_OK(gate.block(stream));
    ASSERT_OK(
        accinteMemsetAsync(buffer.as<char>() + size - 10, 0xee, 10, stream));
    accinteIpcMemHandle_t handle;
    ASSERT_OK(accinteIpcGetMemHandle(&handle, buffer.ptr()));
    gate.release();
    ASSERT_OK(accinteStreamSynchronize(stream));
    auto expected = before;
    std::memset(expected.data() + size - 10, 0xee, 10);
    EXPECT_EQ(readBack(buffer.ptr(), size), expected);
    accintePointerAttributes attributes;
    ASSERT_OK(accintePointerGetAttributes(&attributes, buffer.ptr()));
    EXPECT_EQ(attributes.type, accinteMemoryTypeDevice);
    EXPECT_EQ(attributes.size, size);
    ASSERT_OK(accinteStreamDestroy(stream));
  }
}

// The first export waits for a kernel that has the allocation open: its
// writes must not go to pages being replaced. NB: the export may run before
// or after the kernel's write (nothing observable tells which); the result
// must be the same either way.
TEST(Ipc, ExportWhileAKernelWritesLosesNothing) {
  DeviceBuffer buffer(kSize);
  ASSERT_OK(buffer.status());
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  std::promise<void> started;
  auto* bytes = buffer.as<unsigned char>();
  auto startedFuture = started.get_future();
  std::shared_future<void> released;
  {
    std::promise<void> releasePromise;
    released = releasePromise.get_future().share();
    ASSERT_OK(accinte::launchKernel(stream, {buffer.ptr()},
                                    [bytes, &started, released] {
                                      started.set_value();
                                      released.wait();
                                      std::memset(bytes, 0x42, kSize);
                                    }));
    startedFuture.wait();
    std::thread exporter([&] {
      accinteIpcMemHandle_t handle;
      EXPECT_OK(accinteIpcGetMemHandle(&handle, buffer.ptr()));
    });
    releasePromise.set_value();
    exporter.join();
  }
  ASSERT_OK(accinteStreamSynchronize(stream));
  EXPECT_EQ(readBack(buffer.ptr(), kSize),
            std::vector<unsigned char>(kSize, 0x42));
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST(Ipc, CloseFromAWorkerIsNotPermitted) {
  std::atomic<int> status{-1};
  ASSERT_OK(accinte::launchKernel(
      nullptr, {}, [&status] { status = accinteIpcCloseMemHandle(nullptr); }));
  ASSERT_OK(accinteStreamSynchronize(nullptr));
  EXPECT_EQ(status.load(), accinteErrorNotPermitted);
  DeviceBuffer buffer(64);
  ASSERT_OK(buffer.status());
  void* ptr = buffer.ptr();
  ASSERT_OK(accinte::launchKernel(nullptr, {}, [&status, ptr] {
    accinteIpcMemHandle_t handle;
    status = accinteIpcGetMemHandle(&handle, ptr);
  }));
  ASSERT_OK(accinteStreamSynchronize(nullptr));
  EXPECT_EQ(status.load(), accinteErrorNotPermitted);
}

// An interprocess event used by its own process behaves as any event,
// failures included.
TEST(Ipc, InterprocessEventInItsOwnProcess) {
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreateWithFlags(
      &event, accinteEventInterprocess | accinteEventDisableTiming));
  EXPECT_OK(accinteEventQuery(event));
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  Gate gate;
  ASSERT_OK(gate.block(stream));
  ASSERT_OK(accinteEventRecord(event, stream));
  EXPECT_EQ(accinteEventQuery(event), accinteErrorNotReady);
  gate.release();
  ASSERT_OK(accinteEventSynchronize(event));
  EXPECT_OK(accinteEventQuery(event));

  ASSERT_OK(accinte::launchKernel(stream, {}, [] {
    throw std::runtime_error("interprocess failure test");
  }));
  ASSERT_OK(accinteEventRecord(event, stream));
  EXPECT_EQ(accinteEventSynchronize(event), accinteErrorLaunchFailure);
  EXPECT_NE(std::string(accinteGetLastFailureMessage())
                .find("interprocess failure test"),
            std::string::npos);
  EXPECT_OK(accinteStreamSynchronize(stream));
  ASSERT_OK(accinteStreamDestroy(stream));
  ASSERT_OK(accinteEventDestroy(event));
}

// The shared page has a slot for each outstanding record of an interprocess
// event (240, fewer than kManyRecords): a record made while all are in use
// waits until the oldest completes, as a launch into CUDA's full queue does;
// a stream's worker, which may be what the oldest waits for, is refused.
TEST(Ipc, RecordsBeyondTheOutstandingSlotsWaitForTheOldest) {
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreateWithFlags(
      &event, accinteEventInterprocess | accinteEventDisableTiming));
  accinteStream_t blocked = nullptr;
  accinteStream_t other = nullptr;
  ASSERT_OK(accinteStreamCreate(&blocked));
  ASSERT_OK(accinteStreamCreate(&other));
  Gate gate;
  ASSERT_OK(gate.block(blocked));
  std::atomic<int> recorded{0};
  std::atomic<bool> failed{false};
  std::thread recorder([&] {
    for (int i = 0; i < kManyRecords; ++i) {
      if (accinteEventRecord(event, blocked) != accinteSuccess) {
        failed = true;
      }
      recorded.fetch_add(1);
    }
  });
  // NB: the first 240 records never wait; the next one does until the gate
  // opens. Meanwhile a kernel may not record (it could be what the oldest
  // record waits for).
  while (recorded.load() < 240) {
    std::this_thread::yield();
  }
  std::atomic<int> fromKernel{-1};
  ASSERT_OK(accinte::launchKernel(
      other, {}, [&] { fromKernel = accinteEventRecord(event, blocked); }));
  ASSERT_OK(accinteStreamSynchronize(other));
  gate.release();
  recorder.join();
  EXPECT_FALSE(failed.load());
  EXPECT_EQ(fromKernel.load(), accinteErrorNotPermitted);
  ASSERT_OK(accinteEventSynchronize(event));
  EXPECT_OK(accinteStreamQuery(blocked));
  ASSERT_OK(accinteEventDestroy(event));
  ASSERT_OK(accinteStreamDestroy(blocked));
  ASSERT_OK(accinteStreamDestroy(other));
}

// ---------------------------------------------------------------------------
// Two processes.
// ---------------------------------------------------------------------------

// The child maps the parent's allocation (on device 1), reads what the
// parent wrote, checks what imported memory may not do, and writes back.
ACCINTE_SCENARIO(IpcImportReadWrite) {
  accinteIpcMemHandle_t handle;
  SCENARIO_CHECK(handleFromEnv("IPC_TEST_MEM", &handle));
  void* ptr = nullptr;
  SCENARIO_CHECK(accinteIpcOpenMemHandle(&ptr, handle,
                                         accinteIpcMemLazyEnablePeerAccess) ==
                 accinteSuccess);
  void* again = nullptr;
  SCENARIO_CHECK(accinteIpcOpenMemHandle(&again, handle, 0) == accinteSuccess);
  SCENARIO_CHECK(again == ptr);
  SCENARIO_CHECK(accinteIpcCloseMemHandle(again) == accinteSuccess);

  accintePointerAttributes attributes;
  SCENARIO_CHECK(
      accintePointerGetAttributes(&attributes, static_cast<char*>(ptr) + 5) ==
      accinteSuccess);
  SCENARIO_CHECK(attributes.type == accinteMemoryTypeDevice);
  SCENARIO_CHECK(attributes.device == 1);
  SCENARIO_CHECK(attributes.base == ptr);
  SCENARIO_CHECK(attributes.size == kSize);
  size_t freeBytes = 0;
  size_t totalBytes = 0;
  SCENARIO_CHECK(accinteSetDevice(1) == accinteSuccess);
  SCENARIO_CHECK(accinteMemGetInfo(&freeBytes, &totalBytes) == accinteSuccess);
  SCENARIO_CHECK(freeBytes == totalBytes); // not this process's memory

  accinteIpcMemHandle_t reexport;
  SCENARIO_CHECK(accinteIpcGetMemHandle(&reexport, ptr) ==
                 accinteErrorInvalidValue);
  SCENARIO_CHECK(accinteFree(ptr) == accinteErrorInvalidDevicePointer);
  SCENARIO_CHECK(accinteIpcCloseMemHandle(static_cast<char*>(ptr) + 1) ==
                 accinteErrorInvalidDevicePointer);
  // Kernels of its device may use it; another device's may not.
  SCENARIO_CHECK(accinte::launchKernel(nullptr, {ptr}, [] {}) ==
                 accinteSuccess);
  SCENARIO_CHECK(accinteSetDevice(0) == accinteSuccess);
  SCENARIO_CHECK(accinte::launchKernel(nullptr, {ptr}, [] {}) ==
                 accinteErrorInvalidDevicePointer);

  SCENARIO_CHECK(readBack(ptr, kSize) == pattern(kSize, 1));
  const auto reply = pattern(kSize, 2);
  SCENARIO_CHECK(accinteMemcpy(ptr, reply.data(), kSize,
                               accinteMemcpyHostToDevice) == accinteSuccess);
  // Still queued when the close starts: the close waits for it, so it lands
  // (else it would fail on memory no longer mapped).
  accinteStream_t stream = nullptr;
  SCENARIO_CHECK(accinteStreamCreate(&stream) == accinteSuccess);
  SCENARIO_CHECK(accinteMemsetAsync(static_cast<char*>(ptr) + kSize - 10, 0x77,
                                    10, stream) == accinteSuccess);
  SCENARIO_CHECK(accinteIpcCloseMemHandle(ptr) == accinteSuccess);
  SCENARIO_CHECK(accinteStreamQuery(stream) == accinteSuccess);
  SCENARIO_CHECK(accinteIpcCloseMemHandle(ptr) ==
                 accinteErrorInvalidDevicePointer);
  accintePointerGetAttributes(&attributes, ptr);
  SCENARIO_CHECK(attributes.type == accinteMemoryTypeUnregistered);
  return 0;
}

TEST(IpcTwoProcesses, TheChildReadsAndWritesTheParentsMemory) {
  ASSERT_OK(accinteSetDevice(1));
  DeviceBuffer buffer(kSize);
  ASSERT_OK(accinteSetDevice(0));
  ASSERT_OK(buffer.status());
  const auto written = pattern(kSize, 1);
  ASSERT_OK(accinteMemcpy(buffer.ptr(), written.data(), kSize,
                          accinteMemcpyHostToDevice));
  accinteIpcMemHandle_t handle;
  ASSERT_OK(accinteIpcGetMemHandle(&handle, buffer.as<char>() + 17));
  Peer child("IpcImportReadWrite", {"IPC_TEST_MEM=" + toHex(handle)});
  ASSERT_TRUE(child.started());
  ASSERT_EQ(child.wait(), 0);
  auto expected = pattern(kSize, 2);
  std::memset(expected.data() + kSize - 10, 0x77, 10);
  EXPECT_EQ(readBack(buffer.ptr(), kSize), expected);
}

ACCINTE_SCENARIO(IpcOpenOnAMissingDevice) {
  accinteIpcMemHandle_t handle;
  SCENARIO_CHECK(handleFromEnv("IPC_TEST_MEM", &handle));
  void* ptr = nullptr;
  SCENARIO_CHECK(accinteIpcOpenMemHandle(&ptr, handle, 0) ==
                 accinteErrorInvalidDevice);
  return 0;
}

TEST(IpcTwoProcesses, AHandleOfADeviceTheImporterLacksDoesNotOpen) {
  ASSERT_OK(accinteSetDevice(1));
  DeviceBuffer buffer(64);
  ASSERT_OK(accinteSetDevice(0));
  ASSERT_OK(buffer.status());
  accinteIpcMemHandle_t handle;
  ASSERT_OK(accinteIpcGetMemHandle(&handle, buffer.ptr()));
  Peer child("IpcOpenOnAMissingDevice",
             {"IPC_TEST_MEM=" + toHex(handle), "ACCINTE_DEVICE_COUNT=1"});
  ASSERT_TRUE(child.started());
  EXPECT_EQ(child.wait(), 0);
}

// The child opens the parent's memory and event; the parent's kernel, which
// writes the memory, waits until the child has seen the record not ready.
// Then the child records the event, behind work of its own, for the parent.
ACCINTE_SCENARIO(IpcEventOrdering) {
  ParentPipes parent;
  accinteIpcMemHandle_t memHandle;
  accinteIpcEventHandle_t eventHandle;
  SCENARIO_CHECK(handleFromEnv("IPC_TEST_MEM", &memHandle));
  SCENARIO_CHECK(handleFromEnv("IPC_TEST_EVENT", &eventHandle));
  void* ptr = nullptr;
  SCENARIO_CHECK(accinteIpcOpenMemHandle(&ptr, memHandle, 0) == accinteSuccess);
  accinteEvent_t event = nullptr;
  SCENARIO_CHECK(accinteIpcOpenEventHandle(&event, eventHandle) ==
                 accinteSuccess);
  accinteIpcEventHandle_t reexport;
  SCENARIO_CHECK(accinteIpcGetEventHandle(&reexport, event) ==
                 accinteErrorInvalidResourceHandle);
  float ms = 0;
  SCENARIO_CHECK(accinteEventElapsedTime(&ms, event, event) ==
                 accinteErrorTimingDisabled);
  // The parent's kernel is blocked until told.
  SCENARIO_CHECK(accinteEventQuery(event) == accinteErrorNotReady);
  accinteStream_t stream = nullptr;
  SCENARIO_CHECK(accinteStreamCreate(&stream) == accinteSuccess);
  std::vector<unsigned char> seen(kSize);
  SCENARIO_CHECK(accinteStreamWaitEvent(stream, event) == accinteSuccess);
  SCENARIO_CHECK(accinteMemcpyAsync(seen.data(), ptr, kSize,
                                    accinteMemcpyDeviceToHost,
                                    stream) == accinteSuccess);
  SCENARIO_CHECK(parent.send("queried"));
  SCENARIO_CHECK(accinteStreamSynchronize(stream) == accinteSuccess);
  SCENARIO_CHECK(seen == pattern(kSize, 5));
  SCENARIO_CHECK(accinteEventQuery(event) == accinteSuccess);
  SCENARIO_CHECK(accinteEventSynchronize(event) == accinteSuccess);

  // Now the other way: this process records, behind a blocked kernel.
  {
    Gate gate;
    SCENARIO_CHECK(gate.block(stream) == accinteSuccess);
    auto* bytes = static_cast<unsigned char*>(ptr);
    SCENARIO_CHECK(accinte::launchKernel(stream, {ptr}, [bytes] {
                     for (size_t i = 0; i < kSize; ++i) {
                       bytes[i] = static_cast<unsigned char>(bytes[i] + 1);
                     }
                   }) == accinteSuccess);
    SCENARIO_CHECK(accinteEventRecord(event, stream) == accinteSuccess);
    SCENARIO_CHECK(parent.send("recorded"));
    SCENARIO_CHECK(parent.receive() == "go");
    gate.release();
  }
  SCENARIO_CHECK(accinteStreamSynchronize(stream) == accinteSuccess);
  SCENARIO_CHECK(parent.receive() == "done");
  SCENARIO_CHECK(accinteEventDestroy(event) == accinteSuccess);
  SCENARIO_CHECK(accinteStreamDestroy(stream) == accinteSuccess);
  SCENARIO_CHECK(accinteIpcCloseMemHandle(ptr) == accinteSuccess);
  return 0;
}

TEST(IpcTwoProcesses, AnEventOrdersWorkBothWays) {
  DeviceBuffer buffer(kSize);
  ASSERT_OK(buffer.status());
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreateWithFlags(
      &event, accinteEventInterprocess | accinteEventDisableTiming));
  Gate gate;
  ASSERT_OK(gate.block(stream));
  auto* bytes = buffer.as<unsigned char>();
  const auto expected = pattern(kSize, 5);
  ASSERT_OK(accinte::launchKernel(stream, {buffer.ptr()}, [bytes, expected] {
    std::memcpy(bytes, expected.data(), kSize);
  }));
  ASSERT_OK(accinteEventRecord(event, stream));
  accinteIpcMemHandle_t memHandle;
  accinteIpcEventHandle_t eventHandle;
  ASSERT_OK(accinteIpcGetMemHandle(&memHandle, buffer.ptr()));
  ASSERT_OK(accinteIpcGetEventHandle(&eventHandle, event));

  Peer child("IpcEventOrdering", {"IPC_TEST_MEM=" + toHex(memHandle),
                                  "IPC_TEST_EVENT=" + toHex(eventHandle)});
  ASSERT_TRUE(child.started());
  ASSERT_EQ(child.receive(), "queried");
  gate.release();
  ASSERT_EQ(child.receive(), "recorded");
  // The child's record waits behind the child's blocked kernel.
  EXPECT_EQ(accinteEventQuery(event), accinteErrorNotReady);
  ASSERT_TRUE(child.send("go"));
  ASSERT_OK(accinteEventSynchronize(event));
  auto incremented = expected;
  for (auto& byte : incremented) {
    byte = static_cast<unsigned char>(byte + 1);
  }
  EXPECT_EQ(readBack(buffer.ptr(), kSize), incremented);
  // A stream waiting for the child's record goes on too.
  ASSERT_OK(accinteStreamWaitEvent(stream, event));
  ASSERT_OK(accinteStreamSynchronize(stream));
  ASSERT_TRUE(child.send("done"));
  EXPECT_EQ(child.wait(), 0);
  ASSERT_OK(accinteEventDestroy(event));
  ASSERT_OK(accinteStreamDestroy(stream));
}

// The child opens the parent's many events, each a page of one memfd of
// the parent's: it opens no file for them, and each handle reaches its own
// event (those recorded behind a blocked kernel are not ready, the others
// are).
ACCINTE_SCENARIO(IpcManyEvents) {
  ParentPipes parent;
  std::vector<accinteEvent_t> events(kManyEvents);
  int before = -1;
  for (auto& event : events) {
    accinteIpcEventHandle_t handle;
    SCENARIO_CHECK(fromHex(parent.receive(), &handle));
    SCENARIO_CHECK(accinteIpcOpenEventHandle(&event, handle) == accinteSuccess);
    if (before < 0) {
      before = openFiles(); // once the runtime is up
    }
  }
  SCENARIO_CHECK(openFiles() == before);
  for (int i = 0; i < kManyEvents; ++i) {
    SCENARIO_CHECK(accinteEventQuery(events[i]) ==
                   (i % 2 == 1 ? accinteErrorNotReady : accinteSuccess));
  }
  SCENARIO_CHECK(parent.send("queried"));
  for (auto& event : events) {
    SCENARIO_CHECK(accinteEventSynchronize(event) == accinteSuccess);
    SCENARIO_CHECK(accinteEventDestroy(event) == accinteSuccess);
  }
  SCENARIO_CHECK(parent.send("waited"));
  return 0;
}

TEST(IpcTwoProcesses, ManyEventsOpenNoFileAndStayApart) {
  accinteStream_t blocked = nullptr;
  ASSERT_OK(accinteStreamCreate(&blocked));
  Gate gate;
  ASSERT_OK(gate.block(blocked));
  Peer child("IpcManyEvents", {});
  ASSERT_TRUE(child.started());
  std::vector<accinteEvent_t> events(kManyEvents);
  for (int i = 0; i < kManyEvents; ++i) {
    ASSERT_OK(accinteEventCreateWithFlags(
        &events[i], accinteEventInterprocess | accinteEventDisableTiming));
    ASSERT_OK(accinteEventRecord(events[i], i % 2 == 1 ? blocked : nullptr));
    if (i % 2 == 0) {
      ASSERT_OK(accinteEventSynchronize(events[i]));
    }
    accinteIpcEventHandle_t handle;
    ASSERT_OK(accinteIpcGetEventHandle(&handle, events[i]));
    ASSERT_TRUE(child.send(toHex(handle)));
  }
  EXPECT_EQ(child.receive(), "queried");
  gate.release();
  EXPECT_EQ(child.receive(), "waited");
  EXPECT_EQ(child.wait(), 0);
  for (auto& event : events) {
    ASSERT_OK(accinteEventDestroy(event));
  }
  ASSERT_OK(accinteStreamDestroy(blocked));
}

// The child exports memory and an event whose record waits behind a kernel
// that never finishes, then exits without finishing it.
ACCINTE_SCENARIO(IpcRecordThenExit) {
  ParentPipes parent;
  void* ptr = nullptr;
  SCENARIO_CHECK(accinteMalloc(&ptr, kSize) == accinteSuccess);
  const auto written = pattern(kSize, 9);
  SCENARIO_CHECK(accinteMemcpy(ptr, written.data(), kSize,
                               accinteMemcpyHostToDevice) == accinteSuccess);
  accinteIpcMemHandle_t memHandle;
  SCENARIO_CHECK(accinteIpcGetMemHandle(&memHandle, ptr) == accinteSuccess);
  accinteEvent_t event = nullptr;
  SCENARIO_CHECK(accinteEventCreateWithFlags(
                     &event, accinteEventInterprocess |
                                 accinteEventDisableTiming) == accinteSuccess);
  accinteStream_t stream = nullptr;
  SCENARIO_CHECK(accinteStreamCreate(&stream) == accinteSuccess);
  auto* gate = new Gate(); // never released
  SCENARIO_CHECK(gate->block(stream) == accinteSuccess);
  SCENARIO_CHECK(accinteEventRecord(event, stream) == accinteSuccess);
  accinteIpcEventHandle_t eventHandle;
  SCENARIO_CHECK(accinteIpcGetEventHandle(&eventHandle, event) ==
                 accinteSuccess);
  SCENARIO_CHECK(parent.send(toHex(memHandle)));
  SCENARIO_CHECK(parent.send(toHex(eventHandle)));
  SCENARIO_CHECK(parent.receive() == "exit");
  _exit(0);
}

TEST(IpcTwoProcesses, WaitersOfAnExitedRecorderFailAndItsMemoryStays) {
  Peer child("IpcRecordThenExit", {});
  ASSERT_TRUE(child.started());
  accinteIpcMemHandle_t memHandle;
  accinteIpcEventHandle_t eventHandle;
  ASSERT_TRUE(fromHex(child.receive(), &memHandle));
  ASSERT_TRUE(fromHex(child.receive(), &eventHandle));
  void* ptr = nullptr;
  ASSERT_OK(accinteIpcOpenMemHandle(&ptr, memHandle, 0));
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteIpcOpenEventHandle(&event, eventHandle));
  EXPECT_EQ(accinteEventQuery(event), accinteErrorNotReady);
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  ASSERT_OK(accinteStreamWaitEvent(stream, event));
  std::vector<unsigned char> behind(kSize);
  ASSERT_OK(accinteMemcpyAsync(behind.data(), ptr, kSize,
                               accinteMemcpyDeviceToHost, stream));

  ASSERT_TRUE(child.send("exit"));
  // NB: not reaped yet: an exited process that is still a zombie counts as
  // exited too.
  ASSERT_TRUE(child.waitExitedUnreaped());
  EXPECT_EQ(accinteEventSynchronize(event), accinteErrorIpcPeerExited);
  ASSERT_EQ(child.wait(), 0);
  EXPECT_EQ(accinteEventQuery(event), accinteErrorIpcPeerExited);
  EXPECT_EQ(accinteStreamSynchronize(stream), accinteErrorLaunchFailure);
  EXPECT_NE(std::string(accinteGetLastFailureMessage()).find("exited"),
            std::string::npos)
      << accinteGetLastFailureMessage();
  // The stream goes on after reporting.
  EXPECT_OK(accinteStreamSynchronize(stream));
  // The exporter is gone; the mapping is not.
  EXPECT_EQ(readBack(ptr, kSize), pattern(kSize, 9));
  // A record of this process on the opened event works as before.
  ASSERT_OK(accinteEventRecord(event, stream));
  EXPECT_OK(accinteEventSynchronize(event));
  ASSERT_OK(accinteEventDestroy(event));
  ASSERT_OK(accinteStreamDestroy(stream));
  ASSERT_OK(accinteIpcCloseMemHandle(ptr));
}

// The child exports an event whose first record waits behind a kernel that
// never finishes; once the parent waits for that record, the child records
// the event again on an idle stream, lets that record complete, and exits.
ACCINTE_SCENARIO(IpcRecordTwiceThenExit) {
  ParentPipes parent;
  accinteEvent_t event = nullptr;
  SCENARIO_CHECK(accinteEventCreateWithFlags(
                     &event, accinteEventInterprocess |
                                 accinteEventDisableTiming) == accinteSuccess);
  accinteStream_t blocked = nullptr;
  accinteStream_t idle = nullptr;
  SCENARIO_CHECK(accinteStreamCreate(&blocked) == accinteSuccess);
  SCENARIO_CHECK(accinteStreamCreate(&idle) == accinteSuccess);
  auto* gate = new Gate(); // never released
  SCENARIO_CHECK(gate->block(blocked) == accinteSuccess);
  SCENARIO_CHECK(accinteEventRecord(event, blocked) == accinteSuccess);
  accinteIpcEventHandle_t eventHandle;
  SCENARIO_CHECK(accinteIpcGetEventHandle(&eventHandle, event) ==
                 accinteSuccess);
  SCENARIO_CHECK(parent.send(toHex(eventHandle)));
  SCENARIO_CHECK(parent.receive() == "waiting");
  SCENARIO_CHECK(accinteEventRecord(event, idle) == accinteSuccess);
  SCENARIO_CHECK(accinteEventSynchronize(event) == accinteSuccess);
  SCENARIO_CHECK(parent.send("second"));
  SCENARIO_CHECK(parent.receive() == "exit");
  _exit(0);
}

// A stream wait captures the record current at the call (as
// cudaStreamWaitEvent does): a later record that completes first, even one
// of the same process, does not release it. Here the captured record never
// completes, so the wait fails once its recorder exits.
TEST(IpcTwoProcesses, ALaterRecordDoesNotReleaseAWaitForAnEarlierOne) {
  Peer child("IpcRecordTwiceThenExit", {});
  ASSERT_TRUE(child.started());
  accinteIpcEventHandle_t eventHandle;
  ASSERT_TRUE(fromHex(child.receive(), &eventHandle));
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteIpcOpenEventHandle(&event, eventHandle));
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  ASSERT_OK(accinteStreamWaitEvent(stream, event));
  EXPECT_EQ(accinteEventQuery(event), accinteErrorNotReady);
  ASSERT_TRUE(child.send("waiting"));
  ASSERT_EQ(child.receive(), "second");
  // A query or synchronize made now is for the second record: complete.
  EXPECT_OK(accinteEventQuery(event));
  EXPECT_OK(accinteEventSynchronize(event));
  ASSERT_TRUE(child.send("exit"));
  ASSERT_TRUE(child.waitExitedUnreaped());
  // The stream still waited for the first record, which never completes.
  EXPECT_EQ(accinteStreamSynchronize(stream), accinteErrorLaunchFailure);
  EXPECT_NE(std::string(accinteGetLastFailureMessage()).find("exited"),
            std::string::npos)
      << accinteGetLastFailureMessage();
  ASSERT_EQ(child.wait(), 0);
  // The second record completed before its process exited.
  EXPECT_OK(accinteEventQuery(event));
  ASSERT_OK(accinteEventDestroy(event));
  ASSERT_OK(accinteStreamDestroy(stream));
}

// The child exports memory and an event it has recorded many times, then
// records it once more behind a blocked kernel that writes the memory. Once
// the parent waits for that record, the child records the event again on an
// idle stream; it opens the gate when the parent says so.
ACCINTE_SCENARIO(IpcRecordBehindWorkThenOnAnIdleStream) {
  ParentPipes parent;
  void* ptr = nullptr;
  SCENARIO_CHECK(accinteMalloc(&ptr, kSize) == accinteSuccess);
  SCENARIO_CHECK(accinteMemsetAsync(ptr, 0, kSize, nullptr) == accinteSuccess);
  SCENARIO_CHECK(accinteStreamSynchronize(nullptr) == accinteSuccess);
  accinteIpcMemHandle_t memHandle;
  SCENARIO_CHECK(accinteIpcGetMemHandle(&memHandle, ptr) == accinteSuccess);
  accinteEvent_t event = nullptr;
  SCENARIO_CHECK(accinteEventCreateWithFlags(
                     &event, accinteEventInterprocess |
                                 accinteEventDisableTiming) == accinteSuccess);
  accinteStream_t blocked = nullptr;
  accinteStream_t idle = nullptr;
  SCENARIO_CHECK(accinteStreamCreate(&blocked) == accinteSuccess);
  SCENARIO_CHECK(accinteStreamCreate(&idle) == accinteSuccess);
  for (int i = 0; i < kManyRecords; ++i) {
    SCENARIO_CHECK(accinteEventRecord(event, idle) == accinteSuccess);
  }
  SCENARIO_CHECK(accinteEventSynchronize(event) == accinteSuccess);
  Gate gate;
  SCENARIO_CHECK(gate.block(blocked) == accinteSuccess);
  auto* bytes = static_cast<unsigned char*>(ptr);
  const auto expected = pattern(kSize, 6);
  SCENARIO_CHECK(accinte::launchKernel(blocked, {ptr}, [bytes, expected] {
                   std::memcpy(bytes, expected.data(), kSize);
                 }) == accinteSuccess);
  SCENARIO_CHECK(accinteEventRecord(event, blocked) == accinteSuccess);
  accinteIpcEventHandle_t eventHandle;
  SCENARIO_CHECK(accinteIpcGetEventHandle(&eventHandle, event) ==
                 accinteSuccess);
  SCENARIO_CHECK(parent.send(toHex(memHandle)));
  SCENARIO_CHECK(parent.send(toHex(eventHandle)));
  SCENARIO_CHECK(parent.receive() == "waiting");
  SCENARIO_CHECK(accinteEventRecord(event, idle) == accinteSuccess);
  SCENARIO_CHECK(accinteStreamSynchronize(idle) == accinteSuccess);
  SCENARIO_CHECK(parent.send("second"));
  SCENARIO_CHECK(parent.receive() == "release");
  gate.release();
  SCENARIO_CHECK(accinteStreamSynchronize(blocked) == accinteSuccess);
  SCENARIO_CHECK(parent.receive() == "done");
  SCENARIO_CHECK(accinteEventDestroy(event) == accinteSuccess);
  SCENARIO_CHECK(accinteFree(ptr) == accinteSuccess);
  return 0;
}

// The same rule where the first record does complete: the parent's copy
// waits for it and reads what the work before it wrote, not the zeros that
// were there when the later record completed.
TEST(IpcTwoProcesses, AWaitReadsWhatTheWorkBeforeItsRecordWrote) {
  Peer child("IpcRecordBehindWorkThenOnAnIdleStream", {});
  ASSERT_TRUE(child.started());
  accinteIpcMemHandle_t memHandle;
  accinteIpcEventHandle_t eventHandle;
  ASSERT_TRUE(fromHex(child.receive(), &memHandle));
  ASSERT_TRUE(fromHex(child.receive(), &eventHandle));
  void* ptr = nullptr;
  ASSERT_OK(accinteIpcOpenMemHandle(&ptr, memHandle, 0));
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteIpcOpenEventHandle(&event, eventHandle));
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  ASSERT_OK(accinteStreamWaitEvent(stream, event));
  std::vector<unsigned char> seen(kSize);
  ASSERT_OK(accinteMemcpyAsync(seen.data(), ptr, kSize,
                               accinteMemcpyDeviceToHost, stream));
  ASSERT_TRUE(child.send("waiting"));
  ASSERT_EQ(child.receive(), "second");
  ASSERT_OK(accinteEventSynchronize(event)); // the second record
  EXPECT_EQ(accinteStreamQuery(stream), accinteErrorNotReady);
  ASSERT_TRUE(child.send("release"));
  ASSERT_OK(accinteStreamSynchronize(stream));
  EXPECT_EQ(seen, pattern(kSize, 6));
  ASSERT_OK(accinteIpcCloseMemHandle(ptr));
  ASSERT_TRUE(child.send("done"));
  EXPECT_EQ(child.wait(), 0);
  ASSERT_OK(accinteEventDestroy(event));
  ASSERT_OK(accinteStreamDestroy(stream));
}

// Opens the parent's memory, waits for it to be freed there, reads it.
ACCINTE_SCENARIO(IpcOpenAcrossFree) {
  ParentPipes parent;
  accinteIpcMemHandle_t handle;
  SCENARIO_CHECK(handleFromEnv("IPC_TEST_MEM", &handle));
  void* ptr = nullptr;
  SCENARIO_CHECK(accinteIpcOpenMemHandle(&ptr, handle, 0) == accinteSuccess);
  SCENARIO_CHECK(parent.send("opened"));
  SCENARIO_CHECK(parent.receive() == "freed");
  SCENARIO_CHECK(readBack(ptr, kSize) == pattern(kSize, 4));
  SCENARIO_CHECK(accinteIpcCloseMemHandle(ptr) == accinteSuccess);
  return 0;
}

// Stale handles do not open.
ACCINTE_SCENARIO(IpcOpenStale) {
  accinteIpcMemHandle_t memHandle;
  accinteIpcEventHandle_t eventHandle;
  SCENARIO_CHECK(handleFromEnv("IPC_TEST_MEM", &memHandle));
  SCENARIO_CHECK(handleFromEnv("IPC_TEST_EVENT", &eventHandle));
  void* ptr = nullptr;
  SCENARIO_CHECK(accinteIpcOpenMemHandle(&ptr, memHandle, 0) ==
                 accinteErrorInvalidIpcHandle);
  SCENARIO_CHECK(ptr == nullptr);
  accinteEvent_t event = nullptr;
  SCENARIO_CHECK(accinteIpcOpenEventHandle(&event, eventHandle) ==
                 accinteErrorInvalidIpcHandle);
  return 0;
}

TEST(IpcTwoProcesses, FreedMemoryStaysWithItsImporterAndNoLongerOpens) {
  void* ptr = nullptr;
  ASSERT_OK(accinteMalloc(&ptr, kSize));
  const auto written = pattern(kSize, 4);
  ASSERT_OK(
      accinteMemcpy(ptr, written.data(), kSize, accinteMemcpyHostToDevice));
  accinteIpcMemHandle_t handle;
  ASSERT_OK(accinteIpcGetMemHandle(&handle, ptr));
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreateWithFlags(
      &event, accinteEventInterprocess | accinteEventDisableTiming));
  accinteIpcEventHandle_t eventHandle;
  ASSERT_OK(accinteIpcGetEventHandle(&eventHandle, event));
  {
    Peer child("IpcOpenAcrossFree", {"IPC_TEST_MEM=" + toHex(handle)});
    ASSERT_TRUE(child.started());
    ASSERT_EQ(child.receive(), "opened");
    ASSERT_OK(accinteFree(ptr));
    ASSERT_OK(accinteEventDestroy(event));
    ASSERT_TRUE(child.send("freed"));
    ASSERT_EQ(child.wait(), 0);
  }
  // NB: new exports most likely reuse the descriptor numbers of the freed
  // ones; the nonces still tell them apart.
  DeviceBuffer other(kSize);
  ASSERT_OK(other.status());
  accinteIpcMemHandle_t otherHandle;
  ASSERT_OK(accinteIpcGetMemHandle(&otherHandle, other.ptr()));
  accinteEvent_t otherEvent = nullptr;
  ASSERT_OK(accinteEventCreateWithFlags(
      &otherEvent, accinteEventInterprocess | accinteEventDisableTiming));
  Peer stale("IpcOpenStale", {"IPC_TEST_MEM=" + toHex(handle),
                              "IPC_TEST_EVENT=" + toHex(eventHandle)});
  ASSERT_TRUE(stale.started());
  EXPECT_EQ(stale.wait(), 0);
  ASSERT_OK(accinteEventDestroy(otherEvent));
}

// Imported memory is device memory: the host touching it faults.
ACCINTE_SCENARIO(IpcImportedHostAccessFaults) {
  ParentPipes parent;
  accinteIpcMemHandle_t handle;
  SCENARIO_CHECK(handleFromEnv("IPC_TEST_MEM", &handle));
  void* ptr = nullptr;
  SCENARIO_CHECK(accinteIpcOpenMemHandle(&ptr, handle, 0) == accinteSuccess);
  // Opened and closed again by a copy first.
  SCENARIO_CHECK(readBack(ptr, 16).size() == 16);
  SCENARIO_CHECK(parent.send("touching"));
  // A sanitizer's report of the fault goes to the parent, which checks it.
  dup2(parent.out, 2);
  auto* bytes = static_cast<volatile unsigned char*>(ptr);
  (void)bytes[0];
  SCENARIO_CHECK(parent.send("survived"));
  return 0;
}

TEST(IpcTwoProcesses, HostAccessToImportedMemoryFaults) {
  DeviceBuffer buffer(kSize);
  ASSERT_OK(buffer.status());
  accinteIpcMemHandle_t handle;
  ASSERT_OK(accinteIpcGetMemHandle(&handle, buffer.ptr()));
  Peer child("IpcImportedHostAccessFaults", {"IPC_TEST_MEM=" + toHex(handle)});
  ASSERT_TRUE(child.started());
  ASSERT_EQ(child.receive(), "touching");
  const std::string rest = child.receiveRest();
  EXPECT_EQ(rest.find("survived"), std::string::npos);
  const int status = child.wait();
#ifdef ACCINTE_TEST_SANITIZED
  // The sanitizer (ASan or TSan) catches the SIGSEGV, reports it and exits.
  EXPECT_NE(rest.find("SEGV"), std::string::npos) << rest;
  EXPECT_NE(status, 0);
#else
  EXPECT_EQ(status, 128 + SIGSEGV);
#endif
}
