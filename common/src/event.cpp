#include "event.h"

#include "graph.h"
#include "ipc.h"
#include "lifecycle.h"
#include "spin.h"
#include "stream.h"
#include "trace.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <mutex>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

namespace accinte::emulator {

namespace {

/** The size of an interprocess event's shared state: one page. */
size_t sharedPageSize() {
  return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

/** How long a waiter sleeps between checks that the recording process is
 * still alive. */
constexpr int kPeerPollMs = 50;

/** What a stream that waited for a record that can never complete reports.
 */
constexpr const char* kPeerExitedMessage =
    "waited for an interprocess event whose recording process exited before "
    "the record completed (accinteErrorIpcPeerExited)";

} // namespace

namespace {

/** How many pages the pool's memfd grows by when none is free. */
constexpr size_t kPoolChunkPages = 64;

// LITERALINCLUDE START: EMULATOR_SHARED_EVENT_POOL
/**
 * The shared pages of this process's interprocess events: one memfd holds
 * them all, a page per event, and grows by kPoolChunkPages pages when none
 * is free; a destroyed event's page goes back to the pool.
 *
 * NB: one descriptor for all the events, however many: with a memfd per
 * event, a process that keeps an event per tensor in flight (chapter 14)
 * runs out of open files, at the default limit of 1024, with about a
 * thousand tensors. The descriptor stays open for the process's life,
 * because importers open the memfd through it (openPeerMemfd()); the file
 * never shrinks, so it is as large as the most events alive at once.
 */
class SharedEventPool {
 public:
  /** Leaked on purpose, as the registries: events may outlive statics. */
  static SharedEventPool& instance() {
    static auto* pool = new SharedEventPool();
    return *pool;
  }

  /** A free page, for a new event: its mapping and its offset in the memfd
   * (fd() and nonce()). 0, or the errno of what failed if the memfd cannot
   * be made or grow. */
  int take(SharedEventPage** page, uint64_t* offset) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) {
      if (const int error = growLocked()) {
        return error;
      }
    }
    const size_t index = free_.back();
    free_.pop_back();
    *page = reinterpret_cast<SharedEventPage*>(
        chunks_[index / kPoolChunkPages] +
        (index % kPoolChunkPages) * sharedPageSize());
    *offset = static_cast<uint64_t>(index) * sharedPageSize();
    return 0;
  }

  /** Returns the page at `offset` once its event's state is gone: every
   * record this process made on it has completed. */
  void give(uint64_t offset) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(static_cast<size_t>(offset / sharedPageSize()));
  }

  /** The memfd's descriptor (once a page was taken). */
  int fd() {
    std::lock_guard<std::mutex> lock(mutex_);
    return fd_;
  }
  /** The nonce in the memfd's name. */
  uint64_t nonce() {
    std::lock_guard<std::mutex> lock(mutex_);
    return nonce_;
  }

 private:
  /** Adds kPoolChunkPages free pages; 0, or the errno of what failed. */
  int growLocked() {
    if (fd_ < 0) {
      const uint64_t nonce = newIpcNonce();
      fd_ = createIpcMemfd(kIpcEventPrefix, nonce, 0);
      if (fd_ < 0) {
        return errno;
      }
      nonce_ = nonce;
    }
    const size_t first = chunks_.size() * kPoolChunkPages;
    const size_t bytes = kPoolChunkPages * sharedPageSize();
    if (ftruncate(fd_, static_cast<off_t>(first * sharedPageSize() + bytes)) !=
        0) {
      return errno;
    }
    void* mapping = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                         fd_, static_cast<off_t>(first * sharedPageSize()));
    if (mapping == MAP_FAILED) {
      return errno;
    }
    chunks_.push_back(static_cast<char*>(mapping));
    // Lowest index last: taken first.
    for (size_t index = first + kPoolChunkPages; index > first; --index) {
      free_.push_back(index - 1);
    }
    return 0;
  }

  std::mutex mutex_;
  int fd_ = -1;
  uint64_t nonce_ = 0;
  /** The mappings of the memfd, kPoolChunkPages pages each, in order. */
  std::vector<char*> chunks_;
  /** The indices of the pages no event holds. */
  std::vector<size_t> free_;
};
// LITERALINCLUDE END: EMULATOR_SHARED_EVENT_POOL

} // namespace

