// Streams and kernels: creation, priorities, ordering, completion, handle
// validation, and failures.

#include "test_util.h"

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using accinte::testing::DeviceBuffer;
using accinte::testing::Gate;

namespace {

const auto kBogusStream = reinterpret_cast<accinteStream_t>(uintptr_t{0x1f00d});

TEST(Stream, CreateQueryDestroy) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  ASSERT_NE(stream, nullptr);
  EXPECT_OK(accinteStreamQuery(stream));
  EXPECT_OK(accinteStreamSynchronize(stream));
  int device = -1;
  ASSERT_OK(accinteStreamGetDevice(stream, &device));
  EXPECT_EQ(device, 0);
  ASSERT_OK(accinteStreamDestroy(stream));
  // A destroyed handle is reported, never dereferenced.
  EXPECT_EQ(accinteStreamQuery(stream), accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteStreamSynchronize(stream),
            accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteStreamDestroy(stream), accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteStreamGetDevice(stream, &device),
            accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteStreamCreate(nullptr), accinteErrorInvalidValue);
}

TEST(Stream, BogusAndNullHandles) {
  int value = 0;
  EXPECT_EQ(accinteStreamQuery(kBogusStream),
            accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteStreamSynchronize(kBogusStream),
            accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteStreamDestroy(kBogusStream),
            accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteStreamGetPriority(kBogusStream, &value),
            accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteStreamDestroy(nullptr), accinteErrorInvalidResourceHandle);
  // An event handle is not a stream handle.
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreate(&event));
  EXPECT_EQ(accinteStreamQuery(reinterpret_cast<accinteStream_t>(event)),
            accinteErrorInvalidResourceHandle);
  ASSERT_OK(accinteEventDestroy(event));
  // NULL is the current device's default stream.
  EXPECT_OK(accinteStreamQuery(nullptr));
  EXPECT_OK(accinteStreamSynchronize(nullptr));
  ASSERT_OK(accinteStreamGetDevice(nullptr, &value));
  EXPECT_EQ(value, 0);
  EXPECT_EQ(accinteStreamGetDevice(nullptr, nullptr), accinteErrorInvalidValue);
  EXPECT_EQ(accinteStreamGetPriority(nullptr, nullptr),
            accinteErrorInvalidValue);
}

TEST(Stream, DefaultStreamsArePerDeviceAndPermanent) {
  accinteStream_t first = nullptr;
  accinteStream_t again = nullptr;
  accinteStream_t other = nullptr;
  ASSERT_OK(accinteGetDefaultStream(0, &first));
  ASSERT_OK(accinteGetDefaultStream(0, &again));
  ASSERT_OK(accinteGetDefaultStream(1, &other));
  EXPECT_NE(first, nullptr);
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other);
  int device = -1;
  ASSERT_OK(accinteStreamGetDevice(other, &device));
  EXPECT_EQ(device, 1);
  EXPECT_EQ(accinteStreamDestroy(first), accinteErrorInvalidResourceHandle);
  EXPECT_OK(accinteStreamQuery(first));
  EXPECT_EQ(accinteGetDefaultStream(2, &first), accinteErrorInvalidDevice);
  EXPECT_EQ(accinteGetDefaultStream(0, nullptr), accinteErrorInvalidValue);

  // NULL resolves to the default stream of the *current* device.
  ASSERT_OK(accinteSetDevice(1));
  ASSERT_OK(accinteStreamGetDevice(nullptr, &device));
  EXPECT_EQ(device, 1);
  ASSERT_OK(accinteSetDevice(0));
}

TEST(Stream, PrioritiesAreClampedToTheRange) {
  int least = 99;
  int greatest = 99;
  ASSERT_OK(accinteDeviceGetStreamPriorityRange(&least, &greatest));
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, -2);
  EXPECT_EQ(accinteDeviceGetStreamPriorityRange(nullptr, &greatest),
            accinteErrorInvalidValue);
  EXPECT_EQ(accinteDeviceGetStreamPriorityRange(&least, nullptr),
            accinteErrorInvalidValue);

  const std::pair<int, int> requestedAndExpected[] = {
      {0, 0}, {-1, -1}, {-2, -2}, {-100, -2}, {5, 0}};
  for (auto [requested, expected] : requestedAndExpected) {
    accinteStream_t stream = nullptr;
    ASSERT_OK(accinteStreamCreateWithPriority(&stream, requested));
    int priority = 99;
    ASSERT_OK(accinteStreamGetPriority(stream, &priority));
    EXPECT_EQ(priority, expected) << "requested " << requested;
    ASSERT_OK(accinteStreamDestroy(stream));
  }
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  int priority = 99;
  ASSERT_OK(accinteStreamGetPriority(stream, &priority));
  EXPECT_EQ(priority, 0);
  ASSERT_OK(accinteStreamDestroy(stream));
  ASSERT_OK(accinteStreamGetPriority(nullptr, &priority));
  EXPECT_EQ(priority, 0);
  EXPECT_EQ(accinteStreamCreateWithPriority(nullptr, 0),
            accinteErrorInvalidValue);
}

