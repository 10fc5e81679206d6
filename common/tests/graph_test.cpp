// Stream capture and graphs: what a capture records, how launches replay it,
// and the calls a capture refuses.

#include "test_util.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using accinte::testing::DeviceBuffer;
using accinte::testing::Gate;

namespace {

/** A non-default stream of the current device, destroyed at the end. */
class Stream {
 public:
  Stream() {
    status_ = accinteStreamCreate(&stream_);
  }
  ~Stream() {
    if (stream_ != nullptr) {
      accinteStreamDestroy(stream_);
    }
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  accinteStream_t get() const {
    return stream_;
  }
  accinteError_t status() const {
    return status_;
  }

 private:
  accinteStream_t stream_ = nullptr;
  accinteError_t status_ = accinteSuccess;
};

/** An event destroyed at the end. */
class Event {
 public:
  Event() {
    accinteEventCreateWithFlags(&event_, accinteEventDisableTiming);
  }
  ~Event() {
    accinteEventDestroy(event_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  accinteEvent_t get() const {
    return event_;
  }

 private:
  accinteEvent_t event_ = nullptr;
};

/** Reads one int64 of device memory. */
int64_t read(const DeviceBuffer& buffer, size_t index = 0) {
  int64_t value = -1;
  EXPECT_OK(accinteMemcpy(&value, buffer.as<int64_t>() + index, sizeof(value),
                          accinteMemcpyDeviceToHost));
  return value;
}

/** Writes one int64 of device memory. */
void write(const DeviceBuffer& buffer, int64_t value, size_t index = 0) {
  EXPECT_OK(accinteMemcpy(buffer.as<int64_t>() + index, &value, sizeof(value),
                          accinteMemcpyHostToDevice));
}

/** Enqueues `*x += by` on `stream`. */
accinteError_t addTo(accinteStream_t stream, const DeviceBuffer& x,
                     int64_t by) {
  int64_t* p = x.as<int64_t>();
  return accinte::launchKernel(stream, {p}, [p, by] { *p += by; });
}

/** Ends the capture on `stream` and instantiates its graph; the graph is
 * destroyed at once (the executable graph does not need it). */
accinteGraphExec_t endAndInstantiate(accinteStream_t stream) {
  accinteGraph_t graph = nullptr;
  EXPECT_OK(accinteStreamEndCapture(stream, &graph));
  accinteGraphExec_t exec = nullptr;
  EXPECT_OK(accinteGraphInstantiate(&exec, graph));
  EXPECT_OK(accinteGraphDestroy(graph));
  return exec;
}

accinteStreamCaptureStatus statusOf(accinteStream_t stream) {
  accinteStreamCaptureStatus status = accinteStreamCaptureStatusNone;
  EXPECT_OK(accinteStreamIsCapturing(stream, &status));
  return status;
}

TEST(Graph, CaptureRecordsWithoutRunningAndEachLaunchReplays) {
  Stream s;
  DeviceBuffer x(sizeof(int64_t));
  write(x, 0);
  ASSERT_OK(accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeGlobal));
  ASSERT_OK(addTo(s.get(), x, 1));
  ASSERT_OK(addTo(s.get(), x, 10));
  accinteGraph_t graph = nullptr;
  ASSERT_OK(accinteStreamEndCapture(s.get(), &graph));
  ASSERT_NE(graph, nullptr);
  size_t count = 0;
  ASSERT_OK(accinteGraphGetNodeCount(graph, &count));
  EXPECT_EQ(count, 2u);
  ASSERT_OK(accinteStreamSynchronize(s.get()));
  EXPECT_EQ(read(x), 0) << "a captured kernel ran";
  accinteGraphExec_t exec = nullptr;
  ASSERT_OK(accinteGraphInstantiate(&exec, graph));
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(accinteGraphLaunch(exec, s.get()));
  }
  ASSERT_OK(accinteStreamSynchronize(s.get()));
  EXPECT_EQ(read(x), 33);
  EXPECT_EQ(statusOf(s.get()), accinteStreamCaptureStatusNone);
  ASSERT_OK(accinteGraphExecDestroy(exec));
  ASSERT_OK(accinteGraphDestroy(graph));
}

TEST(Graph, CopiesAndMemsetsReadPinnedMemoryWhenLaunched) {
  Stream s;
  DeviceBuffer x(2 * sizeof(int64_t));
  int64_t* pinned = nullptr;
  ASSERT_OK(accinteMallocHost(reinterpret_cast<void**>(&pinned),
                              2 * sizeof(int64_t)));
  pinned[0] = 5;
  pinned[1] = -1;
  ASSERT_OK(accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeGlobal));
  ASSERT_OK(
      accinteMemsetAsync(x.as<int64_t>() + 1, 0, sizeof(int64_t), s.get()));
  ASSERT_OK(accinteMemcpyAsync(x.ptr(), pinned, sizeof(int64_t),
                               accinteMemcpyHostToDevice, s.get()));
  int64_t* p = x.as<int64_t>();
  ASSERT_OK(accinte::launchKernel(s.get(), {p}, [p] { p[1] += p[0] * 2; }));
  ASSERT_OK(accinteMemcpyAsync(pinned + 1, p + 1, sizeof(int64_t),
                               accinteMemcpyDeviceToHost, s.get()));
  const accinteGraphExec_t exec = endAndInstantiate(s.get());
  EXPECT_EQ(pinned[1], -1);
  for (int64_t input : {5, 7, -3}) {
    pinned[0] = input;
    ASSERT_OK(accinteGraphLaunch(exec, s.get()));
    ASSERT_OK(accinteStreamSynchronize(s.get()));
    EXPECT_EQ(pinned[1], input * 2) << "the memset, then the copies, ran "
                                       "in order on this launch's input";
  }
  ASSERT_OK(accinteGraphExecDestroy(exec));
  ASSERT_OK(accinteFreeHost(pinned));
}

TEST(Graph, StatusAndIdDescribeTheCapture) {
  Stream s;
  accinteStreamCaptureStatus status = accinteStreamCaptureStatusActive;
  unsigned long long id = 99;
  ASSERT_OK(accinteStreamGetCaptureInfo(s.get(), &status, &id));
  EXPECT_EQ(status, accinteStreamCaptureStatusNone);
  EXPECT_EQ(id, 0u);
  ASSERT_OK(
      accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeRelaxed));
  ASSERT_OK(accinteStreamGetCaptureInfo(s.get(), &status, &id));
  EXPECT_EQ(status, accinteStreamCaptureStatusActive);
  EXPECT_NE(id, 0u);
  accinteGraph_t graph = nullptr;
  ASSERT_OK(accinteStreamEndCapture(s.get(), &graph));
  ASSERT_OK(
      accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeRelaxed));
  unsigned long long second = 0;
  ASSERT_OK(accinteStreamGetCaptureInfo(s.get(), &status, &second));
  EXPECT_NE(second, id) << "each capture has an id of its own";
  accinteGraph_t empty = nullptr;
  ASSERT_OK(accinteStreamEndCapture(s.get(), &empty));
  size_t count = 1;
  ASSERT_OK(accinteGraphGetNodeCount(empty, &count));
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(accinteStreamGetCaptureInfo(s.get(), nullptr, &id),
            accinteErrorInvalidValue);
  ASSERT_OK(accinteGraphDestroy(graph));
  ASSERT_OK(accinteGraphDestroy(empty));
}

