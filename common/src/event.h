#pragma once

#include "failure.h"

#include <accinte/runtime.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace accinte::emulator {

/**
 * The completion of one record of an event.
 *
 * NB: it is shared (not owned by the event) because a stream that waits on
 * an event, or the operation that completes a record, may outlive the event
 * itself: destroying an event must not pull the state from under them.
 */
class EventCompletion {
 public:
  /** Marks the record complete, stamping the time, and wakes waiters.
   * `failures` are those the recording stream carried, unreported, when it
   * reached the record. */
  void complete(CarriedFailures failures);
  /** The failures complete() was given (reported ones included). */
  CarriedFailures failures();
  /** True once complete() ran. */
  bool isComplete();
  /** Blocks until complete() ran. */
  void wait();
  /** When complete() ran; meaningful only once isComplete(). */
  std::chrono::steady_clock::time_point completedAt();

 private:
  std::mutex mutex_;
  std::condition_variable completed_;
  bool isComplete_ = false;
  std::chrono::steady_clock::time_point completedAt_;
  CarriedFailures failures_;
};

class Stream;

/** Enqueues on `stream` the completion of `record`: it completes when the
 * stream reaches it, and carries the failures the stream carries then. */
void enqueueRecord(Stream& stream, std::shared_ptr<EventCompletion> record);

/** Enqueues on `stream` a wait for `record`, after which `stream` carries
 * the failures `record` carries too. */
void enqueueWait(Stream& stream, std::shared_ptr<EventCompletion> record);

/** An event: its flags and its most recent record, if any. */
class Event {
 public:
  /** Creates an event with `accinteEvent*` flags. */
  explicit Event(unsigned int flags) : flags_(flags) {}

  /** False if created with ::accinteEventDisableTiming. */
  bool hasTiming() const {
    return (flags_ & accinteEventDisableTiming) == 0;
  }

  /** False if created with ::accinteEventDisableFailureReport. */
  bool reportsFailures() const {
    return (flags_ & accinteEventDisableFailureReport) == 0;
  }

  /** Starts a new record and returns its completion. */
  std::shared_ptr<EventCompletion> startRecord();

  /** The most recent record, or nullptr if never recorded. */
  std::shared_ptr<EventCompletion> latestRecord();

 private:
  const unsigned int flags_;
  std::mutex mutex_;
  std::shared_ptr<EventCompletion> latestRecord_;
};

/** Every live event of the process, by handle. */
class EventRegistry {
 public:
  /** The process-wide registry (intentionally never destroyed). */
  static EventRegistry& instance();

  /** Creates an event and writes its handle. */
  accinteError_t create(unsigned int flags, accinteEvent_t* handle);

  /** Resolves a handle; NULL or unknown gives
   * ::accinteErrorInvalidResourceHandle. */
  accinteError_t resolve(accinteEvent_t handle, std::shared_ptr<Event>* event);

  /** Unregisters an event; outstanding records and waits are unaffected. */
  accinteError_t destroy(accinteEvent_t handle);

 private:
  EventRegistry() = default;

  std::mutex mutex_;
  std::unordered_map<uintptr_t, std::shared_ptr<Event>> events_;
};

} // namespace accinte::emulator