TEST(Stream, StreamsBelongToTheCurrentDevice) {
  ASSERT_OK(accinteSetDevice(1));
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  ASSERT_OK(accinteSetDevice(0));
  int device = -1;
  ASSERT_OK(accinteStreamGetDevice(stream, &device));
  EXPECT_EQ(device, 1);
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST(Stream, WorkRunsInOrder) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) {
    // Only the stream's worker touches `order` until the synchronize.
    ASSERT_OK(
        accinte::launchKernel(stream, {}, [&order, i] { order.push_back(i); }));
  }
  ASSERT_OK(accinteStreamSynchronize(stream));
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(order[i], i);
  }
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST(Stream, QueryIsNotReadyUntilWorkHasFinished) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  Gate gate;
  std::promise<void> started;
  ASSERT_OK(
      accinte::launchKernel(stream, {}, [&started] { started.set_value(); }));
  ASSERT_OK(gate.block(stream));
  started.get_future().wait();
  // The gate kernel has been dequeued (or is about to be) but has not
  // finished: that is not ready.
  EXPECT_EQ(accinteStreamQuery(stream), accinteErrorNotReady);
  EXPECT_EQ(accinteStreamQuery(stream), accinteErrorNotReady);
  gate.release();
  ASSERT_OK(accinteStreamSynchronize(stream));
  EXPECT_OK(accinteStreamQuery(stream));
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST(Stream, StreamsAreIndependent) {
  accinteStream_t blocked = nullptr;
  accinteStream_t free = nullptr;
  ASSERT_OK(accinteStreamCreate(&blocked));
  ASSERT_OK(accinteStreamCreate(&free));
  Gate gate;
  ASSERT_OK(gate.block(blocked));
  std::atomic<bool> ran{false};
  ASSERT_OK(accinte::launchKernel(free, {}, [&ran] { ran = true; }));
  // Each stream has its own worker: a blocked stream holds up no other.
  ASSERT_OK(accinteStreamSynchronize(free));
  EXPECT_TRUE(ran);
  EXPECT_EQ(accinteStreamQuery(blocked), accinteErrorNotReady);
  gate.release();
  ASSERT_OK(accinteStreamDestroy(blocked)); // Waits for the work first.
  ASSERT_OK(accinteStreamDestroy(free));
}

TEST(Stream, DestroyWaitsForPendingWork) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  std::atomic<int> ran{0};
  for (int i = 0; i < 50; ++i) {
    ASSERT_OK(accinte::launchKernel(stream, {}, [&ran] { ++ran; }));
  }
  ASSERT_OK(accinteStreamDestroy(stream));
  EXPECT_EQ(ran.load(), 50);
}

TEST(Kernel, RunsWithItsBuffersAccessible) {
  DeviceBuffer buffer(sizeof(int) * 16);
  ASSERT_OK(buffer.status());
  auto* values = buffer.as<int>();
  ASSERT_OK(accinte::launchKernel(nullptr, {values}, [values] {
    for (int i = 0; i < 16; ++i) {
      values[i] = i * i;
    }
  }));
  // An interior pointer names the same allocation.
  ASSERT_OK(accinte::launchKernel(nullptr, {values + 8},
                                  [values] { values[15] += 1; }));
  std::vector<int> output(16);
  ASSERT_OK(accinteMemcpy(output.data(), values, sizeof(int) * 16,
                          accinteMemcpyDeviceToHost));
  for (int i = 0; i < 15; ++i) {
    EXPECT_EQ(output[i], i * i);
  }
  EXPECT_EQ(output[15], 226);
}

/** Arguments of the C-style kernel below. */
struct AddArgs {
  int* values;
  int count;
  int addend;
  std::atomic<int>* deleted;
};