TEST(Graph, BadModesStreamsAndHandlesAreRefused) {
  Stream s;
  accinteStream_t defaultStream = nullptr;
  ASSERT_OK(accinteGetDefaultStream(0, &defaultStream));
  EXPECT_EQ(
      accinteStreamBeginCapture(defaultStream, accinteStreamCaptureModeGlobal),
      accinteErrorStreamCaptureUnsupported);
  EXPECT_EQ(accinteStreamBeginCapture(nullptr, accinteStreamCaptureModeGlobal),
            accinteErrorStreamCaptureUnsupported);
  using CBegin = accinteError_t (*)(accinteStream_t, int);
  auto begin = reinterpret_cast<CBegin>(&accinteStreamBeginCapture);
  EXPECT_EQ(begin(s.get(), 3), accinteErrorInvalidValue);
  EXPECT_EQ(begin(s.get(), -1), accinteErrorInvalidValue);
  accinteGraph_t graph = nullptr;
  EXPECT_EQ(accinteStreamEndCapture(s.get(), &graph),
            accinteErrorStreamCaptureUnmatched);
  ASSERT_OK(accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeGlobal));
  EXPECT_EQ(accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeGlobal),
            accinteErrorStreamCaptureUnsupported);
  EXPECT_EQ(accinteStreamEndCapture(s.get(), nullptr),
            accinteErrorInvalidValue);
  ASSERT_OK(accinteStreamEndCapture(s.get(), &graph));
  const auto bogusGraph = reinterpret_cast<accinteGraph_t>(uintptr_t{0xbad});
  const auto bogusExec = reinterpret_cast<accinteGraphExec_t>(uintptr_t{0xbad});
  size_t count = 0;
  accinteGraphExec_t exec = nullptr;
  EXPECT_EQ(accinteGraphGetNodeCount(bogusGraph, &count),
            accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteGraphInstantiate(&exec, bogusGraph),
            accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteGraphInstantiate(nullptr, graph), accinteErrorInvalidValue);
  EXPECT_EQ(accinteGraphLaunch(bogusExec, s.get()),
            accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteGraphExecDestroy(bogusExec),
            accinteErrorInvalidResourceHandle);
  ASSERT_OK(accinteGraphDestroy(graph));
  EXPECT_EQ(accinteGraphDestroy(graph), accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteGraphInstantiate(&exec, graph),
            accinteErrorInvalidResourceHandle);
  accinteStreamCaptureMode mode = accinteStreamCaptureModeGlobal;
  EXPECT_EQ(accinteThreadExchangeStreamCaptureMode(nullptr),
            accinteErrorInvalidValue);
  int badMode = 7;
  EXPECT_EQ(accinteThreadExchangeStreamCaptureMode(
                reinterpret_cast<accinteStreamCaptureMode*>(&badMode)),
            accinteErrorInvalidValue);
  ASSERT_OK(accinteThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(mode, accinteStreamCaptureModeGlobal) << "a thread starts global";
}