accinteError_t SharedEventState::create(
    std::shared_ptr<SharedEventState>* state) {
  auto& pool = SharedEventPool::instance();
  SharedEventPage* page = nullptr;
  uint64_t offset = 0;
  if (const int error = pool.take(&page, &offset)) {
    return ipcResourceError(error);
  }
  // NB: a page that held an earlier event keeps its records: the new
  // event's generations follow the old one's, so a stale wait for an old
  // record (all complete by now) can never take a new one for its own.
  if (page->magic != kIpcEventMagic) {
    page = new (page) SharedEventPage{};
    page->magic = kIpcEventMagic;
  }
  uint64_t eventId = 0;
  while (eventId == 0) {
    eventId = newIpcNonce();
  }
  page->eventId.store(eventId);
  state->reset(
      new SharedEventState(page, pool.fd(), pool.nonce(), offset, eventId));
  return accinteSuccess;
}

std::shared_ptr<SharedEventState> SharedEventState::open(
    const IpcEventHandleData& data) {
  const size_t pageSize = sharedPageSize();
  if (data.offset % pageSize != 0 ||
      data.offset > static_cast<uint64_t>(INT64_MAX) - pageSize) {
    return nullptr;
  }
  const int fd =
      openPeerMemfd({data.pid, data.startTime}, data.fd, kIpcEventPrefix,
                    data.nonce, static_cast<size_t>(data.offset) + pageSize);
  if (fd < 0) {
    return nullptr;
  }
  void* mapping = mmap(nullptr, pageSize, PROT_READ | PROT_WRITE, MAP_SHARED,
                       fd, static_cast<off_t>(data.offset));
  // NB: the mapping keeps the page; this process needs no descriptor.
  close(fd);
  if (mapping == MAP_FAILED) {
    return nullptr;
  }
  auto* page = static_cast<SharedEventPage*>(mapping);
  // NB: checked once mapped: the event may be destroyed, and its page serve
  // another, up to this very moment.
  if (page->magic != kIpcEventMagic || data.eventId == 0 ||
      page->eventId.load() != data.eventId) {
    munmap(mapping, pageSize);
    return nullptr;
  }
  return std::shared_ptr<SharedEventState>(
      new SharedEventState(page, -1, data.nonce, data.offset, data.eventId));
}

SharedEventState::~SharedEventState() {
  if (fd_ >= 0) {
    page_->eventId.store(0); // handles of this event no longer open
    SharedEventPool::instance().give(offset_);
  } else {
    munmap(page_, sharedPageSize());
  }
}

namespace {

uint64_t generationOf(uint64_t state) {
  return state >> 1;
}

uint64_t pendingState(uint64_t generation) {
  return generation << 1;
}

} // namespace

// LITERALINCLUDE START: EMULATOR_IPC_EVENT
accinteError_t SharedEventState::startRecord(uint64_t* generation) {
  const uint64_t self = packRecorder(selfIdentity());
  while (true) {
    uint64_t latest = page_->recorded.load();
    const uint64_t next = latest + 1;
    const uint64_t index = next % kSharedEventSlots;
    SharedEventSlot& slot = page_->slots[index];
    uint64_t state = slot.state.load();
    if (generationOf(state) >= next) {
      // NB: another recorder holds the slot and has not published its
      // generation yet: publish it for it, so that a recorder that exits
      // between the two steps stops no one.
      page_->recorded.compare_exchange_strong(latest, next);
      continue;
    }
    if (state != 0 && (state & kSlotDone) == 0) {
      // The record kSharedEventSlots before is still outstanding.
      ACCINTE_RETURN_IF_ERROR(waitForSlot(index, state));
      continue;
    }
    // NB: who records is stored before the claim too (the slot's record is
    // done, so no waiter reads it): a helper may publish the generation
    // before the store after the claim, and a waiter must then find a
    // recorder that is alive, not the slot's previous one.
    slot.recorder.store(self);
    // LITERALINCLUDE EMPHASIZE NEXT
    if (slot.state.compare_exchange_strong(state, pendingState(next))) {
      slot.recorder.store(self);
      // NB: published only now, so a waiter never looks for a record that
      // has no slot yet.
      page_->recorded.compare_exchange_strong(latest, next);
      *generation = next;
      return accinteSuccess;
    }
  }
}