accinteError_t addKernel(void* raw) {
  auto* args = static_cast<AddArgs*>(raw);
  for (int i = 0; i < args->count; ++i) {
    args->values[i] += args->addend;
  }
  return accinteSuccess;
}

void deleteAddArgs(void* raw) {
  auto* args = static_cast<AddArgs*>(raw);
  ++*args->deleted;
  delete args;
}

TEST(Kernel, CApiRunsTheKernelThenTheDeleter) {
  DeviceBuffer buffer(sizeof(int) * 4);
  ASSERT_OK(buffer.status());
  ASSERT_OK(accinteMemsetAsync(buffer.ptr(), 0, sizeof(int) * 4, nullptr));
  std::atomic<int> deleted{0};
  const void* buffers[] = {buffer.ptr()};
  ASSERT_OK(accinteLaunchKernel(nullptr, &addKernel,
                                new AddArgs{buffer.as<int>(), 4, 5, &deleted},
                                &deleteAddArgs, buffers, 1));
  ASSERT_OK(accinteStreamSynchronize(nullptr));
  EXPECT_EQ(deleted.load(), 1); // Released before the synchronize returns.
  std::vector<int> output(4);
  ASSERT_OK(accinteMemcpy(output.data(), buffer.ptr(), sizeof(int) * 4,
                          accinteMemcpyDeviceToHost));
  EXPECT_EQ(output, std::vector<int>(4, 5));
  // A NULL deleter is allowed.
  AddArgs onStack{buffer.as<int>(), 4, 1, &deleted};
  ASSERT_OK(
      accinteLaunchKernel(nullptr, &addKernel, &onStack, nullptr, buffers, 1));
  ASSERT_OK(accinteStreamSynchronize(nullptr));
  EXPECT_EQ(deleted.load(), 1);
}

TEST(Kernel, FailedLaunchesStillReleaseTheArguments) {
  std::atomic<int> deleted{0};
  DeviceBuffer buffer(16);
  ASSERT_OK(buffer.status());
  ASSERT_OK(accinteSetDevice(1));
  DeviceBuffer onOtherDevice(16);
  ASSERT_OK(accinteSetDevice(0));
  ASSERT_OK(onOtherDevice.status());
  int host = 0;
  const void* hostBuffer[] = {&host};
  const void* otherDeviceBuffer[] = {onOtherDevice.ptr()};
  const void* nullBuffer[] = {nullptr};
  auto args = [&] { return new AddArgs{nullptr, 0, 0, &deleted}; };

  EXPECT_EQ(
      accinteLaunchKernel(nullptr, nullptr, args(), &deleteAddArgs, nullptr, 0),
      accinteErrorInvalidValue);
  EXPECT_EQ(accinteLaunchKernel(nullptr, &addKernel, args(), &deleteAddArgs,
                                nullptr, 2),
            accinteErrorInvalidValue);
  EXPECT_EQ(accinteLaunchKernel(kBogusStream, &addKernel, args(),
                                &deleteAddArgs, nullptr, 0),
            accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteLaunchKernel(nullptr, &addKernel, args(), &deleteAddArgs,
                                hostBuffer, 1),
            accinteErrorInvalidDevicePointer);
  EXPECT_EQ(accinteLaunchKernel(nullptr, &addKernel, args(), &deleteAddArgs,
                                nullBuffer, 1),
            accinteErrorInvalidDevicePointer);
  // Buffers must live on the stream's device.
  EXPECT_EQ(accinteLaunchKernel(nullptr, &addKernel, args(), &deleteAddArgs,
                                otherDeviceBuffer, 1),
            accinteErrorInvalidDevicePointer);
  EXPECT_EQ(deleted.load(), 6);
  EXPECT_OK(accinteStreamSynchronize(nullptr));
}

