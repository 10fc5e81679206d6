// The error model: a failed kernel is reported once, by the first
// synchronize or query of a stream or event that carries it, and never
// reaches work that did not depend on it.

#include "test_util.h"

#include <atomic>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using accinte::testing::Gate;

namespace {

/** What a stream or event that waited for failed work says first. */
const std::string kInherited =
    "waited for an event of a stream whose earlier work failed: ";

/** Enqueues a kernel on `stream` that fails with `message`. */
accinteError_t launchFailing(accinteStream_t stream, std::string message) {
  return accinte::launchKernel(stream, {}, [message]() -> accinteError_t {
    throw std::runtime_error(message);
  });
}

/** Queries `event` until its record has completed; returns the answer. */
accinteError_t queryUntilComplete(accinteEvent_t event) {
  accinteError_t status = accinteErrorNotReady;
  while ((status = accinteEventQuery(event)) == accinteErrorNotReady) {
    std::this_thread::yield();
  }
  return status;
}

/** Streams and events created for one test, destroyed at its end. */
class Handles {
 public:
  ~Handles() {
    for (accinteEvent_t event : events_) {
      accinteEventDestroy(event);
    }
    for (accinteStream_t stream : streams_) {
      accinteStreamDestroy(stream);
    }
  }
  accinteStream_t stream() {
    accinteStream_t stream = nullptr;
    EXPECT_OK(accinteStreamCreate(&stream));
    streams_.push_back(stream);
    return stream;
  }
  accinteEvent_t event(unsigned int flags = accinteEventDisableTiming) {
    accinteEvent_t event = nullptr;
    EXPECT_OK(accinteEventCreateWithFlags(&event, flags));
    events_.push_back(event);
    return event;
  }

 private:
  std::vector<accinteStream_t> streams_;
  std::vector<accinteEvent_t> events_;
};

TEST(Failure, EventSynchronizeReportsTheFailureOfTheWorkBeforeIt) {
  Handles handles;
  accinteStream_t stream = handles.stream();
  accinteEvent_t done = handles.event();
  ASSERT_OK(launchFailing(stream, "the kernel saw a bad descriptor"));
  ASSERT_OK(accinteEventRecord(done, stream));
  EXPECT_EQ(accinteEventSynchronize(done), accinteErrorLaunchFailure);
  EXPECT_STREQ(accinteGetLastFailureMessage(),
               "the kernel saw a bad descriptor");
  // Reported once: neither the event nor its stream says it again.
  EXPECT_OK(accinteEventSynchronize(done));
  EXPECT_OK(accinteEventQuery(done));
  EXPECT_OK(accinteStreamSynchronize(stream));
}

TEST(Failure, EventQueryReportsItOnceTheRecordHasCompleted) {
  Handles handles;
  accinteStream_t stream = handles.stream();
  accinteEvent_t done = handles.event();
  Gate gate;
  ASSERT_OK(gate.block(stream));
  ASSERT_OK(launchFailing(stream, "query me"));
  ASSERT_OK(accinteEventRecord(done, stream));
  EXPECT_EQ(accinteEventQuery(done), accinteErrorNotReady);
  gate.release();
  EXPECT_EQ(queryUntilComplete(done), accinteErrorLaunchFailure);
  EXPECT_STREQ(accinteGetLastFailureMessage(), "query me");
  EXPECT_OK(accinteEventQuery(done));
  EXPECT_OK(accinteStreamQuery(stream));
}

TEST(Failure, ARecordAfterTheReportCarriesNothing) {
  Handles handles;
  accinteStream_t stream = handles.stream();
  accinteEvent_t before = handles.event();
  accinteEvent_t after = handles.event();
  ASSERT_OK(launchFailing(stream, "once"));
  ASSERT_OK(accinteEventRecord(before, stream));
  EXPECT_EQ(accinteStreamSynchronize(stream), accinteErrorLaunchFailure);
  // The earlier record carried the failure, but it has been reported.
  EXPECT_OK(accinteEventSynchronize(before));
  // Work enqueued after the report is not affected.
  ASSERT_OK(accinteEventRecord(after, stream));
  EXPECT_OK(accinteEventSynchronize(after));
  EXPECT_OK(accinteStreamSynchronize(stream));
}

TEST(Failure, AnEventOfAStreamThatWaitedForFailedWorkReportsIt) {
  Handles handles;
  accinteStream_t producer = handles.stream();
  accinteStream_t consumer = handles.stream();
  accinteEvent_t produced = handles.event();
  accinteEvent_t consumed = handles.event();
  ASSERT_OK(launchFailing(producer, "the producer failed"));
  ASSERT_OK(accinteEventRecord(produced, producer));
  ASSERT_OK(accinteStreamWaitEvent(consumer, produced));
  ASSERT_OK(accinteEventRecord(consumed, consumer));
  EXPECT_EQ(accinteEventSynchronize(consumed), accinteErrorLaunchFailure);
  EXPECT_EQ(std::string(accinteGetLastFailureMessage()),
            kInherited + "the producer failed");
  // Every other carrier of the same failure has nothing left to say.
  EXPECT_OK(accinteStreamSynchronize(consumer));
  EXPECT_OK(accinteEventSynchronize(produced));
  EXPECT_OK(accinteStreamSynchronize(producer));
}

TEST(Failure, ACommunicationStreamNobodySynchronizesDoesNotReplayIt) {
  // The pattern of a collective (chapter 11): the user's stream hands its
  // work to a communication stream through an event, and waits for the
  // collective through another. Nobody synchronizes the communication
  // stream. A user error is reported once; every later round is clean.
  Handles handles;
  accinteStream_t user = handles.stream();
  accinteStream_t comm = handles.stream();
  accinteEvent_t ready = handles.event();
  accinteEvent_t done = handles.event();
  ASSERT_OK(launchFailing(user, "Target 7 is out of bounds."));
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(round);
    ASSERT_OK(accinteEventRecord(ready, user));
    ASSERT_OK(accinteStreamWaitEvent(comm, ready));
    std::atomic<bool> ran{false};
    ASSERT_OK(accinte::launchKernel(comm, {}, [&ran] { ran = true; }));
    ASSERT_OK(accinteEventRecord(done, comm));
    ASSERT_OK(accinteStreamWaitEvent(user, done));
    EXPECT_EQ(accinteStreamSynchronize(user),
              round == 0 ? accinteErrorLaunchFailure : accinteSuccess);
    if (round == 0) {
      EXPECT_STREQ(accinteGetLastFailureMessage(),
                   "Target 7 is out of bounds.");
    }
    EXPECT_TRUE(ran.load());
  }
}

