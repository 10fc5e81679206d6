#include "stream.h"

#include "config.h"
#include "graph.h"
#include "lifecycle.h"
#include "memory.h"
#include "spin.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <system_error>

namespace accinte::emulator {

namespace {

/** How long the exit hook lets workers finish their queues before it gives
 * up on joining them. */
constexpr std::chrono::seconds kExitDrainTimeout{2};

accinteStream_t toStreamHandle(uintptr_t value) {
  return reinterpret_cast<accinteStream_t>(value);
}

uintptr_t fromStreamHandle(accinteStream_t handle) {
  return reinterpret_cast<uintptr_t>(handle);
}

} // namespace

namespace {

/** Set on each stream's worker thread; see onStreamWorker(). */
thread_local bool isStreamWorker = false;

} // namespace

bool onStreamWorker() {
  return isStreamWorker;
}

accinteError_t checkNotOnStreamWorker() {
  return isStreamWorker ? accinteErrorNotPermitted : accinteSuccess;
}

std::string failedStatusMessage(accinteError_t status) {
  return std::string("a kernel or copy returned ") +
         accinteGetErrorName(status) + ": " + accinteGetErrorString(status);
}

uintptr_t newHandleValue() {
  static std::atomic<uintptr_t> nextValue{1};
  return nextValue.fetch_add(1);
}

Stream::Stream(accinteStream_t handle, int device, int priority, bool isDefault,
               bool startWorker)
    : handle_(handle),
      device_(device),
      priority_(priority),
      isDefault_(isDefault) {
  if (!startWorker) {
    workerExited_ = true;
    return;
  }
  worker_ = std::thread([this] { runWorker(); });
  // A name makes the workers easy to tell apart in a debugger or in top -H.
  char name[16];
  std::snprintf(name, sizeof(name), "accinte-d%d-s%lu", device,
                static_cast<unsigned long>(fromStreamHandle(handle)));
  pthread_setname_np(worker_.native_handle(), name);
}

Stream::~Stream() {
  requestStop();
  joinWorker(std::chrono::steady_clock::time_point::max());
}

// LITERALINCLUDE START: EMULATOR_STREAM_WORKER
// LITERALINCLUDE START: EMULATOR_STREAM_RUN_WORKER
void Stream::runWorker() {
  isStreamWorker = true;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    waitForWork(lock); // LITERALINCLUDE EMPHASIZE
    if (queue_.empty()) {
      // Stopping, and everything enqueued before the stop has run.
      workerExited_ = true;
      workFinished_.notify_all();
      return;
    }
    // LITERALINCLUDE EMPHASIZE NEXT
    std::unique_ptr<Operation> operation = std::move(queue_.front());
    queue_.pop_front();
    queueLength_.store(queue_.size(), std::memory_order_relaxed);
    lock.unlock();
    workerCpu_->publish();
    // NB: the operation is destroyed (kernel arguments released) before it
    // counts as finished, so that a synchronize also covers the deleter.
    // LITERALINCLUDE EMPHASIZE NEXT
    Outcome outcome = runOperation(std::move(operation));
    lock.lock();
    finishLocked(std::move(outcome)); // LITERALINCLUDE EMPHASIZE
  }
}
// LITERALINCLUDE END: EMULATOR_STREAM_RUN_WORKER

// LITERALINCLUDE START: EMULATOR_STREAM_WAIT_FOR_WORK
void Stream::waitForWork(std::unique_lock<std::mutex>& lock) {
  const auto hasWork = [&] { return !queue_.empty() || stopRequested_; };
  if (hasWork()) {
    return;
  }
  // NB: the next launch often comes within microseconds (a host thread
  // issuing operator after operator). Spinning on the queue's length, with
  // the lock released, takes it without a system call on either side; the
  // spin is bounded, so an idle stream's worker sleeps soon after.
  lock.unlock();
  // LITERALINCLUDE EMPHASIZE NEXT 4
  spinUntil(
      [&] {
        return queueLength_.load(std::memory_order_relaxed) != 0 ||
               stopRequested_.load(std::memory_order_relaxed);
      },
      &launcherCpu_, workerCpu_.get());
  lock.lock();
  // NB: set under the lock, before the wait releases it: an enqueue() that
  // comes after sees it and wakes the worker, so no wake-up is lost.
  workerSleeping_ = true; // LITERALINCLUDE EMPHASIZE
  workAvailable_.wait(lock, hasWork);
  workerSleeping_ = false;
}
// LITERALINCLUDE END: EMULATOR_STREAM_WAIT_FOR_WORK