TEST(Kernel, FailureIsStickyUntilReportedThenCleared) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  std::atomic<int> ranAfter{0};
  ASSERT_OK(accinte::launchKernel(stream, {},
                                  [] { return accinteErrorInvalidValue; }));
  // Work after a failed kernel still runs; the failure is only recorded.
  ASSERT_OK(accinte::launchKernel(stream, {}, [&ranAfter] { ++ranAfter; }));
  ASSERT_OK(accinte::launchKernel(stream, {},
                                  [] { return accinteErrorMemoryAllocation; }));
  EXPECT_EQ(accinteStreamSynchronize(stream), accinteErrorLaunchFailure);
  EXPECT_EQ(ranAfter.load(), 1);
  // Reported once (two failures, one report), then cleared.
  EXPECT_OK(accinteStreamSynchronize(stream));
  EXPECT_OK(accinteStreamQuery(stream));

  // Query reports it too, and clears it, as soon as the failed kernel has
  // run, even while later work is still outstanding.
  Gate gate;
  std::promise<void> failedKernelDone;
  ASSERT_OK(accinte::launchKernel(stream, {},
                                  [] { return accinteErrorInvalidValue; }));
  ASSERT_OK(accinte::launchKernel(
      stream, {}, [&failedKernelDone] { failedKernelDone.set_value(); }));
  ASSERT_OK(gate.block(stream));
  failedKernelDone.get_future().wait();
  EXPECT_EQ(accinteStreamQuery(stream), accinteErrorLaunchFailure);
  EXPECT_EQ(accinteStreamQuery(stream), accinteErrorNotReady);
  gate.release();
  ASSERT_OK(accinteStreamSynchronize(stream));
  EXPECT_OK(accinteStreamQuery(stream));

  // Failures do not leak to other streams.
  accinteStream_t other = nullptr;
  ASSERT_OK(accinteStreamCreate(&other));
  ASSERT_OK(accinte::launchKernel(stream, {},
                                  [] { return accinteErrorInvalidValue; }));
  ASSERT_OK(accinteStreamSynchronize(other));
  EXPECT_EQ(accinteStreamSynchronize(stream), accinteErrorLaunchFailure);
  ASSERT_OK(accinteStreamDestroy(stream));
  ASSERT_OK(accinteStreamDestroy(other));
}

TEST(Kernel, ExceptionsAreFailuresNotCrashes) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  ASSERT_OK(accinte::launchKernel(stream, {}, []() -> accinteError_t {
    throw std::runtime_error("kernel bug");
  }));
  ASSERT_OK(accinte::launchKernel(stream, {}, [] { throw 42; }));
  EXPECT_EQ(accinteStreamSynchronize(stream), accinteErrorLaunchFailure);
  // The worker survived.
  std::atomic<bool> ran{false};
  ASSERT_OK(accinte::launchKernel(stream, {}, [&ran] { ran = true; }));
  EXPECT_OK(accinteStreamSynchronize(stream));
  EXPECT_TRUE(ran);
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST(Kernel, TheFirstFailureKeepsItsMessage) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  ASSERT_OK(accinte::launchKernel(stream, {}, []() -> accinteError_t {
    throw std::runtime_error("shape mismatch in kernel 1");
  }));
  ASSERT_OK(accinte::launchKernel(stream, {}, []() -> accinteError_t {
    throw std::runtime_error("kernel 2");
  }));
  EXPECT_EQ(accinteStreamSynchronize(stream), accinteErrorLaunchFailure);
  EXPECT_STREQ(accinteGetLastFailureMessage(), "shape mismatch in kernel 1");
  // A failure reported by query, and one returned as a code, say so too.
  ASSERT_OK(accinte::launchKernel(stream, {},
                                  [] { return accinteErrorInvalidValue; }));
  // Waiting through an event that reports no failures (as an allocator's
  // bookkeeping does) leaves the failure for the query to report.
  accinteEvent_t done = nullptr;
  ASSERT_OK(
      accinteEventCreateWithFlags(&done, accinteEventDisableFailureReport));
  ASSERT_OK(accinteEventRecord(done, stream));
  ASSERT_OK(accinteEventSynchronize(done));
  ASSERT_OK(accinteEventDestroy(done));
  EXPECT_EQ(accinteStreamQuery(stream), accinteErrorLaunchFailure);
  EXPECT_NE(std::string(accinteGetLastFailureMessage())
                .find("accinteErrorInvalidValue"),
            std::string::npos);
  // The message belongs to the thread it was reported to.
  std::string seenElsewhere = "unset";
  std::thread([&] { seenElsewhere = accinteGetLastFailureMessage(); }).join();
  EXPECT_EQ(seenElsewhere, "");
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST(Kernel, DeviceSynchronizeReportsTheFirstFailingStreamsMessage) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  ASSERT_OK(accinte::launchKernel(stream, {}, []() -> accinteError_t {
    throw std::runtime_error("the only failure");
  }));
  EXPECT_EQ(accinteDeviceSynchronize(), accinteErrorLaunchFailure);
  EXPECT_STREQ(accinteGetLastFailureMessage(), "the only failure");
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST(Kernel, WaitingCallsAreRefusedOnAStreamWorker) {
  // A kernel's arguments are released on the worker: dropping the last
  // owner of device or pinned memory there must not wait for the worker's
  // own stream (a deadlock); the runtime refuses and the memory stays live.
  void* device = nullptr;
  void* host = nullptr;
  ASSERT_OK(accinteMalloc(&device, 64));
  ASSERT_OK(accinteMallocHost(&host, 64));
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreate(&event));
  std::vector<accinteError_t> seen;
  ASSERT_OK(accinte::launchKernel(nullptr, {}, [&] {
    seen = {accinteFree(device), accinteFreeHost(host),
            accinteDeviceSynchronize(), accinteStreamSynchronize(nullptr),
            accinteEventSynchronize(event)};
  }));
  ASSERT_OK(accinteStreamSynchronize(nullptr));
  ASSERT_EQ(seen.size(), 5u);
  for (accinteError_t status : seen) {
    EXPECT_EQ(status, accinteErrorNotPermitted);
  }
  // Both allocations are still live and can be freed from the host.
  EXPECT_OK(accinteFree(device));
  EXPECT_OK(accinteFreeHost(host));
  ASSERT_OK(accinteEventDestroy(event));
}

