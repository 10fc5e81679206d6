// Destroyed streams and events: every call that takes one reports
// accinteErrorInvalidResourceHandle, as runtime.h documents, and the runtime
// stays usable.

#include "test_util.h"

#include <atomic>
#include <cstring>
#include <vector>

using accinte::testing::DeviceBuffer;

namespace {

/** Counts how often a kernel's arguments were released. */
std::atomic<int> releasedArgs{0};

accinteError_t neverRuns(void* /*args*/) {
  ADD_FAILURE() << "a kernel launched on a destroyed stream ran";
  return accinteSuccess;
}

void countRelease(void* /*args*/) {
  ++releasedArgs;
}

/** A host round trip through the device: the runtime still works. */
void expectUsable() {
  const std::vector<int> sent = {1, 2, 3, 4};
  std::vector<int> received(sent.size(), 0);
  const size_t bytes = sent.size() * sizeof(int);
  DeviceBuffer buffer(bytes);
  ASSERT_OK(accinteMemcpy(buffer.ptr(), sent.data(), bytes,
                          accinteMemcpyHostToDevice));
  ASSERT_OK(accinteMemcpy(received.data(), buffer.ptr(), bytes,
                          accinteMemcpyDeviceToHost));
  EXPECT_EQ(received, sent);
  EXPECT_OK(accinteDeviceSynchronize());
}

TEST(DestroyedHandles, EveryCallTakingAStreamRefusesADestroyedOne) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  ASSERT_OK(accinteStreamDestroy(stream));
  // A stream created afterwards must not make the stale handle valid again.
  accinteStream_t later = nullptr;
  ASSERT_OK(accinteStreamCreate(&later));
  ASSERT_NE(later, stream);

  DeviceBuffer buffer(64);
  std::vector<char> host(64, 7);
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreate(&event));
  int value = 0;
  const accinteError_t invalid = accinteErrorInvalidResourceHandle;
  EXPECT_EQ(accinteStreamQuery(stream), invalid);
  EXPECT_EQ(accinteStreamSynchronize(stream), invalid);
  EXPECT_EQ(accinteStreamDestroy(stream), invalid);
  EXPECT_EQ(accinteStreamGetDevice(stream, &value), invalid);
  EXPECT_EQ(accinteStreamGetPriority(stream, &value), invalid);
  EXPECT_EQ(accinteStreamPeekFailure(stream, &value), invalid);
  EXPECT_EQ(accinteStreamWaitEvent(stream, event), invalid);
  EXPECT_EQ(accinteEventRecord(event, stream), invalid);
  EXPECT_EQ(accinteMemcpyAsync(buffer.ptr(), host.data(), host.size(),
                               accinteMemcpyHostToDevice, stream),
            invalid);
  EXPECT_EQ(accinteMemsetAsync(buffer.ptr(), 0, 64, stream), invalid);
  // The launch fails, and as documented still releases the arguments.
  releasedArgs = 0;
  const void* buffers[] = {buffer.ptr()};
  EXPECT_EQ(accinteLaunchKernel(stream, &neverRuns, nullptr, &countRelease,
                                buffers, 1),
            invalid);
  EXPECT_EQ(releasedArgs.load(), 1);

  // Nothing of it reached the device or the other stream.
  EXPECT_OK(accinteStreamSynchronize(later));
  EXPECT_OK(accinteEventQuery(event)); // never recorded
  ASSERT_OK(accinteEventDestroy(event));
  ASSERT_OK(accinteStreamDestroy(later));
  expectUsable();
}

TEST(DestroyedHandles, EveryCallTakingAnEventRefusesADestroyedOne) {
  accinteEvent_t event = nullptr;
  ASSERT_OK(accinteEventCreate(&event));
  ASSERT_OK(accinteEventRecord(event, nullptr));
  ASSERT_OK(accinteEventDestroy(event));
  accinteEvent_t later = nullptr;
  ASSERT_OK(accinteEventCreate(&later));
  ASSERT_NE(later, event);
  ASSERT_OK(accinteEventRecord(later, nullptr));
  ASSERT_OK(accinteEventSynchronize(later));

  float ms = 0;
  const accinteError_t invalid = accinteErrorInvalidResourceHandle;
  EXPECT_EQ(accinteEventRecord(event, nullptr), invalid);
  EXPECT_EQ(accinteEventQuery(event), invalid);
  EXPECT_EQ(accinteEventSynchronize(event), invalid);
  EXPECT_EQ(accinteEventDestroy(event), invalid);
  EXPECT_EQ(accinteEventElapsedTime(&ms, event, later), invalid);
  EXPECT_EQ(accinteEventElapsedTime(&ms, later, event), invalid);
  EXPECT_EQ(accinteStreamWaitEvent(nullptr, event), invalid);

  ASSERT_OK(accinteEventElapsedTime(&ms, later, later));
  EXPECT_EQ(ms, 0.0f);
  ASSERT_OK(accinteEventDestroy(later));
  expectUsable();
}

} // namespace