TEST(Graph, ASynchronizeOfTheCapturingStreamInvalidatesTheCapture) {
  for (int call = 0; call < 3; ++call) {
    Stream s;
    DeviceBuffer x(sizeof(int64_t));
    write(x, 0);
    ASSERT_OK(
        accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeRelaxed));
    ASSERT_OK(addTo(s.get(), x, 1));
    const accinteError_t status = call == 0 ? accinteStreamSynchronize(s.get())
                                  : call == 1 ? accinteStreamQuery(s.get())
                                              : accinteDeviceSynchronize();
    EXPECT_EQ(status, accinteErrorStreamCaptureUnsupported) << call;
    EXPECT_EQ(statusOf(s.get()), accinteStreamCaptureStatusInvalidated);
    EXPECT_EQ(addTo(s.get(), x, 1), accinteErrorStreamCaptureInvalidated)
        << "work on an invalidated capture is refused, not run";
    accinteGraph_t graph = reinterpret_cast<accinteGraph_t>(uintptr_t{1});
    EXPECT_EQ(accinteStreamEndCapture(s.get(), &graph),
              accinteErrorStreamCaptureInvalidated);
    EXPECT_EQ(graph, nullptr);
    EXPECT_EQ(statusOf(s.get()), accinteStreamCaptureStatusNone);
    ASSERT_OK(addTo(s.get(), x, 5));
    ASSERT_OK(accinteStreamSynchronize(s.get()));
    EXPECT_EQ(read(x), 5) << "nothing captured ran; later work runs";
  }
}

TEST(Graph, CopiesWithPageableHostMemoryCannotBeCaptured) {
  Stream s;
  DeviceBuffer x(sizeof(int64_t));
  int64_t host = 3;
  for (bool toDevice : {true, false}) {
    ASSERT_OK(
        accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeRelaxed));
    const accinteError_t status =
        toDevice ? accinteMemcpyAsync(x.ptr(), &host, sizeof(host),
                                      accinteMemcpyHostToDevice, s.get())
                 : accinteMemcpyAsync(&host, x.ptr(), sizeof(host),
                                      accinteMemcpyDeviceToHost, s.get());
    EXPECT_EQ(status, accinteErrorStreamCaptureUnsupported);
    accinteGraph_t graph = nullptr;
    EXPECT_EQ(accinteStreamEndCapture(s.get(), &graph),
              accinteErrorStreamCaptureInvalidated);
  }
  // Outside a capture the same copy is fine.
  ASSERT_OK(accinteMemcpyAsync(x.ptr(), &host, sizeof(host),
                               accinteMemcpyHostToDevice, s.get()));
  ASSERT_OK(accinteStreamSynchronize(s.get()));
}

/** Whether accinteMalloc() is allowed on this thread now; frees what it got. */
accinteError_t tryMalloc() {
  void* p = nullptr;
  const accinteError_t status = accinteMalloc(&p, 64);
  if (status == accinteSuccess) {
    EXPECT_OK(accinteFree(p));
  }
  return status;
}

/** tryMalloc() on a new thread whose capture mode is `mode`. */
accinteError_t tryMallocOnAnotherThread(accinteStreamCaptureMode mode) {
  accinteError_t status = accinteSuccess;
  std::thread([&] {
    accinteStreamCaptureMode exchanged = mode;
    EXPECT_OK(accinteThreadExchangeStreamCaptureMode(&exchanged));
    status = tryMalloc();
  }).join();
  return status;
}