TEST(Kernel, SharedAllocationStaysOpenWhileAnyKernelUsesIt) {
  DeviceBuffer buffer(sizeof(int));
  ASSERT_OK(buffer.status());
  auto* value = buffer.as<int>();
  ASSERT_OK(accinteMemsetAsync(value, 0, sizeof(int), nullptr));
  ASSERT_OK(accinteStreamSynchronize(nullptr));
  accinteStream_t first = nullptr;
  accinteStream_t second = nullptr;
  ASSERT_OK(accinteStreamCreate(&first));
  ASSERT_OK(accinteStreamCreate(&second));
  std::promise<void> firstOpened;
  auto secondDone = std::make_shared<std::promise<void>>();
  auto secondDoneFuture = secondDone->get_future().share();
  // The first kernel opens the buffer, waits until the second kernel has
  // opened *and closed* it, then touches it again: it must still be open.
  ASSERT_OK(accinte::launchKernel(first, {value},
                                  [value, &firstOpened, secondDoneFuture] {
                                    *value += 1;
                                    firstOpened.set_value();
                                    secondDoneFuture.wait();
                                    *value += 1;
                                  }));
  firstOpened.get_future().wait();
  ASSERT_OK(accinte::launchKernel(second, {value}, [value] { *value += 10; }));
  ASSERT_OK(accinteStreamSynchronize(second));
  secondDone->set_value();
  ASSERT_OK(accinteStreamSynchronize(first));
  int result = 0;
  ASSERT_OK(
      accinteMemcpy(&result, value, sizeof(int), accinteMemcpyDeviceToHost));
  EXPECT_EQ(result, 12);
  ASSERT_OK(accinteStreamDestroy(first));
  ASSERT_OK(accinteStreamDestroy(second));
}

TEST(Kernel, LambdaHelperTakesABufferArray) {
  DeviceBuffer first(sizeof(int));
  DeviceBuffer second(sizeof(int));
  ASSERT_OK(first.status());
  ASSERT_OK(second.status());
  auto* a = first.as<int>();
  auto* b = second.as<int>();
  const void* buffers[] = {a, b};
  ASSERT_OK(accinte::launchKernel(nullptr, buffers, 2, [a, b] {
    *a = 3;
    *b = *a + 4;
  }));
  int result = 0;
  ASSERT_OK(accinteMemcpy(&result, b, sizeof(int), accinteMemcpyDeviceToHost));
  EXPECT_EQ(result, 7);
  int host = 0;
  const void* notDevice[] = {&host};
  EXPECT_EQ(accinte::launchKernel(nullptr, notDevice, 1, [] {}),
            accinteErrorInvalidDevicePointer);
}

TEST(Kernel, LambdaHelperReportsErrorsFromTheBody) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  ASSERT_OK(accinte::launchKernel(stream, {}, [] { return accinteSuccess; }));
  EXPECT_OK(accinteStreamSynchronize(stream));
  // The lambda (and what it owns) is destroyed on the worker after running.
  auto owned = std::make_shared<int>(1);
  std::weak_ptr<int> watch = owned;
  ASSERT_OK(accinte::launchKernel(stream, {}, [owned = std::move(owned)] {}));
  ASSERT_OK(accinteStreamSynchronize(stream));
  EXPECT_TRUE(watch.expired());
  ASSERT_OK(accinteStreamDestroy(stream));
}

} // namespace
