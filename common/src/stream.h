#pragma once

#include "failure.h"
#include "spin.h"
#include "telemetry.h"
#include "trace.h"

#include <accinte/runtime.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace accinte::emulator {

class Capture;

/** One unit of work in a stream's queue: a copy, a kernel, an event record or
 * a wait. */
class Operation {
 public:
  virtual ~Operation() = default;
  /** Runs on the stream's worker; a non-success result becomes the stream's
   * pending failure. */
  virtual accinteError_t run() = 0;

  /** Makes the operation traced: the worker times run() into `activity` and
   * stores the record (TracedCall::work()). Untraced by default. */
  void setActivity(std::unique_ptr<PendingActivity> activity) {
    activity_ = std::move(activity);
  }
  /** The activity record to complete, if traced; leaves none behind. */
  std::unique_ptr<PendingActivity> takeActivity() {
    return std::move(activity_);
  }

  /** Makes the worker count run() as work of `mark` for the utilization
   * rates. Counted as nothing by default (event records, waits). */
  void setBusy(const BusyMark& mark) {
    busy_ = mark;
  }
  /** What run() keeps busy. */
  const BusyMark& busy() const {
    return busy_;
  }

  /** What the stream calls once this operation counts as finished, with the
   * failures the stream then carries; runs under the stream's lock, so it
   * must not call back into the stream. */
  using FinishedHook = std::function<void(const CarriedFailures&)>;
  /** Makes `hook` run when the operation has finished (an event record
   * completes its event there). */
  void setFinishedHook(FinishedHook hook) {
    finishedHook_ = std::move(hook);
  }
  /** The hook to run, if any; leaves none behind. */
  FinishedHook takeFinishedHook() {
    return std::move(finishedHook_);
  }

 private:
  BusyMark busy_;
  FinishedHook finishedHook_;
  /** NB: null unless tracing was on when the operation was enqueued; the
   * worker then tests this one pointer and does nothing more. */
  std::unique_ptr<PendingActivity> activity_;
};

/** An Operation that calls a move-only callable returning ::accinteError_t.
 */
template <typename Fn>
class CallableOperation final : public Operation {
 public:
  explicit CallableOperation(Fn fn) : fn_(std::move(fn)) {}
  accinteError_t run() override {
    return fn_();
  }

 private:
  Fn fn_;
};

/** Wraps `fn` (a callable returning ::accinteError_t) as an Operation. */
template <typename Fn>
std::unique_ptr<Operation> makeOperation(Fn&& fn) {
  return std::make_unique<CallableOperation<std::decay_t<Fn>>>(
      std::forward<Fn>(fn));
}

/** What a failure says of a kernel or copy that returned `status` (not
 * ::accinteSuccess) instead of throwing. */
std::string failedStatusMessage(accinteError_t status);

/** Returns a fresh value for a stream or event handle.
 *
 * NB: handles are serial numbers, never addresses, and streams and events
 * share the counter: a destroyed handle is never reused and a stream handle
 * is never a valid event handle, so a stale or mistaken handle is always
 * reported instead of silently designating another object. */
uintptr_t newHandleValue();

/** True on a stream's worker thread, that is, inside a kernel or copy (or
 * the release of a kernel's arguments). A call that waits for streams must
 * refuse to run there: the stream it waits for may be this thread's own. */
bool onStreamWorker();

/** Returns ::accinteErrorNotPermitted on a stream's worker thread, else
 * ::accinteSuccess; see onStreamWorker(). */
accinteError_t checkNotOnStreamWorker();

/**
 * An in-order queue of operations on one device, run by its own worker
 * thread.
 *
 * Each operation gets a ticket (1, 2, ...) when enqueued; the stream counts
 * the operations that have *finished* (run and had their arguments released),
 * so "ticket t is done" is simply `finished >= t`.
 */
class Stream {
 public:
  /** Starts the worker thread unless `startWorker` is false (then every
   * operation runs inline on the enqueuing thread). May throw
   * std::system_error if no thread can be created. */
  Stream(accinteStream_t handle, int device, int priority, bool isDefault,
         bool startWorker);
  /** Drains the queue and joins the worker. */
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  /** The handle the API knows this stream by. */
  accinteStream_t handle() const {
    return handle_;
  }
  /** The device the stream belongs to. */
  int device() const {
    return device_;
  }
  /** The clamped priority. */
  int priority() const {
    return priority_;
  }
  /** True for a device's default stream. */
  bool isDefault() const {
    return isDefault_;
  }
  /** Where the worker publishes the CPU it runs on, for the threads that
   * wait for it (spinUntil()); shared, since an event record may outlive
   * the stream. */
  std::shared_ptr<const CpuSlot> workerCpu() const {
    return workerCpu_;
  }