TEST(Graph, BlockingCallsFollowTheCaptureAndThreadModes) {
  Stream s;
  // Global: refused to the capturing thread and to other global threads.
  ASSERT_OK(accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeGlobal));
  EXPECT_EQ(tryMallocOnAnotherThread(accinteStreamCaptureModeThreadLocal),
            accinteSuccess);
  EXPECT_EQ(tryMallocOnAnotherThread(accinteStreamCaptureModeRelaxed),
            accinteSuccess);
  EXPECT_EQ(statusOf(s.get()), accinteStreamCaptureStatusActive);
  EXPECT_EQ(tryMallocOnAnotherThread(accinteStreamCaptureModeGlobal),
            accinteErrorStreamCaptureUnsupported);
  EXPECT_EQ(statusOf(s.get()), accinteStreamCaptureStatusInvalidated);
  accinteGraph_t graph = nullptr;
  EXPECT_EQ(accinteStreamEndCapture(s.get(), &graph),
            accinteErrorStreamCaptureInvalidated);

  // Thread-local: refused to the capturing thread only.
  ASSERT_OK(
      accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeThreadLocal));
  EXPECT_EQ(tryMallocOnAnotherThread(accinteStreamCaptureModeGlobal),
            accinteSuccess);
  EXPECT_EQ(statusOf(s.get()), accinteStreamCaptureStatusActive);
  // ... unless that thread relaxes itself, as a caching allocator does.
  accinteStreamCaptureMode mode = accinteStreamCaptureModeRelaxed;
  ASSERT_OK(accinteThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(tryMalloc(), accinteSuccess);
  ASSERT_OK(accinteThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(mode, accinteStreamCaptureModeRelaxed);
  EXPECT_EQ(statusOf(s.get()), accinteStreamCaptureStatusActive);
  for (int call = 0; call < 4; ++call) {
    void* p = nullptr;
    int64_t host = 0;
    const accinteError_t status =
        call == 0   ? accinteMalloc(&p, 64)
        : call == 1 ? accinteMallocHost(&p, 64)
        : call == 2 ? accinteFree(nullptr)
                    : accinteMemcpy(&host, &host, sizeof(host),
                                    accinteMemcpyHostToHost);
    EXPECT_EQ(status, accinteErrorStreamCaptureUnsupported) << call;
    EXPECT_EQ(p, nullptr);
  }
  EXPECT_EQ(accinteStreamEndCapture(s.get(), &graph),
            accinteErrorStreamCaptureInvalidated);

  // Relaxed: nothing is refused.
  ASSERT_OK(
      accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeRelaxed));
  EXPECT_EQ(tryMalloc(), accinteSuccess);
  EXPECT_EQ(tryMallocOnAnotherThread(accinteStreamCaptureModeGlobal),
            accinteSuccess);
  ASSERT_OK(accinteStreamEndCapture(s.get(), &graph));
  ASSERT_OK(accinteGraphDestroy(graph));
  EXPECT_EQ(tryMalloc(), accinteSuccess) << "no capture left to forbid it";
}

TEST(Graph, StreamsForkAndJoinThroughEvents) {
  Stream s1;
  Stream s2;
  Event forked;
  Event joined;
  DeviceBuffer x(3 * sizeof(int64_t));
  int64_t* p = x.as<int64_t>();
  ASSERT_OK(
      accinteStreamBeginCapture(s1.get(), accinteStreamCaptureModeGlobal));
  ASSERT_OK(accinte::launchKernel(s1.get(), {p}, [p] { p[0] = 1; }));
  ASSERT_OK(accinteEventRecord(forked.get(), s1.get()));
  ASSERT_OK(accinteStreamWaitEvent(s2.get(), forked.get()));
  unsigned long long id1 = 0;
  unsigned long long id2 = 0;
  accinteStreamCaptureStatus status = accinteStreamCaptureStatusNone;
  ASSERT_OK(accinteStreamGetCaptureInfo(s1.get(), &status, &id1));
  ASSERT_OK(accinteStreamGetCaptureInfo(s2.get(), &status, &id2));
  EXPECT_EQ(status, accinteStreamCaptureStatusActive) << "s2 joined";
  EXPECT_EQ(id1, id2);
  ASSERT_OK(accinte::launchKernel(s2.get(), {p}, [p] { p[1] = p[0] + 1; }));
  ASSERT_OK(accinteEventRecord(joined.get(), s2.get()));
  ASSERT_OK(accinteStreamWaitEvent(s1.get(), joined.get()));
  ASSERT_OK(accinte::launchKernel(s1.get(), {p}, [p] { p[2] = p[1] * 10; }));
  accinteGraph_t graph = nullptr;
  ASSERT_OK(accinteStreamEndCapture(s1.get(), &graph));
  EXPECT_EQ(statusOf(s2.get()), accinteStreamCaptureStatusNone)
      << "the end of the capture ends it on every stream";
  accinteGraphExec_t exec = nullptr;
  ASSERT_OK(accinteGraphInstantiate(&exec, graph));
  ASSERT_OK(accinteGraphLaunch(exec, s1.get()));
  ASSERT_OK(accinteStreamSynchronize(s1.get()));
  EXPECT_EQ(read(x, 2), 20);

  // NB: a name of this process's own: the plain and sanitized gtests may run
  // at once (make test runs two steps at a time).
  const std::string path = ::testing::TempDir() + "accinte_graph_" +
                           std::to_string(getpid()) + ".dot";
  ASSERT_OK(accinteGraphDebugDotPrint(graph, path.c_str()));
  std::ifstream file(path);
  std::stringstream dot;
  dot << file.rdbuf();
  EXPECT_NE(dot.str().find("n0 -> n1;"), std::string::npos) << dot.str();
  EXPECT_NE(dot.str().find("n1 -> n2;"), std::string::npos) << dot.str();
  std::remove(path.c_str());
  EXPECT_EQ(accinteGraphDebugDotPrint(graph, "/nonexistent/dir/g.dot"),
            accinteErrorInvalidValue);
  ASSERT_OK(accinteGraphExecDestroy(exec));
  ASSERT_OK(accinteGraphDestroy(graph));
  // After the capture, its record is nothing anyone can wait for.
  EXPECT_EQ(accinteStreamWaitEvent(s2.get(), joined.get()),
            accinteErrorStreamCaptureIsolation);
  EXPECT_EQ(accinteEventQuery(joined.get()),
            accinteErrorStreamCaptureUnsupported);
  ASSERT_OK(accinteEventRecord(joined.get(), s2.get()));
  EXPECT_OK(accinteEventSynchronize(joined.get())) << "a new record is real";
}

