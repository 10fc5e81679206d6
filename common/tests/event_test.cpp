// Events: records, queries, timing, and waits across streams and devices.

#include "test_util.h"

#include <atomic>
#include <cstdint>
#include <future>
#include <stdexcept>
#include <string>
#include <vector>

using accinte::testing::DeviceBuffer;
using accinte::testing::Gate;

namespace {

const auto kBogusEvent = reinterpret_cast<accinteEvent_t>(uintptr_t{0xbad});

TEST(Event, CreateWithFlagsAndDestroy) {
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreate(&event));
  ASSERT_NE(event, nullptr);
  ASSERT_OK(accinteEventDestroy(event));
  ASSERT_OK(accinteEventCreateWithFlags(&event, accinteEventDisableTiming));
  ASSERT_OK(accinteEventDestroy(event));
  EXPECT_EQ(accinteEventDestroy(event), accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteEventCreateWithFlags(&event, 4), accinteErrorInvalidValue);
  EXPECT_EQ(accinteEventCreate(nullptr), accinteErrorInvalidValue);
  EXPECT_EQ(accinteEventCreateWithFlags(nullptr, 0), accinteErrorInvalidValue);
}

TEST(Event, BogusAndDestroyedHandles) {
  float ms = 0;
  accinteEvent_t good = nullptr;
  ASSERT_OK(accinteEventCreate(&good));
  for (accinteEvent_t bad :
       {kBogusEvent, static_cast<accinteEvent_t>(nullptr)}) {
    EXPECT_EQ(accinteEventDestroy(bad), accinteErrorInvalidResourceHandle);
    EXPECT_EQ(accinteEventRecord(bad, nullptr),
              accinteErrorInvalidResourceHandle);
    EXPECT_EQ(accinteEventQuery(bad), accinteErrorInvalidResourceHandle);
    EXPECT_EQ(accinteEventSynchronize(bad), accinteErrorInvalidResourceHandle);
    EXPECT_EQ(accinteEventElapsedTime(&ms, bad, good),
              accinteErrorInvalidResourceHandle);
    EXPECT_EQ(accinteEventElapsedTime(&ms, good, bad),
              accinteErrorInvalidResourceHandle);
    EXPECT_EQ(accinteStreamWaitEvent(nullptr, bad),
              accinteErrorInvalidResourceHandle);
  }
  EXPECT_EQ(accinteEventRecord(
                good, reinterpret_cast<accinteStream_t>(uintptr_t{0xbad})),
            accinteErrorInvalidResourceHandle);
  ASSERT_OK(accinteEventDestroy(good));
}

TEST(Event, NeverRecordedIsCompleteAndImposesNoWait) {
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreate(&event));
  EXPECT_OK(accinteEventQuery(event));
  EXPECT_OK(accinteEventSynchronize(event));
  EXPECT_OK(accinteStreamWaitEvent(nullptr, event));
  EXPECT_OK(accinteStreamSynchronize(nullptr));
  ASSERT_OK(accinteEventDestroy(event));
}

