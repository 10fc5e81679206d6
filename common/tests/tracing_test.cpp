// Activity tracing: the records of kernels, copies, memsets and runtime
// calls, their clock and correlation ids, the bounded buffer, turning tracing
// on and off while streams run, and the API's bad input.

#include "test_util.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

using accinte::testing::DeviceBuffer;
using accinte::testing::Gate;

namespace {

/** Every record the runtime holds, taken in small batches (so that taking
 * in several calls is exercised too). */
std::vector<accinteActivityRecord> takeAll() {
  std::vector<accinteActivityRecord> all;
  accinteActivityRecord batch[7];
  size_t count = 0;
  do {
    EXPECT_OK(accinteActivityTake(batch, std::size(batch), &count));
    all.insert(all.end(), batch, batch + count);
  } while (count == std::size(batch));
  return all;
}

/** The records of `kind` among `records`, in order. */
std::vector<accinteActivityRecord> ofKind(
    const std::vector<accinteActivityRecord>& records,
    accinteActivityKind kind) {
  std::vector<accinteActivityRecord> selected;
  std::copy_if(
      records.begin(), records.end(), std::back_inserter(selected),
      [&](const accinteActivityRecord& record) { return record.kind == kind; });
  return selected;
}

/** The runtime record named `name` with `correlationId`, or null. */
const accinteActivityRecord* findCall(
    const std::vector<accinteActivityRecord>& records, const char* name,
    uint64_t correlationId) {
  for (const auto& record : records) {
    if (record.kind == accinteActivityKindRuntime &&
        std::strcmp(record.name, name) == 0 &&
        record.correlationId == correlationId) {
      return &record;
    }
  }
  return nullptr;
}

uint32_t threadId() {
  return static_cast<uint32_t>(syscall(SYS_gettid));
}

/** Tracing on for one test, and off (with nothing left in the runtime's
 * buffer) after it, whatever the test did. */
class Tracing : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(accinteActivityEnable(0));
  }
  void TearDown() override {
    EXPECT_OK(accinteSetDevice(0));
    EXPECT_OK(accinteDeviceSynchronize());
    EXPECT_OK(accinteActivityDisable());
    takeAll();
  }
};

accinteError_t emptyKernel(void*) {
  return accinteSuccess;
}

int deleterCalls = 0;
void countDeleterCall(void*) {
  ++deleterCalls;
}

} // namespace

TEST(TracingOff, IsOffByDefaultAndRecordsNothing) {
  int enabled = 1;
  ASSERT_OK(accinteActivityIsEnabled(&enabled));
  EXPECT_EQ(enabled, 0);
  DeviceBuffer buffer(64);
  ASSERT_OK(buffer.status());
  ASSERT_OK(accinteMemsetAsync(buffer.ptr(), 1, 64, nullptr));
  ASSERT_OK(
      accinte::launchNamedKernel(nullptr, "unseen", {buffer.ptr()}, [] {}));
  ASSERT_OK(accinteStreamSynchronize(nullptr));
  EXPECT_TRUE(takeAll().empty());
  uint64_t dropped = 1;
  ASSERT_OK(accinteActivityGetDropped(&dropped));
  EXPECT_EQ(dropped, 0U);
}