TEST(Graph, AForkNotJoinedBackFailsTheCapture) {
  Stream s1;
  Stream s2;
  Event forked;
  DeviceBuffer x(sizeof(int64_t));
  ASSERT_OK(
      accinteStreamBeginCapture(s1.get(), accinteStreamCaptureModeGlobal));
  ASSERT_OK(accinteEventRecord(forked.get(), s1.get()));
  ASSERT_OK(accinteStreamWaitEvent(s2.get(), forked.get()));
  ASSERT_OK(addTo(s2.get(), x, 1));
  accinteGraph_t graph = nullptr;
  EXPECT_EQ(accinteStreamEndCapture(s2.get(), &graph),
            accinteErrorStreamCaptureUnmatched)
      << "only the origin stream ends a capture";
  EXPECT_EQ(accinteStreamEndCapture(s1.get(), &graph),
            accinteErrorStreamCaptureUnjoined);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(statusOf(s1.get()), accinteStreamCaptureStatusNone);
  EXPECT_EQ(statusOf(s2.get()), accinteStreamCaptureStatusNone);
}

TEST(Graph, WaitsAcrossTheCaptureBoundaryAreRefused) {
  Stream s1;
  Stream s2;
  Event outside;
  Event inside;
  accinteGraph_t graph = nullptr;
  // A capturing stream waiting for work recorded outside the capture.
  ASSERT_OK(accinteEventRecord(outside.get(), s2.get()));
  ASSERT_OK(
      accinteStreamBeginCapture(s1.get(), accinteStreamCaptureModeGlobal));
  EXPECT_EQ(accinteStreamWaitEvent(s1.get(), outside.get()),
            accinteErrorStreamCaptureIsolation);
  EXPECT_EQ(accinteStreamEndCapture(s1.get(), &graph),
            accinteErrorStreamCaptureInvalidated);
  // A never recorded event imposes no wait, in a capture as outside.
  Event never;
  ASSERT_OK(
      accinteStreamBeginCapture(s1.get(), accinteStreamCaptureModeGlobal));
  ASSERT_OK(accinteStreamWaitEvent(s1.get(), never.get()));
  ASSERT_OK(accinteStreamEndCapture(s1.get(), &graph));
  ASSERT_OK(accinteGraphDestroy(graph));
  // Two captures cannot merge.
  ASSERT_OK(
      accinteStreamBeginCapture(s1.get(), accinteStreamCaptureModeRelaxed));
  ASSERT_OK(
      accinteStreamBeginCapture(s2.get(), accinteStreamCaptureModeRelaxed));
  ASSERT_OK(accinteEventRecord(inside.get(), s1.get()));
  EXPECT_EQ(accinteStreamWaitEvent(s2.get(), inside.get()),
            accinteErrorStreamCaptureMerge);
  EXPECT_EQ(accinteEventSynchronize(inside.get()),
            accinteErrorStreamCaptureUnsupported);
  EXPECT_EQ(accinteStreamEndCapture(s2.get(), &graph),
            accinteErrorStreamCaptureInvalidated);
  EXPECT_EQ(accinteStreamEndCapture(s1.get(), &graph),
            accinteErrorStreamCaptureInvalidated)
      << "a synchronize of an event recorded in it invalidates it";
  // A default stream cannot be forked into a capture.
  accinteStream_t defaultStream = nullptr;
  ASSERT_OK(accinteGetDefaultStream(0, &defaultStream));
  ASSERT_OK(
      accinteStreamBeginCapture(s1.get(), accinteStreamCaptureModeGlobal));
  ASSERT_OK(accinteEventRecord(inside.get(), s1.get()));
  EXPECT_EQ(accinteStreamWaitEvent(defaultStream, inside.get()),
            accinteErrorStreamCaptureUnsupported);
  EXPECT_EQ(accinteStreamEndCapture(s1.get(), &graph),
            accinteErrorStreamCaptureInvalidated);
}