TEST(Event, RecordCompletesWithThePrecedingWork) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreate(&event));
  Gate gate;
  ASSERT_OK(gate.block(stream));
  ASSERT_OK(accinteEventRecord(event, stream));
  EXPECT_EQ(accinteEventQuery(event), accinteErrorNotReady);
  gate.release();
  ASSERT_OK(accinteEventSynchronize(event));
  EXPECT_OK(accinteEventQuery(event));
  // Recording on the default stream (NULL) works the same way.
  ASSERT_OK(accinteEventRecord(event, nullptr));
  ASSERT_OK(accinteEventSynchronize(event));
  EXPECT_OK(accinteEventQuery(event));
  ASSERT_OK(accinteEventDestroy(event));
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST(Event, ACompleteRecordLeavesItsStreamPastIt) {
  // A record that completes while its stream still counts it outstanding
  // would let a program see an event done and the stream, with nothing
  // enqueued after the record, still busy. The window is microseconds wide,
  // so the test looks for it many times, the caller spinning on the query
  // while the worker finishes the record on the other CPU.
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreate(&event));
  for (int i = 0; i < 2000; ++i) {
    ASSERT_OK(accinteEventRecord(event, stream));
    accinteError_t status = accinteErrorNotReady;
    while ((status = accinteEventQuery(event)) == accinteErrorNotReady) {
    }
    ASSERT_OK(status);
    ASSERT_OK(accinteStreamQuery(stream)) << "after record " << i;
  }
  ASSERT_OK(accinteEventDestroy(event));
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST(Event, ElapsedTime) {
  accinteEvent_t start = nullptr;
  accinteEvent_t end = nullptr;
  accinteEvent_t untimed = nullptr;
  ASSERT_OK(accinteEventCreate(&start));
  ASSERT_OK(accinteEventCreate(&end));
  ASSERT_OK(accinteEventCreateWithFlags(&untimed, accinteEventDisableTiming));
  float ms = -1;
  EXPECT_EQ(accinteEventElapsedTime(&ms, start, end),
            accinteErrorEventNotRecorded);
  EXPECT_EQ(accinteEventElapsedTime(&ms, start, untimed),
            accinteErrorTimingDisabled);
  EXPECT_EQ(accinteEventElapsedTime(&ms, untimed, end),
            accinteErrorTimingDisabled);
  EXPECT_EQ(accinteEventElapsedTime(nullptr, start, end),
            accinteErrorInvalidValue);

  ASSERT_OK(accinteEventRecord(start, nullptr));
  ASSERT_OK(accinteEventSynchronize(start));
  EXPECT_EQ(accinteEventElapsedTime(&ms, start, end),
            accinteErrorEventNotRecorded);

  Gate gate;
  ASSERT_OK(gate.block(nullptr));
  ASSERT_OK(accinteEventRecord(end, nullptr));
  EXPECT_EQ(accinteEventElapsedTime(&ms, start, end), accinteErrorNotReady);
  gate.release();
  ASSERT_OK(accinteEventSynchronize(end));
  ASSERT_OK(accinteEventElapsedTime(&ms, start, end));
  EXPECT_GE(ms, 0.0f);

  ASSERT_OK(accinteEventRecord(untimed, nullptr));
  ASSERT_OK(accinteEventSynchronize(untimed));
  EXPECT_EQ(accinteEventElapsedTime(&ms, start, untimed),
            accinteErrorTimingDisabled);
  for (accinteEvent_t event : {start, end, untimed}) {
    ASSERT_OK(accinteEventDestroy(event));
  }
}

TEST(Event, StreamWaitsForAnEventOnAnotherStream) {
  accinteStream_t producer = nullptr;
  accinteStream_t consumer = nullptr;
  ASSERT_OK(accinteStreamCreate(&producer));
  ASSERT_OK(accinteStreamCreate(&consumer));
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreateWithFlags(&event, accinteEventDisableTiming));
  DeviceBuffer buffer(sizeof(int));
  ASSERT_OK(buffer.status());
  auto* value = buffer.as<int>();

  Gate gate;
  ASSERT_OK(gate.block(producer));
  ASSERT_OK(accinte::launchKernel(producer, {value}, [value] { *value = 5; }));
  ASSERT_OK(accinteEventRecord(event, producer));
  ASSERT_OK(accinteStreamWaitEvent(consumer, event));
  ASSERT_OK(accinte::launchKernel(consumer, {value}, [value] { *value *= 3; }));
  EXPECT_EQ(accinteStreamQuery(consumer), accinteErrorNotReady);
  gate.release();
  ASSERT_OK(accinteStreamSynchronize(consumer));
  int result = 0;
  ASSERT_OK(
      accinteMemcpy(&result, value, sizeof(int), accinteMemcpyDeviceToHost));
  EXPECT_EQ(result, 15);
  ASSERT_OK(accinteEventDestroy(event));
  ASSERT_OK(accinteStreamDestroy(producer));
  ASSERT_OK(accinteStreamDestroy(consumer));
}