Stream::Outcome Stream::runOperation(std::unique_ptr<Operation> operation) {
  Outcome outcome{accinteErrorLaunchFailure, "", operation->takeFinishedHook()};
  std::unique_ptr<PendingActivity> activity = operation->takeActivity();
  if (activity) {
    activity->record.start = activityNow();
  }
  // A throwing kernel is a failed kernel, not a dead process; what it said
  // is kept for whoever is told of the failure.
  try {
    const BusyScope busy(operation->busy());
    outcome.status = operation->run();
    if (outcome.status != accinteSuccess) {
      outcome.message = failedStatusMessage(outcome.status);
    }
  } catch (const std::exception& error) {
    outcome.message = error.what();
  } catch (...) {
    outcome.message =
        "a kernel threw an exception that is not a "
        "std::exception";
  }
  // NB: stored before the operation counts as finished, so a synchronize
  // that returns has its records in the buffer; the release of a kernel's
  // arguments is not part of the kernel's time.
  if (activity) {
    activity->record.end = activityNow();
    commitActivity(*activity);
  }
  try {
    operation.reset();
  } catch (const std::exception& error) {
    if (outcome.status == accinteSuccess) {
      outcome.status = accinteErrorLaunchFailure;
      outcome.message =
          std::string("releasing a kernel's arguments threw: ") + error.what();
    }
  } catch (...) {
    if (outcome.status == accinteSuccess) {
      outcome.status = accinteErrorLaunchFailure;
      outcome.message = "releasing a kernel's arguments threw";
    }
  }
  return outcome;
}

// LITERALINCLUDE START: EMULATOR_STREAM_FINISH
void Stream::finishLocked(Outcome outcome) {
  // NB: nobody waits on an individual operation, so a failure is kept until
  // a synchronize or query of a stream or event that carries it reports it.
  if (outcome.status != accinteSuccess) {
    // LITERALINCLUDE EMPHASIZE NEXT 2
    carry(failures_,
          {std::make_shared<Failure>(std::move(outcome.message)), false});
  }
  // NB: a release store: a waiter that sees the count (spinning, without
  // the lock) sees everything the operation wrote too.
  finishedCount_.store(finishedCount_.load(std::memory_order_relaxed) + 1,
                       std::memory_order_release); // LITERALINCLUDE EMPHASIZE
  if (sleepingWaiters_ > 0) {
    workFinished_.notify_all();
  }
  // NB: after the count, so that whoever sees an event's record complete
  // also finds its stream past the record (a query of the stream right
  // after the event's says so). Completed from inside the record's own
  // run(), a thread could see the event complete and the stream still busy.
  if (outcome.finished) {
    outcome.finished(unreported(failures_));
  }
}
// LITERALINCLUDE END: EMULATOR_STREAM_FINISH

accinteError_t Stream::takeFailuresLocked() {
  const accinteError_t status = report(failures_);
  failures_.clear();
  return status;
}
// LITERALINCLUDE END: EMULATOR_STREAM_WORKER

uint64_t Stream::enqueue(std::unique_ptr<Operation> operation) {
  launcherCpu_.publish();
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t ticket = ++enqueuedCount_;
  if (!workerExited_) {
    queue_.push_back(std::move(operation));
    queueLength_.store(queue_.size(), std::memory_order_relaxed);
    // NB: a worker that spins takes the operation by itself; only a
    // sleeping one needs the system call that wakes it, made after the
    // unlock so that it does not wake into a held lock. The caller holds
    // the stream, so it outlives the call.
    const bool wake = std::exchange(workerSleeping_, false);
    lock.unlock();
    if (wake) {
      workAvailable_.notify_one();
    }
    return ticket;
  }
  // No worker (the process is exiting): run in place. Nothing can be queued
  // ahead, so the order is kept.
  lock.unlock();
  Outcome outcome = runOperation(std::move(operation));
  lock.lock();
  finishLocked(std::move(outcome));
  return ticket;
}

void Stream::waitUntilFinished(uint64_t ticket) {
  // NB: the acquire load pairs with finishLocked()'s release store: once
  // the ticket reads finished, so do the operation's writes (a copy's
  // result, its status). The failures are read under the lock later.
  if (spinUntil(
          [&] {
            return finishedCount_.load(std::memory_order_acquire) >= ticket;
          },
          workerCpu_.get())) {
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  ++sleepingWaiters_;
  workFinished_.wait(lock, [&] {
    return finishedCount_.load(std::memory_order_relaxed) >= ticket ||
           workerAbandoned_;
  });
  --sleepingWaiters_;
}

void Stream::waitIdle() {
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ticket = enqueuedCount_;
  }
  waitUntilFinished(ticket);
}