TEST_F(Tracing, KernelRecordCarriesNameDeviceStreamAndCorrelation) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  uint64_t before = 0;
  ASSERT_OK(accinteActivityGetTimestamp(&before));
  ASSERT_OK(accinte::launchNamedKernel(stream, "aten::add.Tensor", {}, [] {}));
  ASSERT_OK(accinteStreamSynchronize(stream));
  uint64_t after = 0;
  ASSERT_OK(accinteActivityGetTimestamp(&after));
  const auto records = takeAll();

  const auto kernels = ofKind(records, accinteActivityKindKernel);
  ASSERT_EQ(kernels.size(), 1U);
  const accinteActivityRecord& kernel = kernels[0];
  EXPECT_STREQ(kernel.name, "aten::add.Tensor");
  EXPECT_EQ(kernel.memcpyKind, accinteActivityMemcpyNone);
  EXPECT_EQ(kernel.device, 0);
  EXPECT_EQ(kernel.srcDevice, -1);
  EXPECT_EQ(kernel.dstDevice, -1);
  EXPECT_EQ(kernel.stream, stream);
  EXPECT_EQ(kernel.bytes, 0U);
  EXPECT_EQ(kernel.threadId, threadId());
  EXPECT_LE(before, kernel.start);
  EXPECT_LE(kernel.start, kernel.end);
  EXPECT_LE(kernel.end, after);
  EXPECT_NE(kernel.correlationId, 0U);
  EXPECT_EQ(kernel.externalCorrelationId, 0U);

  // The launch that enqueued it has the same correlation id and was made
  // (entered) before the kernel started.
  const accinteActivityRecord* launch =
      findCall(records, "accinteLaunchKernel", kernel.correlationId);
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(launch->stream, nullptr);
  EXPECT_EQ(launch->device, 0);
  EXPECT_EQ(launch->threadId, threadId());
  EXPECT_LE(launch->start, kernel.start);
  EXPECT_LE(launch->start, launch->end);
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST_F(Tracing, UnnamedKernelIsNamedKernelAndLongNamesAreCut) {
  const std::string longName(300, 'x');
  ASSERT_OK(accinte::launchKernel(nullptr, {}, [] {}));
  ASSERT_OK(accinte::launchNamedKernel(nullptr, longName.c_str(), {}, [] {}));
  ASSERT_OK(accinteStreamSynchronize(nullptr));
  const auto kernels = ofKind(takeAll(), accinteActivityKindKernel);
  ASSERT_EQ(kernels.size(), 2U);
  EXPECT_STREQ(kernels[0].name, "kernel");
  EXPECT_EQ(std::string(kernels[1].name),
            longName.substr(0, ACCINTE_ACTIVITY_NAME_SIZE - 1));
}

TEST_F(Tracing, UnnamedKernelsTakeTheNameOnTopOfTheThreadsStack) {
  ASSERT_OK(accinteActivityPushName("aten::mm"));
  ASSERT_OK(accinte::launchKernel(nullptr, {}, [] {}));
  ASSERT_OK(accinte::launchNamedKernel(nullptr, "explicit", {}, [] {}));
  {
    // A copy of the name is pushed: the caller's string may go.
    std::string inner = "aten::relu";
    ASSERT_OK(accinteActivityPushName(inner.c_str()));
    inner = "overwritten";
  }
  ASSERT_OK(accinte::launchKernel(nullptr, {}, [] {}));
  std::thread other([] {
    // Another thread's stack is its own.
    EXPECT_OK(accinte::launchKernel(nullptr, {}, [] {}));
  });
  other.join();
  ASSERT_OK(accinteActivityPopName());
  ASSERT_OK(accinte::launchKernel(nullptr, {}, [] {}));
  ASSERT_OK(accinteActivityPopName());
  ASSERT_OK(accinte::launchKernel(nullptr, {}, [] {}));
  DeviceBuffer buffer(16);
  ASSERT_OK(buffer.status());
  ASSERT_OK(accinteActivityPushName("aten::zero_"));
  ASSERT_OK(accinteMemsetAsync(buffer.ptr(), 0, 16, nullptr));
  ASSERT_OK(accinteActivityPopName());
  ASSERT_OK(accinteStreamSynchronize(nullptr));
  const auto records = takeAll();
  const auto kernels = ofKind(records, accinteActivityKindKernel);
  const char* const expected[] = {"aten::mm", "explicit", "aten::relu",
                                  "kernel",   "aten::mm", "kernel"};
  ASSERT_EQ(kernels.size(), std::size(expected));
  for (size_t i = 0; i < kernels.size(); ++i) {
    EXPECT_STREQ(kernels[i].name, expected[i]);
  }
  // Copies and memsets keep their own names.
  const auto memsets = ofKind(records, accinteActivityKindMemset);
  ASSERT_EQ(memsets.size(), 1U);
  EXPECT_STREQ(memsets[0].name, "Memset");
}