TEST(Event, StreamWaitsForAnEventOnAnotherDevice) {
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreate(&event));
  ASSERT_OK(accinteSetDevice(1));
  accinteStream_t producer = nullptr;
  ASSERT_OK(accinteStreamCreate(&producer));
  Gate gate;
  ASSERT_OK(gate.block(producer));
  std::atomic<int> step{0};
  ASSERT_OK(accinte::launchKernel(producer, {}, [&step] { step = 1; }));
  ASSERT_OK(accinteEventRecord(event, producer));
  ASSERT_OK(accinteSetDevice(0));
  int seen = -1;
  ASSERT_OK(accinteStreamWaitEvent(nullptr, event));
  ASSERT_OK(accinte::launchKernel(nullptr, {},
                                  [&step, &seen] { seen = step.load(); }));
  EXPECT_EQ(accinteStreamQuery(nullptr), accinteErrorNotReady);
  gate.release();
  ASSERT_OK(accinteStreamSynchronize(nullptr));
  EXPECT_EQ(seen, 1);
  ASSERT_OK(accinteEventDestroy(event));
  ASSERT_OK(accinteStreamDestroy(producer));
}

TEST(Event, WaitCapturesTheRecordCurrentAtCallTime) {
  accinteStream_t first = nullptr;
  accinteStream_t second = nullptr;
  accinteStream_t waiter = nullptr;
  ASSERT_OK(accinteStreamCreate(&first));
  ASSERT_OK(accinteStreamCreate(&second));
  ASSERT_OK(accinteStreamCreate(&waiter));
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreate(&event));
  ASSERT_OK(accinteEventRecord(event, first));
  ASSERT_OK(accinteEventSynchronize(event));
  ASSERT_OK(accinteStreamWaitEvent(waiter, event)); // Already complete.
  // Recording again afterwards, behind a closed gate, must not hold the
  // waiter: it captured the earlier record.
  Gate gate;
  ASSERT_OK(gate.block(second));
  ASSERT_OK(accinteEventRecord(event, second));
  EXPECT_EQ(accinteEventQuery(event), accinteErrorNotReady);
  ASSERT_OK(accinteStreamSynchronize(waiter));
  gate.release();
  ASSERT_OK(accinteEventSynchronize(event));
  ASSERT_OK(accinteEventDestroy(event));
  for (accinteStream_t stream : {first, second, waiter}) {
    ASSERT_OK(accinteStreamDestroy(stream));
  }
}

// A wait captures the record current at the call even when a later record
// of the event, on another stream, completes first; for an interprocess
// event used by its own process too.
TEST(Event, ALaterRecordThatCompletesFirstDoesNotReleaseAnEarlierWait) {
  for (unsigned int flags :
       {static_cast<unsigned int>(accinteEventDefault),
        static_cast<unsigned int>(accinteEventInterprocess |
                                  accinteEventDisableTiming)}) {
    SCOPED_TRACE(flags);
    accinteStream_t blocked = nullptr;
    accinteStream_t idle = nullptr;
    accinteStream_t waiter = nullptr;
    ASSERT_OK(accinteStreamCreate(&blocked));
    ASSERT_OK(accinteStreamCreate(&idle));
    ASSERT_OK(accinteStreamCreate(&waiter));
    accinteEvent_t event = nullptr;
    ASSERT_OK(accinteEventCreateWithFlags(&event, flags));
    Gate gate;
    ASSERT_OK(gate.block(blocked));
    ASSERT_OK(accinteEventRecord(event, blocked));
    ASSERT_OK(accinteStreamWaitEvent(waiter, event));
    ASSERT_OK(accinteEventRecord(event, idle));
    ASSERT_OK(accinteEventSynchronize(event)); // the later record
    ASSERT_OK(accinteStreamSynchronize(idle));
    EXPECT_EQ(accinteStreamQuery(waiter), accinteErrorNotReady);
    gate.release();
    ASSERT_OK(accinteStreamSynchronize(waiter));
    EXPECT_OK(accinteStreamQuery(blocked));
    ASSERT_OK(accinteEventDestroy(event));
    for (accinteStream_t stream : {blocked, idle, waiter}) {
      ASSERT_OK(accinteStreamDestroy(stream));
    }
  }
}