  /** The capture this stream takes part in (accinteStreamBeginCapture(), or
   * a wait for an event recorded in a capture), or null. NB: one relaxed
   * atomic load when the stream does not capture. */
  std::shared_ptr<Capture> capture() {
    if (!capturing_.load(std::memory_order_acquire)) {
      return nullptr;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    return capture_;
  }
  /** Makes the stream take part in `capture`, or in none (null). */
  void setCapture(std::shared_ptr<Capture> capture) {
    std::lock_guard<std::mutex> lock(mutex_);
    capture_ = std::move(capture);
    capturing_.store(capture_ != nullptr, std::memory_order_release);
  }

  /** Appends `operation` and returns its ticket. */
  uint64_t enqueue(std::unique_ptr<Operation> operation);

  /** Blocks until the operation with `ticket` (and all before it) finished:
   * spins for the process's spin bound (spinUntil()), then sleeps. */
  void waitUntilFinished(uint64_t ticket);

  /** Blocks until everything enqueued so far has finished; reports nothing,
   * so the failures stay for the user's synchronize. */
  void waitIdle();

  /** Reports the failures the stream carries (see report()) if any, else
   * ::accinteErrorNotReady if work is outstanding, else ::accinteSuccess. */
  accinteError_t query();

  /** waitIdle(), then reports the failures the stream carries. */
  accinteError_t synchronize();

  /** The failures the stream carries that nobody has reported yet: its own
   * and those it took over by waiting for failed work. Leaves them in place.
   */
  CarriedFailures carriedFailures();

  /** Takes over `failures` (of an event record this stream waited for). */
  void inherit(const CarriedFailures& failures);

  /** Asks the worker to finish the queue and exit; later operations run
   * inline on the enqueuing thread. */
  void requestStop();

  /** Joins the worker if it exits before `deadline`, else detaches it. */
  void joinWorker(std::chrono::steady_clock::time_point deadline);

 private:
  /** The worker thread's loop. */
  void runWorker();

  /** On the worker, with `lock` (on mutex_) held: returns once the queue
   * has an operation or a stop was requested, having spun (with the lock
   * released), then slept, while neither is the case. */
  void waitForWork(std::unique_lock<std::mutex>& lock);

  /** What became of one operation. */
  struct Outcome {
    accinteError_t status;
    /** Why it failed ("" on success). */
    std::string message;
    /** The operation's Operation::FinishedHook, if it has one. */
    Operation::FinishedHook finished;
  };

  /** Runs one operation, turning exceptions into failures. */
  static Outcome runOperation(std::unique_ptr<Operation> operation);

  /** Records that one operation finished. Needs mutex_. */
  void finishLocked(Outcome outcome);

  /** report()s and forgets the failures the stream carries. Needs mutex_. */
  accinteError_t takeFailuresLocked();

  const accinteStream_t handle_;
  const int device_;
  const int priority_;
  const bool isDefault_;

  std::mutex mutex_;
  std::condition_variable workAvailable_;
  std::condition_variable workFinished_;
  std::deque<std::unique_ptr<Operation>> queue_;
  /** queue_.size(), for the worker's spin, which reads it without mutex_.
   * Written under mutex_. */
  std::atomic<size_t> queueLength_{0};
  uint64_t enqueuedCount_ = 0;
  /** How many operations finished. Written under mutex_ (a release store);
   * a waiter's spin reads it without mutex_ (an acquire load). */
  std::atomic<uint64_t> finishedCount_{0};
  /** The failures not reported when the stream last reported, oldest
   * first. */
  CarriedFailures failures_;
  /** Written under mutex_; the worker's spin reads it without. */
  std::atomic<bool> stopRequested_{false};
  /** True while the worker sleeps (or is about to) on workAvailable_: only
   * then does enqueue() wake it. Needs mutex_. */
  bool workerSleeping_ = false;
  /** How many threads sleep on workFinished_ for a ticket: the worker wakes
   * them only if there are any. Needs mutex_. */
  int sleepingWaiters_ = 0;
  /** The CPU of the worker, published when it starts an operation and while
   * it spins. */
  const std::shared_ptr<CpuSlot> workerCpu_ = std::make_shared<CpuSlot>();
  /** The CPU of the thread that enqueued last. */
  CpuSlot launcherCpu_;
  /** True once the worker will run no more operations (or never existed). */
  bool workerExited_ = false;
  /** True once the exit hook gave up on a worker stuck in a kernel: waiting
   * for its stream must not hang the rest of the process's exit. */
  bool workerAbandoned_ = false;

  /** See capture(). Needs mutex_. */
  std::shared_ptr<Capture> capture_;
  /** capture_ != nullptr; written under mutex_. */
  std::atomic<bool> capturing_{false};

  /** Serialises joining, which the destructor and the exit hook may race on.
   */
  std::mutex joinMutex_;
  std::thread worker_;
};

/**
 * Every live stream of the process, by handle, plus each device's default
 * stream (created on first use and never destroyed).
 */
class StreamRegistry {
 public:
  /** The process-wide registry (intentionally never destroyed). */
  static StreamRegistry& instance();

  /** Creates a stream on `device` with an already clamped priority. */
  accinteError_t create(int device, int priority, accinteStream_t* handle);

  /** Resolves a handle; NULL means the current device's default stream. */
  accinteError_t resolve(accinteStream_t handle,
                         std::shared_ptr<Stream>* stream);

  /** Returns `device`'s default stream, creating it on first use. */
  accinteError_t defaultStream(int device, std::shared_ptr<Stream>* stream);

  /** Unregisters a (non-default) stream, waits for its work and destroys it.
   */
  accinteError_t destroy(accinteStream_t handle);

  /** Every live stream of `device`, or of all devices if `device` is -1. */
  std::vector<std::shared_ptr<Stream>> streamsOf(int device);

  /** At process exit: lets every worker finish its queue, joins the ones
   * that do so promptly and detaches the rest. */
  void shutdown();

 private:
  StreamRegistry() = default;

  /** Creates and registers a stream. Needs mutex_. */
  accinteError_t createLocked(int device, int priority, bool isDefault,
                              std::shared_ptr<Stream>* stream);

  std::mutex mutex_;
  std::unordered_map<uintptr_t, std::shared_ptr<Stream>> streams_;
  std::vector<std::shared_ptr<Stream>> defaultStreams_;
  bool shutDown_ = false;
};

/** The stream priority range: lower numbers mean higher priority. */
constexpr int kLeastStreamPriority = 0;
/** See kLeastStreamPriority. */
constexpr int kGreatestStreamPriority = -2;

} // namespace accinte::emulator