TEST(Failure, AKernelPeeksAtTheFailureOfTheWorkBeforeItAndLeavesIt) {
  // What a collective's kernel asks (chapter 11): may my inputs come from
  // failed work? It must know without taking the report from the user.
  Handles handles;
  accinteStream_t user = handles.stream();
  accinteStream_t comm = handles.stream();
  accinteEvent_t ready = handles.event();
  int before = -1;
  int after = -1;
  ASSERT_OK(launchFailing(user, "Target 7 is out of bounds."));
  ASSERT_OK(accinteEventRecord(ready, user));
  ASSERT_OK(accinte::launchKernel(comm, {}, [&before, comm] {
    return accinteStreamPeekFailure(comm, &before);
  }));
  ASSERT_OK(accinteStreamWaitEvent(comm, ready));
  ASSERT_OK(accinte::launchKernel(comm, {}, [&after, comm] {
    return accinteStreamPeekFailure(comm, &after);
  }));
  // NB: waited for with an event that reports nothing, so that the
  // kernels peek before anyone is told.
  accinteEvent_t peeked = handles.event(accinteEventDisableTiming |
                                        accinteEventDisableFailureReport);
  ASSERT_OK(accinteEventRecord(peeked, comm));
  ASSERT_OK(accinteEventSynchronize(peeked));
  EXPECT_EQ(before, 0);
  EXPECT_EQ(after, 1);
  // Both kernels succeeded: the report is the user's stream's, once.
  EXPECT_EQ(accinteStreamSynchronize(user), accinteErrorLaunchFailure);
  // Once reported, by the user's stream, no stream carries it any more.
  int failed = -1;
  ASSERT_OK(accinteStreamPeekFailure(user, &failed));
  EXPECT_EQ(failed, 0);
  ASSERT_OK(accinteStreamPeekFailure(comm, &failed));
  EXPECT_EQ(failed, 0);
  EXPECT_OK(accinteStreamSynchronize(comm));
  // Peeking, however often, reports nothing.
  ASSERT_OK(launchFailing(user, "again"));
  ASSERT_OK(accinteEventRecord(peeked, user));
  ASSERT_OK(accinteEventSynchronize(peeked));
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK(accinteStreamPeekFailure(user, &failed));
    EXPECT_EQ(failed, 1);
  }
  EXPECT_EQ(accinteStreamSynchronize(user), accinteErrorLaunchFailure);
  EXPECT_STREQ(accinteGetLastFailureMessage(), "again");
  EXPECT_EQ(accinteStreamPeekFailure(user, nullptr), accinteErrorInvalidValue);
}

TEST(Failure, AStreamThatWaitedReportsItAndTheFailedStreamThenDoesNot) {
  Handles handles;
  accinteStream_t failed = handles.stream();
  accinteStream_t waiter = handles.stream();
  accinteEvent_t event = handles.event();
  ASSERT_OK(launchFailing(failed, "bad input"));
  ASSERT_OK(accinteEventRecord(event, failed));
  ASSERT_OK(accinteStreamWaitEvent(waiter, event));
  EXPECT_EQ(accinteStreamSynchronize(waiter), accinteErrorLaunchFailure);
  EXPECT_EQ(std::string(accinteGetLastFailureMessage()),
            kInherited + "bad input");
  EXPECT_OK(accinteStreamSynchronize(failed));
  // And the other way round: reported by the failed stream first, the
  // failure is not reported by a stream that waited for it.
  ASSERT_OK(launchFailing(failed, "second"));
  ASSERT_OK(accinteEventRecord(event, failed));
  ASSERT_OK(accinteStreamWaitEvent(waiter, event));
  // NB: the synchronize reaches the record before it reports, so the record
  // carries the failure; the waiter takes it over, already reported.
  EXPECT_EQ(accinteStreamSynchronize(failed), accinteErrorLaunchFailure);
  EXPECT_STREQ(accinteGetLastFailureMessage(), "second");
  EXPECT_OK(accinteStreamSynchronize(waiter));
}