TEST_F(Tracing, DefaultStreamIsReportedByItsHandle) {
  ASSERT_OK(accinteSetDevice(1));
  ASSERT_OK(accinte::launchKernel(nullptr, {}, [] {}));
  ASSERT_OK(accinteStreamSynchronize(nullptr));
  accinteStream_t defaultStream = nullptr;
  ASSERT_OK(accinteGetDefaultStream(1, &defaultStream));
  const auto kernels = ofKind(takeAll(), accinteActivityKindKernel);
  ASSERT_EQ(kernels.size(), 1U);
  EXPECT_EQ(kernels[0].stream, defaultStream);
  EXPECT_EQ(kernels[0].device, 1);
}

TEST_F(Tracing, CopiesAndMemsetsHaveTheirDirectionDevicesAndBytes) {
  constexpr size_t kBytes = 4096;
  DeviceBuffer first(kBytes);
  DeviceBuffer second(kBytes);
  ASSERT_OK(first.status());
  ASSERT_OK(second.status());
  ASSERT_OK(accinteSetDevice(1));
  DeviceBuffer other(kBytes);
  ASSERT_OK(other.status());
  ASSERT_OK(accinteSetDevice(0));
  std::vector<char> host(kBytes, 7);
  std::vector<char> back(kBytes, 0);
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));

  ASSERT_OK(accinteMemsetAsync(first.ptr(), 0, 100, stream));
  ASSERT_OK(accinteMemcpyAsync(first.ptr(), host.data(), 1000,
                               accinteMemcpyHostToDevice, stream));
  ASSERT_OK(accinteMemcpyAsync(second.ptr(), first.ptr(), 2000,
                               accinteMemcpyDeviceToDevice, stream));
  ASSERT_OK(accinteMemcpyAsync(back.data(), second.ptr(), 3000,
                               accinteMemcpyDeviceToHost, stream));
  ASSERT_OK(accinteMemcpyAsync(back.data(), host.data(), 10,
                               accinteMemcpyHostToHost, stream));
  ASSERT_OK(accinteStreamSynchronize(stream));
  // A blocking copy across devices runs on the destination's default stream.
  ASSERT_OK(accinteMemcpy(other.ptr(), first.ptr(), kBytes,
                          accinteMemcpyDeviceToDevice));
  const auto records = takeAll();

  struct Expected {
    accinteActivityKind kind;
    accinteActivityMemcpyKind memcpyKind;
    const char* name;
    int device;
    int srcDevice;
    int dstDevice;
    uint64_t bytes;
    const char* call;
  };
  const Expected expected[] = {
      {accinteActivityKindMemset, accinteActivityMemcpyNone, "Memset", 0, -1, 0,
       100, "accinteMemsetAsync"},
      {accinteActivityKindMemcpy, accinteActivityMemcpyHtoD, "Memcpy HtoD", 0,
       -1, 0, 1000, "accinteMemcpyAsync"},
      {accinteActivityKindMemcpy, accinteActivityMemcpyDtoD, "Memcpy DtoD", 0,
       0, 0, 2000, "accinteMemcpyAsync"},
      {accinteActivityKindMemcpy, accinteActivityMemcpyDtoH, "Memcpy DtoH", 0,
       0, -1, 3000, "accinteMemcpyAsync"},
      {accinteActivityKindMemcpy, accinteActivityMemcpyHtoH, "Memcpy HtoH", 0,
       -1, -1, 10, "accinteMemcpyAsync"},
      {accinteActivityKindMemcpy, accinteActivityMemcpyPtoP, "Memcpy PtoP", 1,
       0, 1, kBytes, "accinteMemcpy"},
  };
  std::vector<accinteActivityRecord> work;
  for (const auto& record : records) {
    if (record.kind != accinteActivityKindRuntime) {
      work.push_back(record);
    }
  }
  ASSERT_EQ(work.size(), std::size(expected));
  accinteStream_t defaultStream1 = nullptr;
  ASSERT_OK(accinteGetDefaultStream(1, &defaultStream1));
  for (size_t i = 0; i < work.size(); ++i) {
    SCOPED_TRACE(expected[i].name);
    EXPECT_EQ(work[i].kind, expected[i].kind);
    EXPECT_EQ(work[i].memcpyKind, expected[i].memcpyKind);
    EXPECT_STREQ(work[i].name, expected[i].name);
    EXPECT_EQ(work[i].device, expected[i].device);
    EXPECT_EQ(work[i].srcDevice, expected[i].srcDevice);
    EXPECT_EQ(work[i].dstDevice, expected[i].dstDevice);
    EXPECT_EQ(work[i].bytes, expected[i].bytes);
    EXPECT_EQ(work[i].stream, i + 1 < work.size() ? stream : defaultStream1);
    EXPECT_LE(work[i].start, work[i].end);
    EXPECT_NE(findCall(records, expected[i].call, work[i].correlationId),
              nullptr);
  }
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST_F(Tracing, RecordsOfOneStreamFollowItsOrder) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  constexpr int kKernels = 50;
  for (int i = 0; i < kKernels; ++i) {
    const std::string name = "k" + std::to_string(i);
    ASSERT_OK(accinte::launchNamedKernel(stream, name.c_str(), {}, [] {}));
  }
  ASSERT_OK(accinteStreamSynchronize(stream));
  const auto kernels = ofKind(takeAll(), accinteActivityKindKernel);
  ASSERT_EQ(kernels.size(), static_cast<size_t>(kKernels));
  for (int i = 0; i < kKernels; ++i) {
    EXPECT_EQ(std::string(kernels[i].name), "k" + std::to_string(i));
    EXPECT_LE(kernels[i].start, kernels[i].end);
    if (i > 0) {
      // One worker runs them one after the other.
      EXPECT_LE(kernels[i - 1].end, kernels[i].start);
      EXPECT_LT(kernels[i - 1].correlationId, kernels[i].correlationId);
    }
  }
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST_F(Tracing, RuntimeCallsAreRecordedOnTheCallingThread) {
  void* device = nullptr;
  void* pinned = nullptr;
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreate(&event));
  ASSERT_OK(accinteMalloc(&device, 64));
  ASSERT_OK(accinteMallocHost(&pinned, 64));
  ASSERT_OK(accinteEventRecord(event, nullptr));
  ASSERT_OK(accinteStreamWaitEvent(nullptr, event));
  ASSERT_OK(accinteEventSynchronize(event));
  ASSERT_OK(accinteDeviceSynchronize());
  ASSERT_OK(accinteFreeHost(pinned));
  ASSERT_OK(accinteFree(device));
  ASSERT_OK(accinteEventDestroy(event));
  // A failed call is recorded too (a real call with its time).
  EXPECT_EQ(accinteFree(&event), accinteErrorInvalidDevicePointer);

  const auto calls = ofKind(takeAll(), accinteActivityKindRuntime);
  const char* const expected[] = {"accinteMalloc",
                                  "accinteMallocHost",
                                  "accinteEventRecord",
                                  "accinteStreamWaitEvent",
                                  "accinteEventSynchronize",
                                  "accinteDeviceSynchronize",
                                  "accinteFreeHost",
                                  "accinteFree",
                                  "accinteFree"};
  ASSERT_EQ(calls.size(), std::size(expected));
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_STREQ(calls[i].name, expected[i]);
    EXPECT_EQ(calls[i].stream, nullptr);
    EXPECT_EQ(calls[i].device, 0);
    EXPECT_EQ(calls[i].bytes, 0U);
    EXPECT_EQ(calls[i].threadId, threadId());
    EXPECT_LE(calls[i].start, calls[i].end);
    if (i > 0) {
      EXPECT_LE(calls[i - 1].end, calls[i].start);
      EXPECT_LT(calls[i - 1].correlationId, calls[i].correlationId);
    }
  }
}