void SharedEventState::complete(uint64_t generation) {
  // NB: this record's slot only: a later record that completed first says
  // nothing about an earlier one (cudaStreamWaitEvent waits for the record
  // current at its call, whatever the event's later records do).
  SharedEventSlot& slot = page_->slots[generation % kSharedEventSlots];
  // LITERALINCLUDE EMPHASIZE NEXT
  slot.state.store(pendingState(generation) | kSlotDone);
  page_->futexWord.fetch_add(1);
  futexWakeAll(&page_->futexWord); // LITERALINCLUDE EMPHASIZE
}
// LITERALINCLUDE END: EMULATOR_IPC_EVENT

// LITERALINCLUDE START: EMULATOR_IPC_WAIT
bool SharedEventState::isComplete(uint64_t generation) {
  const uint64_t state =
      page_->slots[generation % kSharedEventSlots].state.load();
  // NB: a slot passes to a later record only once its record completed.
  // LITERALINCLUDE EMPHASIZE NEXT 2
  return generationOf(state) > generation ||
         (generationOf(state) == generation && (state & kSlotDone) != 0);
}

accinteError_t SharedEventState::query(uint64_t generation) {
  const SharedEventSlot& slot = page_->slots[generation % kSharedEventSlots];
  while (true) {
    const uint64_t state = slot.state.load();
    if (isComplete(generation)) {
      return accinteSuccess;
    }
    const uint64_t recorder = slot.recorder.load();
    if (slot.state.load() != state) {
      continue; // completed meanwhile: `recorder` may be a later record's
    }
    if (generationOf(state) < generation || recorderIsAlive(recorder)) {
      return accinteErrorNotReady;
    }
    // The recorder may have completed the record just before it exited.
    return isComplete(generation) ? accinteSuccess : accinteErrorIpcPeerExited;
  }
}

accinteError_t SharedEventState::wait(uint64_t generation) {
  // NB: spins first, as a wait for a record of this process does.
  if (spinUntil([&] { return isComplete(generation); })) {
    return accinteSuccess;
  }
  while (true) {
    // NB: the word is read before the check, so a completion between the
    // check and the sleep changes it and the sleep returns at once.
    const uint32_t word = page_->futexWord.load();
    if (isComplete(generation)) {
      return accinteSuccess;
    }
    // LITERALINCLUDE EMPHASIZE NEXT
    futexWait(&page_->futexWord, word, kPeerPollMs);
    const accinteError_t status = query(generation);
    if (status != accinteErrorNotReady) {
      return status;
    }
  }
}
// LITERALINCLUDE END: EMULATOR_IPC_WAIT

accinteError_t SharedEventState::waitForSlot(uint64_t slotIndex,
                                             uint64_t state) {
  // NB: the outstanding record may be behind this very worker's queue.
  ACCINTE_RETURN_IF_ERROR(checkNotOnStreamWorker());
  const SharedEventSlot& slot = page_->slots[slotIndex];
  const uint32_t word = page_->futexWord.load();
  const uint64_t recorder = slot.recorder.load();
  if (slot.state.load() != state) {
    return accinteSuccess;
  }
  if (!recorderIsAlive(recorder)) {
    // NB: the slot is not taken over: a wait for its record must still
    // learn that it never completes, not find it replaced.
    return slot.state.load() != state ? accinteSuccess
                                      : accinteErrorIpcPeerExited;
  }
  futexWait(&page_->futexWord, word, kPeerPollMs);
  return accinteSuccess;
}