TEST(Failure, DeviceSynchronizeReportsEachFailureOnce) {
  Handles handles;
  accinteStream_t failed = handles.stream();
  accinteStream_t waiter = handles.stream();
  accinteEvent_t event = handles.event();
  ASSERT_OK(launchFailing(failed, "one failure, two carriers"));
  ASSERT_OK(accinteEventRecord(event, failed));
  ASSERT_OK(accinteStreamWaitEvent(waiter, event));
  EXPECT_EQ(accinteDeviceSynchronize(), accinteErrorLaunchFailure);
  EXPECT_NE(std::string(accinteGetLastFailureMessage())
                .find("one failure, two carriers"),
            std::string::npos);
  EXPECT_OK(accinteDeviceSynchronize());
  EXPECT_OK(accinteStreamSynchronize(failed));
  EXPECT_OK(accinteStreamSynchronize(waiter));
}

TEST(Failure, ConcurrentWaitsReportAFailureToExactlyOneOfThem) {
  Handles handles;
  accinteStream_t failed = handles.stream();
  accinteStream_t waiter = handles.stream();
  accinteEvent_t event = handles.event();
  for (int round = 0; round < 50; ++round) {
    ASSERT_OK(launchFailing(failed, "raced"));
    ASSERT_OK(accinteEventRecord(event, failed));
    ASSERT_OK(accinteStreamWaitEvent(waiter, event));
    std::promise<void> start;
    std::shared_future<void> started = start.get_future().share();
    const auto wait = [started](accinteStream_t stream) {
      started.wait();
      return accinteStreamSynchronize(stream);
    };
    auto first = std::async(std::launch::async, wait, failed);
    auto second = std::async(std::launch::async, wait, waiter);
    start.set_value();
    const int reports = (first.get() == accinteErrorLaunchFailure) +
                        (second.get() == accinteErrorLaunchFailure);
    // NB: either may be first; never both.
    ASSERT_EQ(reports, 1) << "round " << round;
    ASSERT_OK(accinteStreamSynchronize(failed));
    ASSERT_OK(accinteStreamSynchronize(waiter));
  }
}

TEST(Failure, ManyFailuresOnAStreamNobodySynchronizesAreOneReport) {
  Handles handles;
  accinteStream_t stream = handles.stream();
  for (int i = 0; i < 1000; ++i) {
    ASSERT_OK(launchFailing(stream, "failure " + std::to_string(i)));
  }
  EXPECT_EQ(accinteStreamSynchronize(stream), accinteErrorLaunchFailure);
  EXPECT_STREQ(accinteGetLastFailureMessage(), "failure 0");
  EXPECT_OK(accinteStreamSynchronize(stream));
}

TEST(Failure, AnEventForBookkeepingNeverReportsOrTakesAFailure) {
  // A caching allocator polls events to learn when a block may be reused;
  // its events must not take the failure away from the user.
  Handles handles;
  accinteStream_t stream = handles.stream();
  accinteEvent_t bookkeeping = handles.event(accinteEventDisableTiming |
                                             accinteEventDisableFailureReport);
  ASSERT_OK(launchFailing(stream, "for the user"));
  ASSERT_OK(accinteEventRecord(bookkeeping, stream));
  EXPECT_OK(accinteEventSynchronize(bookkeeping));
  EXPECT_OK(accinteEventQuery(bookkeeping));
  EXPECT_EQ(accinteStreamSynchronize(stream), accinteErrorLaunchFailure);
  EXPECT_STREQ(accinteGetLastFailureMessage(), "for the user");
  // It still orders streams, and a stream that waits on it still takes the
  // failure over: the flag is about who is told, not about the work.
  accinteStream_t waiter = handles.stream();
  ASSERT_OK(launchFailing(stream, "carried"));
  ASSERT_OK(accinteEventRecord(bookkeeping, stream));
  ASSERT_OK(accinteStreamWaitEvent(waiter, bookkeeping));
  EXPECT_EQ(accinteStreamSynchronize(waiter), accinteErrorLaunchFailure);
  EXPECT_EQ(std::string(accinteGetLastFailureMessage()),
            kInherited + "carried");
  // The flag combines with timing.
  accinteEvent_t timed = nullptr;
  ASSERT_OK(
      accinteEventCreateWithFlags(&timed, accinteEventDisableFailureReport));
  ASSERT_OK(accinteEventDestroy(timed));
}

TEST(Failure, ADestroyedStreamTakesItsUnreportedFailureAlong) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  ASSERT_OK(launchFailing(stream, "nobody asked"));
  ASSERT_OK(accinteStreamDestroy(stream));
  EXPECT_OK(accinteDeviceSynchronize());
}

} // namespace