TEST_F(Tracing, IpcMemoryCallsAreRecorded) {
  void* device = nullptr;
  ASSERT_OK(accinteMalloc(&device, 64));
  accinteIpcMemHandle_t handle;
  ASSERT_OK(accinteIpcGetMemHandle(&handle, device));
  void* opened = nullptr;
  // Failed calls (a handle of this process, memory not opened) count too.
  EXPECT_EQ(accinteIpcOpenMemHandle(&opened, handle, 0),
            accinteErrorInvalidIpcHandle);
  EXPECT_EQ(accinteIpcCloseMemHandle(device), accinteErrorInvalidDevicePointer);
  ASSERT_OK(accinteFree(device));
  const auto calls = ofKind(takeAll(), accinteActivityKindRuntime);
  const char* const expected[] = {"accinteMalloc", "accinteIpcGetMemHandle",
                                  "accinteIpcOpenMemHandle",
                                  "accinteIpcCloseMemHandle", "accinteFree"};
  ASSERT_EQ(calls.size(), std::size(expected));
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_STREQ(calls[i].name, expected[i]);
  }
}

TEST_F(Tracing, TimestampsAreOnTheMonotonicClock) {
  timespec now{};
  ASSERT_EQ(clock_gettime(CLOCK_MONOTONIC, &now), 0);
  const uint64_t before =
      static_cast<uint64_t>(now.tv_sec) * 1000000000U + now.tv_nsec;
  uint64_t timestamp = 0;
  ASSERT_OK(accinteActivityGetTimestamp(&timestamp));
  ASSERT_EQ(clock_gettime(CLOCK_MONOTONIC, &now), 0);
  const uint64_t after =
      static_cast<uint64_t>(now.tv_sec) * 1000000000U + now.tv_nsec;
  EXPECT_LE(before, timestamp);
  EXPECT_LE(timestamp, after);
}