uint64_t SharedEventState::latest() {
  return page_->recorded.load();
}

void EventCompletion::complete(CarriedFailures failures) {
  std::lock_guard<std::mutex> lock(mutex_);
  completedAt_ = std::chrono::steady_clock::now();
  failures_ = std::move(failures);
  isComplete_.store(true, std::memory_order_release);
  if (sleepingWaiters_ > 0) {
    completed_.notify_all();
  }
}

CarriedFailures EventCompletion::failures() {
  std::lock_guard<std::mutex> lock(mutex_);
  return failures_;
}

bool EventCompletion::isComplete() {
  return isComplete_.load(std::memory_order_acquire);
}

void EventCompletion::wait() {
  if (spinUntil([&] { return isComplete(); }, recorderCpu_.get())) {
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  ++sleepingWaiters_;
  completed_.wait(lock,
                  [&] { return isComplete_.load(std::memory_order_relaxed); });
  --sleepingWaiters_;
}

std::chrono::steady_clock::time_point EventCompletion::completedAt() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completedAt_;
}

// LITERALINCLUDE START: EMULATOR_FAILURE_PROPAGATION
void enqueueRecord(Stream& stream, std::shared_ptr<EventCompletion> record) {
  // NB: the record does nothing when it runs; it completes once its stream
  // counts it finished, with every failure of the work enqueued before it.
  std::unique_ptr<Operation> operation =
      makeOperation([] { return accinteSuccess; });
  operation->setFinishedHook(
      [record = std::move(record)](const CarriedFailures& failures) {
        record->complete(failures); // LITERALINCLUDE EMPHASIZE
      });
  stream.enqueue(std::move(operation));
}

void enqueueWait(Stream& stream, std::shared_ptr<EventCompletion> record) {
  // NB: the worker of `stream` blocks, not the caller. The record was
  // enqueued before this wait, so waits can never form a cycle.
  // NB: work that waits for failed work fails too: the waiting stream takes
  // the failure over, so whatever it runs next on stale inputs is reported
  // by its own synchronize instead of passing silently. It is the same
  // failure, not a copy: reported by either stream, it is reported by both.
  stream.enqueue(makeOperation([record = std::move(record), &stream] {
    record->wait();
    stream.inherit(record->failures()); // LITERALINCLUDE EMPHASIZE
    return accinteSuccess;
  }));
}
// LITERALINCLUDE END: EMULATOR_FAILURE_PROPAGATION

void enqueueInterprocessRecord(Stream& stream,
                               std::shared_ptr<EventCompletion> record,
                               std::shared_ptr<SharedEventState> shared,
                               uint64_t generation) {
  std::unique_ptr<Operation> operation =
      makeOperation([] { return accinteSuccess; });
  operation->setFinishedHook([record = std::move(record),
                              shared = std::move(shared),
                              generation](const CarriedFailures& failures) {
    // NB: the shared records first: once this process sees the record
    // complete and says so to another, that process sees it complete too.
    shared->complete(generation);
    record->complete(failures);
  });
  stream.enqueue(std::move(operation));
}

void enqueueInterprocessWait(Stream& stream,
                             std::shared_ptr<SharedEventState> shared,
                             uint64_t generation) {
  stream.enqueue(makeOperation([shared = std::move(shared), generation]() {
    if (shared->wait(generation) != accinteSuccess) {
      // NB: thrown, so that the stream's failure says why, as a kernel's
      // exception does.
      throw std::runtime_error(kPeerExitedMessage);
    }
    return accinteSuccess;
  }));
}