accinteError_t Stream::query() {
  std::lock_guard<std::mutex> lock(mutex_);
  ACCINTE_RETURN_IF_ERROR(takeFailuresLocked());
  // NB: compared with the *finished* count, not the queue: an operation that
  // has been dequeued but is still running is not done.
  return finishedCount_.load(std::memory_order_relaxed) == enqueuedCount_
             ? accinteSuccess
             : accinteErrorNotReady;
}

accinteError_t Stream::synchronize() {
  waitIdle();
  std::lock_guard<std::mutex> lock(mutex_);
  return takeFailuresLocked();
}

CarriedFailures Stream::carriedFailures() {
  std::lock_guard<std::mutex> lock(mutex_);
  return unreported(failures_);
}

void Stream::inherit(const CarriedFailures& failures) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const CarriedFailure& entry : failures) {
    carry(failures_, {entry.failure, /*inherited=*/true});
  }
}

void Stream::requestStop() {
  std::lock_guard<std::mutex> lock(mutex_);
  stopRequested_ = true;
  workAvailable_.notify_all();
}

// LITERALINCLUDE START: EMULATOR_EXIT
void Stream::joinWorker(std::chrono::steady_clock::time_point deadline) {
  std::lock_guard<std::mutex> joinLock(joinMutex_);
  if (!worker_.joinable()) {
    return;
  }
  if (worker_.get_id() == std::this_thread::get_id()) {
    // Destroyed from its own worker (a kernel broke the rules): cannot join.
    worker_.detach();
    return;
  }
  bool exited = false;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto hasExited = [&] { return workerExited_; };
    if (deadline == std::chrono::steady_clock::time_point::max()) {
      workFinished_.wait(lock, hasExited);
      exited = true;
    } else {
      // LITERALINCLUDE EMPHASIZE NEXT
      exited = workFinished_.wait_until(lock, deadline, hasExited);
    }
  }
  // NB: a worker stuck in a kernel that never returns must not hang the
  // process's exit; it is detached and ends with the process. Everything it
  // can touch is intentionally leaked, so it never sees a destroyed object.
  if (exited) {
    worker_.join(); // LITERALINCLUDE EMPHASIZE
    return;
  }
  worker_.detach(); // LITERALINCLUDE EMPHASIZE
  std::lock_guard<std::mutex> lock(mutex_);
  workerAbandoned_ = true;
  workFinished_.notify_all();
}

void StreamRegistry::shutdown() {
  std::vector<std::shared_ptr<Stream>> streams;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shutDown_ = true;
    for (auto& entry : streams_) {
      streams.push_back(entry.second);
    }
  }
  for (auto& stream : streams) {
    stream->requestStop(); // LITERALINCLUDE EMPHASIZE
  }
  // LITERALINCLUDE EMPHASIZE NEXT
  const auto deadline = std::chrono::steady_clock::now() + kExitDrainTimeout;
  for (auto& stream : streams) {
    stream->joinWorker(deadline); // LITERALINCLUDE EMPHASIZE
  }
}
// LITERALINCLUDE END: EMULATOR_EXIT

StreamRegistry& StreamRegistry::instance() {
  // NB: leaked on purpose, see MemoryRegistry::instance(); the exit hook
  // stops the workers instead of a destructor.
  static StreamRegistry* registry = new StreamRegistry();
  return *registry;
}

accinteError_t StreamRegistry::createLocked(int device, int priority,
                                            bool isDefault,
                                            std::shared_ptr<Stream>* stream) {
  markInitialised();
  ensureExitHookInstalled();
  const uintptr_t value = newHandleValue();
  try {
    *stream = std::make_shared<Stream>(toStreamHandle(value), device, priority,
                                       isDefault, /*startWorker=*/!shutDown_);
  } catch (const std::exception&) {
    // No thread (or no memory) left: the same as running out of resources.
    return accinteErrorMemoryAllocation;
  }
  streams_.emplace(value, *stream);
  return accinteSuccess;
}

accinteError_t StreamRegistry::create(int device, int priority,
                                      accinteStream_t* handle) {
  std::shared_ptr<Stream> stream;
  std::lock_guard<std::mutex> lock(mutex_);
  ACCINTE_RETURN_IF_ERROR(
      createLocked(device, priority, /*isDefault=*/false, &stream));
  *handle = stream->handle();
  return accinteSuccess;
}