TEST_F(Tracing, ExternalCorrelationIdComesFromTheEnqueuingThread) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  ASSERT_OK(accinteActivityPushExternalCorrelationId(42));
  ASSERT_OK(accinte::launchNamedKernel(stream, "outer", {}, [] {}));
  ASSERT_OK(accinteActivityPushExternalCorrelationId(43));
  ASSERT_OK(accinte::launchNamedKernel(stream, "inner", {}, [] {}));
  uint64_t popped = 0;
  ASSERT_OK(accinteActivityPopExternalCorrelationId(&popped));
  EXPECT_EQ(popped, 43U);
  ASSERT_OK(accinte::launchNamedKernel(stream, "outer again", {}, [] {}));
  ASSERT_OK(accinteActivityPopExternalCorrelationId(&popped));
  EXPECT_EQ(popped, 42U);
  ASSERT_OK(accinte::launchNamedKernel(stream, "none", {}, [] {}));

  // Another thread's ids are its own, on the same stream at the same time.
  std::thread other([stream] {
    EXPECT_OK(accinteActivityPushExternalCorrelationId(7));
    EXPECT_OK(accinte::launchNamedKernel(stream, "other", {}, [] {}));
    EXPECT_OK(accinteActivityPopExternalCorrelationId(nullptr));
  });
  other.join();
  ASSERT_OK(accinteStreamSynchronize(stream));

  const auto records = takeAll();
  const auto kernels = ofKind(records, accinteActivityKindKernel);
  ASSERT_EQ(kernels.size(), 5U);
  const std::pair<const char*, uint64_t> expected[] = {{"outer", 42},
                                                       {"inner", 43},
                                                       {"outer again", 42},
                                                       {"none", 0},
                                                       {"other", 7}};
  for (size_t i = 0; i < kernels.size(); ++i) {
    EXPECT_STREQ(kernels[i].name, expected[i].first);
    EXPECT_EQ(kernels[i].externalCorrelationId, expected[i].second);
    const accinteActivityRecord* launch =
        findCall(records, "accinteLaunchKernel", kernels[i].correlationId);
    ASSERT_NE(launch, nullptr);
    EXPECT_EQ(launch->externalCorrelationId, expected[i].second);
    EXPECT_EQ(launch->threadId, kernels[i].threadId);
  }
  EXPECT_NE(kernels[4].threadId, threadId());
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST_F(Tracing, TwoDevicesAndTwoStreamsEachGetTheirOwnRecords) {
  accinteStream_t streams[2][2] = {};
  for (int device = 0; device < 2; ++device) {
    ASSERT_OK(accinteSetDevice(device));
    for (auto& stream : streams[device]) {
      ASSERT_OK(accinteStreamCreate(&stream));
    }
  }
  ASSERT_OK(accinteSetDevice(0));
  for (int device = 0; device < 2; ++device) {
    for (int s = 0; s < 2; ++s) {
      const std::string name =
          "d" + std::to_string(device) + "s" + std::to_string(s);
      ASSERT_OK(accinte::launchNamedKernel(streams[device][s], name.c_str(), {},
                                           [] {}));
    }
  }
  for (auto& perDevice : streams) {
    for (auto& stream : perDevice) {
      ASSERT_OK(accinteStreamSynchronize(stream));
    }
  }
  const auto kernels = ofKind(takeAll(), accinteActivityKindKernel);
  ASSERT_EQ(kernels.size(), 4U);
  int seen = 0;
  for (const auto& kernel : kernels) {
    const int device = kernel.name[1] - '0';
    const int s = kernel.name[3] - '0';
    ASSERT_TRUE(device >= 0 && device < 2 && s >= 0 && s < 2) << kernel.name;
    EXPECT_EQ(kernel.device, device);
    EXPECT_EQ(kernel.stream, streams[device][s]);
    seen |= 1 << (device * 2 + s);
  }
  EXPECT_EQ(seen, 0xF);
  for (auto& perDevice : streams) {
    for (auto& stream : perDevice) {
      ASSERT_OK(accinteStreamDestroy(stream));
    }
  }
}