accinteError_t Event::startRecord(std::shared_ptr<const CpuSlot> recorderCpu,
                                  std::shared_ptr<EventCompletion>* record,
                                  uint64_t* generation) {
  auto completion = std::make_shared<EventCompletion>(std::move(recorderCpu));
  uint64_t started = 0;
  if (shared_) {
    // NB: outside the lock: this may wait for a slot, and a query or wait
    // for the event meanwhile must not wait with it.
    ACCINTE_RETURN_IF_ERROR(shared_->startRecord(&started));
    if (generation != nullptr) {
      *generation = started;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  // NB: two threads recording at once may get here in either order; the
  // later generation is the event's latest record.
  if (!shared_ || started > latestGeneration_) {
    latestRecord_ = completion;
    latestGeneration_ = started;
    capturedRecord_ = nullptr;
  }
  *record = std::move(completion);
  return accinteSuccess;
}

void Event::recordInCapture(std::shared_ptr<const CapturedRecord> record) {
  std::lock_guard<std::mutex> lock(mutex_);
  capturedRecord_ = std::move(record);
  latestRecord_ = nullptr;
}

RecordTarget Event::latestTarget() {
  RecordTarget target;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!shared_) {
    target.local = latestRecord_;
    target.captured = capturedRecord_;
    return target;
  }
  const uint64_t generation = shared_->latest();
  if (generation == 0) {
    return target;
  }
  // NB: this process's own latest record, with its failures, unless another
  // process recorded since; then that record, without failures.
  if (latestRecord_ && latestGeneration_ == generation) {
    target.local = latestRecord_;
  } else {
    target.shared = shared_;
    target.generation = generation;
  }
  return target;
}

std::shared_ptr<EventCompletion> Event::latestRecord() {
  std::lock_guard<std::mutex> lock(mutex_);
  return latestRecord_;
}

EventRegistry& EventRegistry::instance() {
  // NB: leaked on purpose, see MemoryRegistry::instance().
  static EventRegistry* registry = new EventRegistry();
  return *registry;
}

accinteError_t EventRegistry::create(unsigned int flags,
                                     accinteEvent_t* handle) {
  markInitialised();
  std::shared_ptr<SharedEventState> shared;
  if ((flags & accinteEventInterprocess) != 0) {
    ACCINTE_RETURN_IF_ERROR(SharedEventState::create(&shared));
  }
  *handle = events_.add(std::make_shared<Event>(flags, std::move(shared)));
  return accinteSuccess;
}

accinteError_t EventRegistry::add(std::shared_ptr<Event> event,
                                  accinteEvent_t* handle) {
  markInitialised();
  *handle = events_.add(std::move(event));
  return accinteSuccess;
}

accinteError_t EventRegistry::resolve(accinteEvent_t handle,
                                      std::shared_ptr<Event>* event) {
  auto found = events_.find(handle);
  if (!found) {
    return accinteErrorInvalidResourceHandle;
  }
  *event = std::move(found);
  return accinteSuccess;
}

accinteError_t EventRegistry::destroy(accinteEvent_t handle) {
  return events_.remove(handle) ? accinteSuccess
                                : accinteErrorInvalidResourceHandle;
}

namespace {

/** For a query or synchronize of an event: a record made in a capture never
 * completes (the capture only marks a point of it), so waiting for it is
 * refused, and while the capture lasts, invalidates it. */
accinteError_t refuseCapturedRecord(const RecordTarget& target) {
  if (!target.captured) {
    return accinteSuccess;
  }
  target.captured->capture->invalidate();
  return accinteErrorStreamCaptureUnsupported;
}

// LITERALINCLUDE START: EMULATOR_WAIT_IN_CAPTURE
/** accinteStreamWaitEvent() where the record was made in a capture, or the
 * waiting stream captures (`capture`, else null): the wait becomes a
 * dependency of the stream's later nodes, and a stream outside the
 * record's capture joins it (a fork). */
accinteError_t waitInCapture(const std::shared_ptr<Stream>& stream,
                             const std::shared_ptr<Capture>& capture,
                             const RecordTarget& target) {
  if (!target.captured) {
    if (!target.local && !target.shared) {
      return accinteSuccess; // Never recorded: no wait, as outside captures.
    }
    // A wait for work that is not part of the capture cannot be replayed.
    capture->invalidate();
    return accinteErrorStreamCaptureIsolation;
  }
  const std::shared_ptr<Capture>& recorded = target.captured->capture;
  if (capture && capture != recorded) {
    capture->invalidate();
    return accinteErrorStreamCaptureMerge;
  }
  if (recorded->ended()) {
    return accinteErrorStreamCaptureIsolation;
  }
  if (stream->isDefault()) {
    // A default stream cannot capture (accinteStreamBeginCapture()), so it
    // cannot be forked into a capture either.
    recorded->invalidate();
    return accinteErrorStreamCaptureUnsupported;
  }
  // LITERALINCLUDE EMPHASIZE NEXT
  return recorded->join(stream, target.captured->dependencies);
}
// LITERALINCLUDE END: EMULATOR_WAIT_IN_CAPTURE

} // namespace

} // namespace accinte::emulator