accinteError_t StreamRegistry::defaultStream(int device,
                                             std::shared_ptr<Stream>* stream) {
  ACCINTE_RETURN_IF_ERROR(checkDevice(device));
  std::lock_guard<std::mutex> lock(mutex_);
  if (defaultStreams_.empty()) {
    defaultStreams_.resize(static_cast<size_t>(config().deviceCount));
  }
  auto& slot = defaultStreams_[static_cast<size_t>(device)];
  if (!slot) {
    ACCINTE_RETURN_IF_ERROR(createLocked(device, kLeastStreamPriority,
                                         /*isDefault=*/true, &slot));
  }
  *stream = slot;
  return accinteSuccess;
}

accinteError_t StreamRegistry::resolve(accinteStream_t handle,
                                       std::shared_ptr<Stream>* stream) {
  if (handle == nullptr) {
    return defaultStream(currentDevice(), stream);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find(fromStreamHandle(handle));
  if (it == streams_.end()) {
    return accinteErrorInvalidResourceHandle;
  }
  *stream = it->second;
  return accinteSuccess;
}

accinteError_t StreamRegistry::destroy(accinteStream_t handle) {
  std::shared_ptr<Stream> stream;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = streams_.find(fromStreamHandle(handle));
    if (it == streams_.end() || it->second->isDefault()) {
      return accinteErrorInvalidResourceHandle;
    }
    // NB: a capturing stream's capture still refers to it.
    ACCINTE_RETURN_IF_ERROR(checkNotCapturing(*it->second));
    stream = std::move(it->second);
    streams_.erase(it);
  }
  // Unregistered first so that no new work can be looked up; the destructor
  // (here or in whichever thread still holds the stream) drains and joins.
  stream->waitIdle();
  return accinteSuccess;
}

std::vector<std::shared_ptr<Stream>> StreamRegistry::streamsOf(int device) {
  std::vector<std::shared_ptr<Stream>> streams;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& entry : streams_) {
    if (device == -1 || entry.second->device() == device) {
      streams.push_back(entry.second);
    }
  }
  return streams;
}

} // namespace accinte::emulator

using namespace accinte::emulator;

accinteError_t accinteDeviceGetStreamPriorityRange(int* least, int* greatest) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (least == nullptr || greatest == nullptr) {
    return accinteErrorInvalidValue;
  }
  *least = kLeastStreamPriority;
  *greatest = kGreatestStreamPriority;
  return accinteSuccess;
}

accinteError_t accinteStreamCreate(accinteStream_t* stream) {
  return accinteStreamCreateWithPriority(stream, kLeastStreamPriority);
}

accinteError_t accinteStreamCreateWithPriority(accinteStream_t* stream,
                                               int priority) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (stream == nullptr) {
    return accinteErrorInvalidValue;
  }
  const int clamped =
      std::clamp(priority, kGreatestStreamPriority, kLeastStreamPriority);
  return StreamRegistry::instance().create(currentDevice(), clamped, stream);
}

accinteError_t accinteGetDefaultStream(int device, accinteStream_t* stream) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (stream == nullptr) {
    return accinteErrorInvalidValue;
  }
  std::shared_ptr<Stream> resolved;
  ACCINTE_RETURN_IF_ERROR(
      StreamRegistry::instance().defaultStream(device, &resolved));
  *stream = resolved->handle();
  return accinteSuccess;
}

accinteError_t accinteStreamDestroy(accinteStream_t stream) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  ACCINTE_RETURN_IF_ERROR(checkNotOnStreamWorker());
  return StreamRegistry::instance().destroy(stream);
}

accinteError_t accinteStreamQuery(accinteStream_t stream) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  std::shared_ptr<Stream> resolved;
  ACCINTE_RETURN_IF_ERROR(
      StreamRegistry::instance().resolve(stream, &resolved));
  ACCINTE_RETURN_IF_ERROR(checkNotCapturing(*resolved));
  return resolved->query();
}

accinteError_t accinteStreamSynchronize(accinteStream_t stream) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteStreamSynchronize");
  ACCINTE_RETURN_IF_ERROR(checkNotOnStreamWorker());
  std::shared_ptr<Stream> resolved;
  ACCINTE_RETURN_IF_ERROR(
      StreamRegistry::instance().resolve(stream, &resolved));
  ACCINTE_RETURN_IF_ERROR(checkNotCapturing(*resolved));
  return resolved->synchronize();
}

accinteError_t accinteStreamPeekFailure(accinteStream_t stream, int* failed) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (failed == nullptr) {
    return accinteErrorInvalidValue;
  }
  std::shared_ptr<Stream> resolved;
  ACCINTE_RETURN_IF_ERROR(
      StreamRegistry::instance().resolve(stream, &resolved));
  *failed = resolved->carriedFailures().empty() ? 0 : 1;
  return accinteSuccess;
}