TEST(TracingBuffer, AFullBufferDropsAndCountsTheRest) {
  ASSERT_OK(accinteActivityEnable(4));
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  constexpr int kKernels = 10;
  for (int i = 0; i < kKernels; ++i) {
    ASSERT_OK(accinte::launchKernel(stream, {}, [] {}));
  }
  ASSERT_OK(accinteStreamSynchronize(stream));
  ASSERT_OK(accinteActivityDisable());
  // Each launch makes two records (the call and the kernel), the
  // synchronize one.
  const size_t made = 2 * kKernels + 1;
  const auto kept = takeAll();
  EXPECT_EQ(kept.size(), 4U);
  uint64_t dropped = 0;
  ASSERT_OK(accinteActivityGetDropped(&dropped));
  EXPECT_EQ(dropped, made - 4);
  // Taking makes no room for a session that has ended, and the count stays
  // until the next session starts afresh.
  ASSERT_OK(accinteActivityGetDropped(&dropped));
  EXPECT_EQ(dropped, made - 4);
  ASSERT_OK(accinteActivityEnable(0));
  ASSERT_OK(accinteActivityGetDropped(&dropped));
  EXPECT_EQ(dropped, 0U);
  ASSERT_OK(accinteActivityDisable());
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST(TracingBuffer, EnablingDiscardsWhatTheLastSessionLeft) {
  ASSERT_OK(accinteActivityEnable(0));
  ASSERT_OK(accinte::launchKernel(nullptr, {}, [] {}));
  ASSERT_OK(accinteStreamSynchronize(nullptr));
  ASSERT_OK(accinteActivityEnable(0));
  ASSERT_OK(accinteActivityDisable());
  EXPECT_TRUE(takeAll().empty());
}

TEST(TracingSession, WorkStillQueuedWhenTracingStopsIsNotRecorded) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  Gate gate;
  ASSERT_OK(gate.block(stream));
  ASSERT_OK(accinteActivityEnable(0));
  ASSERT_OK(accinte::launchNamedKernel(stream, "late", {}, [] {}));
  ASSERT_OK(accinteActivityDisable());
  gate.release();
  ASSERT_OK(accinteStreamSynchronize(stream));
  const auto records = takeAll();
  // The launch returned while tracing was on; its kernel ran after.
  ASSERT_EQ(records.size(), 1U);
  EXPECT_STREQ(records[0].name, "accinteLaunchKernel");
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST(TracingSession, WorkOfAnEndedSessionIsNotRecordedInTheNext) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  Gate gate;
  ASSERT_OK(gate.block(stream));
  ASSERT_OK(accinteActivityEnable(0));
  ASSERT_OK(accinte::launchNamedKernel(stream, "first session", {}, [] {}));
  ASSERT_OK(accinteActivityEnable(0));
  gate.release();
  ASSERT_OK(accinteStreamSynchronize(stream));
  ASSERT_OK(accinteActivityDisable());
  const auto records = takeAll();
  ASSERT_EQ(records.size(), 1U);
  EXPECT_STREQ(records[0].name, "accinteStreamSynchronize");
  ASSERT_OK(accinteStreamDestroy(stream));
}