using namespace accinte::emulator;

accinteError_t accinteEventCreate(accinteEvent_t* event) {
  return accinteEventCreateWithFlags(event, accinteEventDefault);
}

accinteError_t accinteEventCreateWithFlags(accinteEvent_t* event,
                                           unsigned int flags) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  constexpr auto kKnownFlags = static_cast<unsigned int>(
      accinteEventDisableTiming | accinteEventDisableFailureReport |
      accinteEventInterprocess);
  if (event == nullptr || (flags & ~kKnownFlags) != 0) {
    return accinteErrorInvalidValue;
  }
  // As in CUDA: another process's records have no time on this one's clock.
  if ((flags & accinteEventInterprocess) != 0 &&
      (flags & accinteEventDisableTiming) == 0) {
    return accinteErrorInvalidValue;
  }
  return EventRegistry::instance().create(flags, event);
}

accinteError_t accinteEventDestroy(accinteEvent_t event) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  return EventRegistry::instance().destroy(event);
}

// LITERALINCLUDE START: EMULATOR_EVENT_RECORD
accinteError_t accinteEventRecord(accinteEvent_t event,
                                  accinteStream_t stream) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteEventRecord");
  std::shared_ptr<Event> resolvedEvent;
  ACCINTE_RETURN_IF_ERROR(
      EventRegistry::instance().resolve(event, &resolvedEvent));
  std::shared_ptr<Stream> resolvedStream;
  ACCINTE_RETURN_IF_ERROR(
      StreamRegistry::instance().resolve(stream, &resolvedStream));
  if (const auto capture = resolvedStream->capture()) {
    // LITERALINCLUDE START: EMULATOR_CAPTURED_RECORD
    // NB: nothing runs: the record marks where the stream's capture is, for
    // a stream that waits for it to depend on (and join the capture).
    if (resolvedEvent->shared()) {
      capture->invalidate();
      return accinteErrorStreamCaptureUnsupported;
    }
    auto record = std::make_shared<CapturedRecord>();
    record->capture = capture;
    ACCINTE_RETURN_IF_ERROR(
        capture->frontier(*resolvedStream, &record->dependencies));
    resolvedEvent->recordInCapture(std::move(record));
    return accinteSuccess;
    // LITERALINCLUDE END: EMULATOR_CAPTURED_RECORD
  }
  // Each record is a fresh completion (and, for an interprocess event, a
  // generation of its own): waiters that captured an older record keep
  // waiting for that one only.
  std::shared_ptr<EventCompletion> record;
  uint64_t generation = 0;
  ACCINTE_RETURN_IF_ERROR(resolvedEvent->startRecord(
      resolvedStream->workerCpu(), &record, &generation));
  if (resolvedEvent->shared()) {
    enqueueInterprocessRecord(*resolvedStream, std::move(record),
                              resolvedEvent->shared(), generation);
    return accinteSuccess;
  }
  enqueueRecord(*resolvedStream, std::move(record));
  return accinteSuccess;
}
// LITERALINCLUDE END: EMULATOR_EVENT_RECORD