TEST(Graph, EndingFromAnotherThreadNeedsARelaxedCapture) {
  Stream s;
  accinteGraph_t graph = nullptr;
  for (auto mode :
       {accinteStreamCaptureModeGlobal, accinteStreamCaptureModeThreadLocal,
        accinteStreamCaptureModeRelaxed}) {
    ASSERT_OK(accinteStreamBeginCapture(s.get(), mode));
    accinteError_t status = accinteSuccess;
    std::thread([&] {
      status = accinteStreamEndCapture(s.get(), &graph);
    }).join();
    if (mode == accinteStreamCaptureModeRelaxed) {
      EXPECT_OK(status);
    } else {
      EXPECT_EQ(status, accinteErrorStreamCaptureWrongThread) << mode;
      EXPECT_EQ(statusOf(s.get()), accinteStreamCaptureStatusActive);
      ASSERT_OK(accinteStreamEndCapture(s.get(), &graph));
    }
    ASSERT_OK(accinteGraphDestroy(graph));
  }
}

TEST(Graph, AFailingNodeIsReportedOnceAndTheOthersStillRun) {
  Stream s;
  DeviceBuffer x(sizeof(int64_t));
  write(x, 0);
  ASSERT_OK(accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeGlobal));
  ASSERT_OK(addTo(s.get(), x, 1));
  ASSERT_OK(accinte::launchNamedKernel(
      s.get(), "boom", {}, [] { throw std::runtime_error("kernel said no"); }));
  ASSERT_OK(addTo(s.get(), x, 10));
  const accinteGraphExec_t exec = endAndInstantiate(s.get());
  ASSERT_OK(accinteGraphLaunch(exec, s.get()));
  EXPECT_EQ(accinteStreamSynchronize(s.get()), accinteErrorLaunchFailure);
  const std::string message = accinteGetLastFailureMessage();
  EXPECT_NE(message.find("kernel said no"), std::string::npos) << message;
  EXPECT_NE(message.find("operation 1 (boom)"), std::string::npos) << message;
  EXPECT_OK(accinteStreamSynchronize(s.get())) << "reported once";
  EXPECT_EQ(read(x), 11);
  ASSERT_OK(accinteGraphExecDestroy(exec));
}

TEST(Graph, ALaunchNeverTouchesMemoryFreedAfterTheCapture) {
  Stream s;
  void* p = nullptr;
  ASSERT_OK(accinteMalloc(&p, sizeof(int64_t)));
  auto* value = static_cast<int64_t*>(p);
  ASSERT_OK(accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeGlobal));
  ASSERT_OK(accinte::launchKernel(s.get(), {p}, [value] { *value = 1; }));
  const accinteGraphExec_t exec = endAndInstantiate(s.get());
  ASSERT_OK(accinteFree(p));
  ASSERT_OK(accinteGraphLaunch(exec, s.get()));
  EXPECT_EQ(accinteStreamSynchronize(s.get()), accinteErrorLaunchFailure);
  ASSERT_OK(accinteGraphExecDestroy(exec));
}

/** True if the first byte at `p` can be read now. NB: probed through a pipe,
 * so memory that is not open makes write() fail with EFAULT instead of
 * faulting. */
bool readable(const void* p) {
  int fds[2];
  if (pipe(fds) != 0) {
    throw std::runtime_error("pipe() failed");
  }
  const ssize_t written = ::write(fds[1], p, 1);
  close(fds[0]);
  close(fds[1]);
  return written == 1;
}