accinteError_t accinteStreamGetDevice(accinteStream_t stream, int* device) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (device == nullptr) {
    return accinteErrorInvalidValue;
  }
  std::shared_ptr<Stream> resolved;
  ACCINTE_RETURN_IF_ERROR(
      StreamRegistry::instance().resolve(stream, &resolved));
  *device = resolved->device();
  return accinteSuccess;
}

accinteError_t accinteStreamGetPriority(accinteStream_t stream, int* priority) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (priority == nullptr) {
    return accinteErrorInvalidValue;
  }
  std::shared_ptr<Stream> resolved;
  ACCINTE_RETURN_IF_ERROR(
      StreamRegistry::instance().resolve(stream, &resolved));
  *priority = resolved->priority();
  return accinteSuccess;
}

namespace {

/** Owns a kernel's arguments: the deleter runs exactly once, whether the
 * kernel ran or the launch failed. */
class KernelArguments {
 public:
  KernelArguments(void* args, accinteArgsDeleter deleter)
      : args_(args), deleter_(deleter) {}
  ~KernelArguments() {
    if (deleter_ != nullptr) {
      deleter_(args_);
    }
  }
  KernelArguments(KernelArguments&& other) noexcept
      : args_(other.args_), deleter_(std::exchange(other.deleter_, nullptr)) {}
  KernelArguments(const KernelArguments&) = delete;
  KernelArguments& operator=(const KernelArguments&) = delete;
  KernelArguments& operator=(KernelArguments&&) = delete;

  /** The pointer to pass to the kernel. */
  void* get() const {
    return args_;
  }

 private:
  void* args_;
  accinteArgsDeleter deleter_;
};

} // namespace

accinteError_t accinteLaunchKernel(accinteStream_t stream, accinteKernelFn fn,
                                   void* args, accinteArgsDeleter deleter,
                                   const void* const* buffers,
                                   size_t num_buffers) {
  return accinteLaunchKernelNamed(stream, nullptr, fn, args, deleter, buffers,
                                  num_buffers);
}

// LITERALINCLUDE START: EMULATOR_KERNEL_LAUNCH
accinteError_t accinteLaunchKernelNamed(accinteStream_t stream,
                                        const char* name, accinteKernelFn fn,
                                        void* args, accinteArgsDeleter deleter,
                                        const void* const* buffers,
                                        size_t num_buffers) {
  // Owns the arguments from here on, so every early return releases them.
  KernelArguments arguments(args, deleter);
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteLaunchKernel");
  if (fn == nullptr || (buffers == nullptr && num_buffers > 0)) {
    return accinteErrorInvalidValue;
  }
  std::shared_ptr<Stream> resolved;
  ACCINTE_RETURN_IF_ERROR(
      StreamRegistry::instance().resolve(stream, &resolved));
  std::vector<AllocationRef> refs;
  for (size_t i = 0; i < num_buffers; ++i) {
    auto info = MemoryRegistry::instance().find(buffers[i]);
    // LITERALINCLUDE EMPHASIZE NEXT 2
    if (!info || info->type != accinteMemoryTypeDevice ||
        info->device != resolved->device()) {
      return accinteErrorInvalidDevicePointer;
    }
    refs.push_back(info->ref);
  }
  // NB: a captured kernel's node opens the same allocations; they are copied
  // for it before the operation takes them, and only if it is captured.
  const std::shared_ptr<Capture> capture = resolved->capture();
  std::vector<AllocationRef> nodeRefs;
  if (capture) {
    nodeRefs = refs;
  }
  auto operation = makeOperation(
      [fn, arguments = std::move(arguments), refs = std::move(refs)]() {
        // LITERALINCLUDE EMPHASIZE NEXT 2
        OpenAllocations open(refs);
        if (!open.ok()) {
          // A buffer was freed after the launch: do not run on stale memory.
          return accinteErrorLaunchFailure;
        }
        return fn(arguments.get());
      });
  // NB: `name` is read only here, when tracing is on, or captured.
  operation->setBusy({BusyKind::kKernel, {resolved->device(), -1}});
  if (call.on()) {
    operation->setActivity(
        call.work(accinteActivityKindKernel, accinteActivityMemcpyNone, name,
                  resolved->handle(), resolved->device(), -1, -1, 0));
  }
  // LITERALINCLUDE EMPHASIZE NEXT
  return submit(*resolved, capture, std::move(operation), [&] {
    NodeInfo info;
    info.name = name != nullptr ? name : "kernel";
    info.allocations = std::move(nodeRefs);
    return info;
  });
}
// LITERALINCLUDE END: EMULATOR_KERNEL_LAUNCH
