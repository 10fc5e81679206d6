#include "event.h"

#include "lifecycle.h"
#include "stream.h"
#include "trace.h"

#include <utility>

namespace accinte::emulator {

namespace {

accinteEvent_t toEventHandle(uintptr_t value) {
  return reinterpret_cast<accinteEvent_t>(value);
}

uintptr_t fromEventHandle(accinteEvent_t handle) {
  return reinterpret_cast<uintptr_t>(handle);
}

} // namespace

void EventCompletion::complete(CarriedFailures failures) {
  std::lock_guard<std::mutex> lock(mutex_);
  completedAt_ = std::chrono::steady_clock::now();
  failures_ = std::move(failures);
  isComplete_ = true;
  completed_.notify_all();
}

CarriedFailures EventCompletion::failures() {
  std::lock_guard<std::mutex> lock(mutex_);
  return failures_;
}

bool EventCompletion::isComplete() {
  std::lock_guard<std::mutex> lock(mutex_);
  return isComplete_;
}

void EventCompletion::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  completed_.wait(lock, [&] { return isComplete_; });
}

std::chrono::steady_clock::time_point EventCompletion::completedAt() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completedAt_;
}

// LITERALINCLUDE START: EMULATOR_FAILURE_PROPAGATION
void enqueueRecord(Stream& stream, std::shared_ptr<EventCompletion> record) {
  // NB: runs on the stream's own worker, so the stream outlives it, and it
  // sees every failure of the work enqueued before it.
  stream.enqueue(makeOperation([record = std::move(record), &stream] {
    record->complete(stream.carriedFailures()); // LITERALINCLUDE EMPHASIZE
    return accinteSuccess;
  }));
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

std::shared_ptr<EventCompletion> Event::startRecord() {
  auto completion = std::make_shared<EventCompletion>();
  std::lock_guard<std::mutex> lock(mutex_);
  latestRecord_ = completion;
  return completion;
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
  const uintptr_t value = newHandleValue();
  auto event = std::make_shared<Event>(flags);
  std::lock_guard<std::mutex> lock(mutex_);
  events_.emplace(value, std::move(event));
  *handle = toEventHandle(value);
  return accinteSuccess;
}

accinteError_t EventRegistry::resolve(accinteEvent_t handle,
                                      std::shared_ptr<Event>* event) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = events_.find(fromEventHandle(handle));
  if (it == events_.end()) {
    return accinteErrorInvalidResourceHandle;
  }
  *event = it->second;
  return accinteSuccess;
}

accinteError_t EventRegistry::destroy(accinteEvent_t handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = events_.find(fromEventHandle(handle));
  if (it == events_.end()) {
    return accinteErrorInvalidResourceHandle;
  }
  events_.erase(it);
  return accinteSuccess;
}

} // namespace accinte::emulator

using namespace accinte::emulator;

accinteError_t accinteEventCreate(accinteEvent_t* event) {
  return accinteEventCreateWithFlags(event, accinteEventDefault);
}

accinteError_t accinteEventCreateWithFlags(accinteEvent_t* event,
                                           unsigned int flags) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  constexpr auto kKnownFlags = static_cast<unsigned int>(
      accinteEventDisableTiming | accinteEventDisableFailureReport);
  if (event == nullptr || (flags & ~kKnownFlags) != 0) {
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
  // Each record is a fresh completion: waiters that captured an older record
  // keep waiting for that one only.
  enqueueRecord(*resolvedStream, resolvedEvent->startRecord());
  return accinteSuccess;
}
// LITERALINCLUDE END: EMULATOR_EVENT_RECORD

// LITERALINCLUDE START: EMULATOR_EVENT_QUERY
accinteError_t accinteEventQuery(accinteEvent_t event) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  std::shared_ptr<Event> resolved;
  ACCINTE_RETURN_IF_ERROR(EventRegistry::instance().resolve(event, &resolved));
  auto record = resolved->latestRecord();
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
  auto record = resolved->latestRecord();
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
  auto record = resolvedEvent->latestRecord();
  if (!record) {
    return accinteSuccess;
  }
  enqueueWait(*resolvedStream, std::move(record));
  return accinteSuccess;
}
// LITERALINCLUDE END: EMULATOR_WAIT_EVENT