TEST(Graph, ALaunchOpensWhatItsNodesNameBeforeItsFirstNode) {
  Stream s;
  DeviceBuffer kernelBuffer(sizeof(int64_t));
  DeviceBuffer copySource(sizeof(int64_t));
  DeviceBuffer copyDestination(sizeof(int64_t));
  DeviceBuffer memsetBuffer(sizeof(int64_t));
  const std::vector<const void*> named = {kernelBuffer.ptr(), copySource.ptr(),
                                          copyDestination.ptr(),
                                          memsetBuffer.ptr()};
  std::vector<bool> open;
  // A kernel that names nothing and sees which allocations are open.
  const auto probe = [&] {
    open.clear();
    for (const void* p : named) {
      open.push_back(readable(p));
    }
  };
  ASSERT_OK(accinte::launchKernel(s.get(), nullptr, 0, probe));
  ASSERT_OK(accinteStreamSynchronize(s.get()));
  EXPECT_EQ(open, std::vector<bool>(named.size(), false))
      << "memory no running operation names is closed";

  ASSERT_OK(accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeGlobal));
  ASSERT_OK(accinte::launchKernel(s.get(), nullptr, 0, probe));
  ASSERT_OK(addTo(s.get(), kernelBuffer, 1));
  ASSERT_OK(accinteMemcpyAsync(copyDestination.ptr(), copySource.ptr(),
                               sizeof(int64_t), accinteMemcpyDeviceToDevice,
                               s.get()));
  ASSERT_OK(accinteMemsetAsync(memsetBuffer.ptr(), 0, 1, s.get()));
  const accinteGraphExec_t exec = endAndInstantiate(s.get());
  ASSERT_OK(accinteGraphLaunch(exec, s.get()));
  ASSERT_OK(accinteStreamSynchronize(s.get()));
  EXPECT_EQ(open, std::vector<bool>(named.size(), true))
      << "a launch opens every allocation its kernels, copies and memsets "
         "name before its first node";
  ASSERT_OK(accinteGraphExecDestroy(exec));
}

TEST(Graph, LaunchesOfOneExecutableGraphAreOrderedAcrossStreams) {
  Stream s1;
  Stream s2;
  DeviceBuffer x(sizeof(int64_t));
  write(x, 1);
  int64_t* p = x.as<int64_t>();
  ASSERT_OK(
      accinteStreamBeginCapture(s1.get(), accinteStreamCaptureModeGlobal));
  ASSERT_OK(accinte::launchKernel(s1.get(), {p}, [p] { *p = *p * 2 + 1; }));
  const accinteGraphExec_t exec = endAndInstantiate(s1.get());
  Gate gate;
  ASSERT_OK(gate.block(s1.get()));
  ASSERT_OK(accinteGraphLaunch(exec, s1.get()));
  ASSERT_OK(accinteGraphLaunch(exec, s2.get()));
  EXPECT_EQ(accinteStreamQuery(s2.get()), accinteErrorNotReady)
      << "the second launch waits for the first, held behind the gate";
  gate.release();
  ASSERT_OK(accinteStreamSynchronize(s2.get()));
  ASSERT_OK(accinteStreamSynchronize(s1.get()));
  EXPECT_EQ(read(x), 7);
  ASSERT_OK(accinteGraphExecDestroy(exec));
}

TEST(Graph, AGraphRunsOnlyOnTheDeviceItWasCapturedOn) {
  int count = 0;
  ASSERT_OK(accinteGetDeviceCount(&count));
  ASSERT_GE(count, 2);
  Stream s;
  ASSERT_OK(accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeGlobal));
  const accinteGraphExec_t exec = endAndInstantiate(s.get());
  ASSERT_OK(accinteSetDevice(1));
  {
    Stream other;
    EXPECT_EQ(accinteGraphLaunch(exec, other.get()), accinteErrorInvalidValue);
  }
  ASSERT_OK(accinteSetDevice(0));
  ASSERT_OK(accinteGraphExecDestroy(exec));
}

TEST(Graph, KernelArgumentsLiveAsLongAsTheGraphsThatHoldThem) {
  Stream s;
  static std::atomic<int> released{0};
  released = 0;
  auto kernel = [](void*) { return accinteSuccess; };
  auto deleter = [](void*) { ++released; };
  ASSERT_OK(accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeGlobal));
  ASSERT_OK(accinteLaunchKernel(s.get(), kernel, nullptr, deleter, nullptr, 0));
  accinteGraph_t graph = nullptr;
  ASSERT_OK(accinteStreamEndCapture(s.get(), &graph));
  accinteGraphExec_t exec = nullptr;
  ASSERT_OK(accinteGraphInstantiate(&exec, graph));
  ASSERT_OK(accinteGraphLaunch(exec, s.get()));
  ASSERT_OK(accinteGraphLaunch(exec, s.get()));
  ASSERT_OK(accinteStreamSynchronize(s.get()));
  ASSERT_OK(accinteGraphDestroy(graph));
  EXPECT_EQ(released, 0) << "the executable graph still holds them";
  ASSERT_OK(accinteGraphExecDestroy(exec));
  EXPECT_EQ(released, 1);
}