// Launchers on two streams of two devices while another thread turns tracing
// on and off and takes records: every record is whole (its fields agree with
// one another) and the runtime keeps working.
TEST(TracingSession, TogglingWhileWorkersRunKeepsRecordsWhole) {
  constexpr int kThreads = 2;
  constexpr int kRounds = 40;
  accinteStream_t streams[kThreads] = {};
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_OK(accinteSetDevice(t));
    ASSERT_OK(accinteStreamCreate(&streams[t]));
  }
  ASSERT_OK(accinteSetDevice(0));
  std::atomic<bool> toggled{false};
  std::vector<std::thread> launchers;
  for (int t = 0; t < kThreads; ++t) {
    launchers.emplace_back([&, t] {
      EXPECT_OK(accinteSetDevice(t));
      for (uint64_t i = 1; !toggled.load(); ++i) {
        // The external id encodes the thread and launch; the name repeats it.
        const uint64_t id = static_cast<uint64_t>(t) * 100000000 + i;
        const std::string name = "k" + std::to_string(id);
        EXPECT_OK(accinteActivityPushExternalCorrelationId(id));
        EXPECT_OK(
            accinte::launchNamedKernel(streams[t], name.c_str(), {}, [] {}));
        EXPECT_OK(accinteActivityPopExternalCorrelationId(nullptr));
        if (i % 64 == 0) {
          // Keeps the queue short, and traces a synchronize now and then.
          EXPECT_OK(accinteStreamSynchronize(streams[t]));
        }
      }
      EXPECT_OK(accinteStreamSynchronize(streams[t]));
    });
  }
  // NB: each state lasts a number of takes, long enough for kernels to be
  // enqueued and run within one session; the buffer is small, so that it
  // also fills and drops.
  std::vector<accinteActivityRecord> seen;
  std::vector<accinteActivityRecord> batch(16);
  for (int round = 0; round < kRounds; ++round) {
    EXPECT_OK(round % 2 == 0 ? accinteActivityEnable(64)
                             : accinteActivityDisable());
    for (int i = 0; i < 100; ++i) {
      size_t count = 0;
      EXPECT_OK(accinteActivityTake(batch.data(), batch.size(), &count));
      seen.insert(seen.end(), batch.begin(), batch.begin() + count);
      std::this_thread::yield();
    }
  }
  EXPECT_OK(accinteActivityDisable());
  toggled = true;
  for (auto& launcher : launchers) {
    launcher.join();
  }
  const auto rest = takeAll();
  seen.insert(seen.end(), rest.begin(), rest.end());
  size_t kernels = 0;
  for (const auto& record : seen) {
    EXPECT_LE(record.start, record.end);
    EXPECT_NE(record.correlationId, 0U);
    if (record.kind != accinteActivityKindKernel) {
      continue;
    }
    const uint64_t id = record.externalCorrelationId;
    const int t = static_cast<int>(id / 100000000);
    ASSERT_TRUE(t >= 0 && t < kThreads) << id;
    EXPECT_EQ(std::string(record.name), "k" + std::to_string(id));
    EXPECT_EQ(record.device, t);
    EXPECT_EQ(record.stream, streams[t]);
    ++kernels;
  }
  RecordProperty("kernel_records_checked", static_cast<int>(kernels));
  // And tracing still works on those streams.
  ASSERT_OK(accinteActivityEnable(0));
  for (auto& stream : streams) {
    ASSERT_OK(accinte::launchNamedKernel(stream, "after", {}, [] {}));
    ASSERT_OK(accinteStreamSynchronize(stream));
  }
  ASSERT_OK(accinteActivityDisable());
  EXPECT_EQ(ofKind(takeAll(), accinteActivityKindKernel).size(), 2U);
  for (auto& stream : streams) {
    ASSERT_OK(accinteStreamDestroy(stream));
  }
}