// LITERALINCLUDE START: EMULATOR_EVENT_QUERY
accinteError_t accinteEventQuery(accinteEvent_t event) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  std::shared_ptr<Event> resolved;
  ACCINTE_RETURN_IF_ERROR(EventRegistry::instance().resolve(event, &resolved));
  const RecordTarget target = resolved->latestTarget();
  ACCINTE_RETURN_IF_ERROR(refuseCapturedRecord(target));
  if (target.shared) {
    return target.shared->query(target.generation);
  }
  const auto& record = target.local;
  if (!record) {
    return accinteSuccess;
  }
  if (!record->isComplete()) {
    return accinteErrorNotReady;
  }
  // LITERALINCLUDE EMPHASIZE NEXT
  return resolved->reportsFailures() ? report(record->failures())
                                     : accinteSuccess;
}

accinteError_t accinteEventSynchronize(accinteEvent_t event) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteEventSynchronize");
  ACCINTE_RETURN_IF_ERROR(checkNotOnStreamWorker());
  std::shared_ptr<Event> resolved;
  ACCINTE_RETURN_IF_ERROR(EventRegistry::instance().resolve(event, &resolved));
  const RecordTarget target = resolved->latestTarget();
  ACCINTE_RETURN_IF_ERROR(refuseCapturedRecord(target));
  if (target.shared) {
    return target.shared->wait(target.generation);
  }
  const auto& record = target.local;
  if (!record) {
    return accinteSuccess;
  }
  record->wait();
  // LITERALINCLUDE EMPHASIZE NEXT
  return resolved->reportsFailures() ? report(record->failures())
                                     : accinteSuccess;
}
// LITERALINCLUDE END: EMULATOR_EVENT_QUERY

accinteError_t accinteEventElapsedTime(float* milliseconds,
                                       accinteEvent_t start,
                                       accinteEvent_t end) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (milliseconds == nullptr) {
    return accinteErrorInvalidValue;
  }
  std::shared_ptr<Event> startEvent;
  std::shared_ptr<Event> endEvent;
  ACCINTE_RETURN_IF_ERROR(
      EventRegistry::instance().resolve(start, &startEvent));
  ACCINTE_RETURN_IF_ERROR(EventRegistry::instance().resolve(end, &endEvent));
  if (!startEvent->hasTiming() || !endEvent->hasTiming()) {
    return accinteErrorTimingDisabled;
  }
  auto startRecord = startEvent->latestRecord();
  auto endRecord = endEvent->latestRecord();
  if (!startRecord || !endRecord) {
    return accinteErrorEventNotRecorded;
  }
  if (!startRecord->isComplete() || !endRecord->isComplete()) {
    return accinteErrorNotReady;
  }
  const std::chrono::duration<float, std::milli> elapsed =
      endRecord->completedAt() - startRecord->completedAt();
  *milliseconds = elapsed.count();
  return accinteSuccess;
}

// LITERALINCLUDE START: EMULATOR_WAIT_EVENT
accinteError_t accinteStreamWaitEvent(accinteStream_t stream,
                                      accinteEvent_t event) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteStreamWaitEvent");
  std::shared_ptr<Stream> resolvedStream;
  ACCINTE_RETURN_IF_ERROR(
      StreamRegistry::instance().resolve(stream, &resolvedStream));
  std::shared_ptr<Event> resolvedEvent;
  ACCINTE_RETURN_IF_ERROR(
      EventRegistry::instance().resolve(event, &resolvedEvent));
  // The record is captured now: recording the event again later must not
  // change what this stream waits for.
  RecordTarget target = resolvedEvent->latestTarget();
  const auto capture = resolvedStream->capture();
  if (target.captured || capture) {
    return waitInCapture(resolvedStream, capture, target);
  }
  if (target.shared) {
    enqueueInterprocessWait(*resolvedStream, std::move(target.shared),
                            target.generation);
    return accinteSuccess;
  }
  auto record = std::move(target.local);
  if (!record) {
    return accinteSuccess;
  }
  enqueueWait(*resolvedStream, std::move(record));
  return accinteSuccess;
}
// LITERALINCLUDE END: EMULATOR_WAIT_EVENT