TEST(Graph, ArgumentsReleasedWhenACaptureEndsMayCallTheRuntime) {
  // NB: a kernel's arguments may own device memory, and free it when they
  // are released; a capture that gives no graph releases them as it ends.
  Stream s;
  void* owned = nullptr;
  ASSERT_OK(accinteMalloc(&owned, 64));
  static std::atomic<int> freed{0};
  freed = 0;
  auto kernel = [](void*) { return accinteSuccess; };
  auto deleter = [](void* args) {
    if (accinteFree(args) == accinteSuccess) {
      ++freed;
    }
  };
  ASSERT_OK(accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeGlobal));
  ASSERT_OK(accinteLaunchKernel(s.get(), kernel, owned, deleter, nullptr, 0));
  EXPECT_EQ(accinteStreamQuery(s.get()), accinteErrorStreamCaptureUnsupported);
  accinteGraph_t graph = nullptr;
  EXPECT_EQ(accinteStreamEndCapture(s.get(), &graph),
            accinteErrorStreamCaptureInvalidated);
  EXPECT_EQ(freed, 1) << "released once the capture no longer forbids it";
}

TEST(Graph, ACapturingStreamCannotBeDestroyed) {
  accinteStream_t s = nullptr;
  ASSERT_OK(accinteStreamCreate(&s));
  ASSERT_OK(accinteStreamBeginCapture(s, accinteStreamCaptureModeGlobal));
  EXPECT_EQ(accinteStreamDestroy(s), accinteErrorStreamCaptureUnsupported);
  accinteGraph_t graph = nullptr;
  EXPECT_EQ(accinteStreamEndCapture(s, &graph),
            accinteErrorStreamCaptureInvalidated);
  ASSERT_OK(accinteStreamDestroy(s));
}

TEST(Graph, ALaunchIsTracedAsItsOperations) {
  Stream s;
  DeviceBuffer x(sizeof(int64_t));
  int64_t* p = x.as<int64_t>();
  ASSERT_OK(accinteStreamBeginCapture(s.get(), accinteStreamCaptureModeGlobal));
  ASSERT_OK(
      accinte::launchNamedKernel(s.get(), "captured", {p}, [p] { *p = 2; }));
  ASSERT_OK(accinteMemsetAsync(p, 0, sizeof(int64_t), s.get()));
  const accinteGraphExec_t exec = endAndInstantiate(s.get());
  ASSERT_OK(accinteActivityEnable(0));
  ASSERT_OK(accinteGraphLaunch(exec, s.get()));
  ASSERT_OK(accinteStreamSynchronize(s.get()));
  ASSERT_OK(accinteActivityDisable());
  std::vector<accinteActivityRecord> records(16);
  size_t count = 0;
  ASSERT_OK(accinteActivityTake(records.data(), records.size(), &count));
  records.resize(count);
  std::vector<std::string> work;
  uint64_t launchCorrelation = 0;
  for (const auto& record : records) {
    if (record.kind == accinteActivityKindRuntime &&
        std::string(record.name) == "accinteGraphLaunch") {
      launchCorrelation = record.correlationId;
    }
  }
  for (const auto& record : records) {
    if (record.kind != accinteActivityKindRuntime) {
      work.push_back(record.name);
      EXPECT_EQ(record.correlationId, launchCorrelation);
      EXPECT_EQ(record.stream, s.get());
    }
  }
  EXPECT_NE(launchCorrelation, 0u);
  EXPECT_EQ(work, (std::vector<std::string>{"captured", "Memset"}));
  ASSERT_OK(accinteGraphExecDestroy(exec));
}

TEST(Graph, CapturesOnSeveralThreadsAtOnce) {
  constexpr int kThreads = 4;
  constexpr int kLaunches = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Stream s;
      DeviceBuffer x(sizeof(int64_t));
      write(x, 0);
      if (accinteStreamBeginCapture(
              s.get(), accinteStreamCaptureModeThreadLocal) != accinteSuccess) {
        ++failures;
        return;
      }
      for (int i = 0; i < 3; ++i) {
        if (addTo(s.get(), x, t + 1) != accinteSuccess) {
          ++failures;
        }
      }
      const accinteGraphExec_t exec = endAndInstantiate(s.get());
      for (int i = 0; i < kLaunches; ++i) {
        if (accinteGraphLaunch(exec, s.get()) != accinteSuccess) {
          ++failures;
        }
      }
      if (accinteStreamSynchronize(s.get()) != accinteSuccess ||
          read(x) != int64_t{3} * (t + 1) * kLaunches) {
        ++failures;
      }
      accinteGraphExecDestroy(exec);
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(failures, 0);
}

} // namespace