TEST(TracingApi, BadInputReturnsErrorCodes) {
  accinteActivityRecord record;
  size_t count = 5;
  EXPECT_EQ(accinteActivityTake(nullptr, 1, &count), accinteErrorInvalidValue);
  EXPECT_EQ(accinteActivityTake(&record, 1, nullptr), accinteErrorInvalidValue);
  EXPECT_OK(accinteActivityTake(nullptr, 0, &count));
  EXPECT_EQ(count, 0U);
  EXPECT_EQ(accinteActivityGetDropped(nullptr), accinteErrorInvalidValue);
  EXPECT_EQ(accinteActivityIsEnabled(nullptr), accinteErrorInvalidValue);
  EXPECT_EQ(accinteActivityGetTimestamp(nullptr), accinteErrorInvalidValue);
  EXPECT_EQ(accinteActivityEnable(size_t{ACCINTE_ACTIVITY_MAX_CAPACITY} + 1),
            accinteErrorInvalidValue);
  int enabled = 1;
  ASSERT_OK(accinteActivityIsEnabled(&enabled));
  EXPECT_EQ(enabled, 0);
  EXPECT_EQ(accinteActivityPushExternalCorrelationId(0),
            accinteErrorInvalidValue);
  uint64_t id = 9;
  EXPECT_EQ(accinteActivityPopExternalCorrelationId(&id),
            accinteErrorInvalidValue);
  EXPECT_EQ(id, 9U);
  EXPECT_EQ(accinteActivityPopExternalCorrelationId(nullptr),
            accinteErrorInvalidValue);
  EXPECT_EQ(accinteActivityPushName(nullptr), accinteErrorInvalidValue);
  EXPECT_EQ(accinteActivityPopName(), accinteErrorInvalidValue);
  // Disabling twice is harmless.
  EXPECT_OK(accinteActivityDisable());
  EXPECT_OK(accinteActivityDisable());

  // A named launch checks what an unnamed one does, and releases the
  // arguments when it refuses; a null name is allowed.
  deleterCalls = 0;
  EXPECT_EQ(accinteLaunchKernelNamed(nullptr, "bad", nullptr, nullptr,
                                     &countDeleterCall, nullptr, 0),
            accinteErrorInvalidValue);
  EXPECT_EQ(accinteLaunchKernelNamed(nullptr, "bad", &emptyKernel, nullptr,
                                     &countDeleterCall, nullptr, 1),
            accinteErrorInvalidValue);
  int hostValue = 0;
  const void* hostBuffer = &hostValue;
  EXPECT_EQ(accinteLaunchKernelNamed(nullptr, "bad", &emptyKernel, nullptr,
                                     &countDeleterCall, &hostBuffer, 1),
            accinteErrorInvalidDevicePointer);
  EXPECT_EQ(deleterCalls, 3);
  EXPECT_OK(accinteLaunchKernelNamed(nullptr, nullptr, &emptyKernel, nullptr,
                                     &countDeleterCall, nullptr, 0));
  EXPECT_OK(accinteStreamSynchronize(nullptr));
  EXPECT_EQ(deleterCalls, 4);
}