TEST(Event, DestroyingAnEventWhileStreamsWaitOnItIsSafe) {
  accinteStream_t producer = nullptr;
  accinteStream_t consumer = nullptr;
  ASSERT_OK(accinteStreamCreate(&producer));
  ASSERT_OK(accinteStreamCreate(&consumer));
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreate(&event));
  Gate gate;
  ASSERT_OK(gate.block(producer));
  ASSERT_OK(accinteEventRecord(event, producer));
  ASSERT_OK(accinteStreamWaitEvent(consumer, event));
  std::atomic<bool> ran{false};
  ASSERT_OK(accinte::launchKernel(consumer, {}, [&ran] { ran = true; }));
  ASSERT_OK(accinteEventDestroy(event));
  EXPECT_EQ(accinteEventQuery(event), accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteStreamQuery(consumer), accinteErrorNotReady);
  gate.release();
  ASSERT_OK(accinteStreamSynchronize(consumer));
  EXPECT_TRUE(ran);
  ASSERT_OK(accinteStreamDestroy(producer));
  ASSERT_OK(accinteStreamDestroy(consumer));
}

TEST(Event, AWaitForFailedWorkFailsTheWaitingStream) {
  accinteStream_t producer = nullptr;
  accinteStream_t consumer = nullptr;
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteStreamCreate(&producer));
  ASSERT_OK(accinteStreamCreate(&consumer));
  ASSERT_OK(accinteEventCreate(&event));
  ASSERT_OK(accinte::launchKernel(
      producer, {}, [] { throw std::runtime_error("the collective failed"); }));
  ASSERT_OK(accinteEventRecord(event, producer));
  ASSERT_OK(accinteStreamWaitEvent(consumer, event));
  std::atomic<bool> ranAfter{false};
  ASSERT_OK(accinte::launchKernel(consumer, {}, [&] { ranAfter = true; }));
  // The consumer's work still runs, as after any failure, but the consumer's
  // own synchronize reports the failure it depended on, with its message.
  EXPECT_EQ(accinteStreamSynchronize(consumer), accinteErrorLaunchFailure);
  EXPECT_TRUE(ranAfter.load());
  EXPECT_EQ(std::string(accinteGetLastFailureMessage()),
            "waited for an event of a stream whose earlier work failed: "
            "the collective failed");
  // It is one failure, reported once: the producer, which nobody
  // synchronized yet, has nothing left to report.
  EXPECT_OK(accinteStreamSynchronize(producer));
  // A record made after the failure was reported carries nothing.
  ASSERT_OK(accinteEventRecord(event, producer));
  ASSERT_OK(accinteStreamWaitEvent(consumer, event));
  EXPECT_OK(accinteStreamSynchronize(consumer));
  ASSERT_OK(accinteEventDestroy(event));
  ASSERT_OK(accinteStreamDestroy(producer));
  ASSERT_OK(accinteStreamDestroy(consumer));
}

TEST(Event, ACopyAcrossDevicesAfterFailedWorkFails) {
  // The runtime's own ordering of a device-to-device copy between two
  // devices' streams carries a failure the same way.
  int count = 0;
  ASSERT_OK(accinteGetDeviceCount(&count));
  if (count < 2) {
    GTEST_SKIP() << "needs two devices";
  }
  ASSERT_OK(accinteSetDevice(0));
  DeviceBuffer source(64);
  ASSERT_OK(accinteSetDevice(1));
  DeviceBuffer target(64);
  ASSERT_OK(accinteSetDevice(0));
  accinteStream_t stream0 = nullptr;
  ASSERT_OK(accinteGetDefaultStream(0, &stream0));
  ASSERT_OK(accinte::launchKernel(
      stream0, {}, [] { throw std::runtime_error("device 0 failed"); }));
  ASSERT_OK(accinteSetDevice(1));
  ASSERT_OK(accinteMemcpy(target.ptr(), source.ptr(), 64,
                          accinteMemcpyDeviceToDevice));
  EXPECT_EQ(accinteDeviceSynchronize(), accinteErrorLaunchFailure);
  EXPECT_NE(std::string(accinteGetLastFailureMessage()).find("device 0 failed"),
            std::string::npos);
  // Reported once, by the device that waited for it.
  ASSERT_OK(accinteSetDevice(0));
  EXPECT_OK(accinteStreamSynchronize(stream0));
}

} // namespace
