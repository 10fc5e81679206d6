#pragma once

#include "failure.h"
#include "handle_table.h"
#include "spin.h"

#include <accinte/runtime.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

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
  /** A record that the worker publishing its CPU in `recorderCpu` (if not
   * null) completes; wait() spins only while that worker runs on another
   * CPU (spinUntil()). */
  explicit EventCompletion(std::shared_ptr<const CpuSlot> recorderCpu = {})
      : recorderCpu_(std::move(recorderCpu)) {}
  /** Marks the record complete, stamping the time, and wakes waiters.
   * `failures` are those the recording stream carried, unreported, when it
   * reached the record. */
  void complete(CarriedFailures failures);
  /** The failures complete() was given (reported ones included). */
  CarriedFailures failures();
  /** True once complete() ran. */
  bool isComplete();
  /** Blocks until complete() ran: spins for the process's spin bound
   * (spinUntil()), then sleeps. */
  void wait();
  /** When complete() ran; meaningful only once isComplete(). */
  std::chrono::steady_clock::time_point completedAt();

 private:
  const std::shared_ptr<const CpuSlot> recorderCpu_;
  std::mutex mutex_;
  std::condition_variable completed_;
  /** Written under mutex_ (a release store), after the time and the
   * failures; read without it (an acquire load). */
  std::atomic<bool> isComplete_{false};
  /** How many threads sleep on completed_: complete() wakes them only if
   * there are any. Needs mutex_. */
  int sleepingWaiters_ = 0;
  std::chrono::steady_clock::time_point completedAt_;
  CarriedFailures failures_;
};

class Stream;
struct CapturedRecord;
struct IpcEventHandleData;
struct SharedEventPage;

/**
 * The records of an interprocess event as every process that has the event
 * sees them: a page of a memfd that each maps (SharedEventPage). The
 * exporting process's events all share one memfd, a page each
 * (SharedEventPool in event.cpp).
 *
 * NB: shared (not owned by the event) for the same reason as
 * EventCompletion: an enqueued record or wait may outlive the event.
 */
class SharedEventState {
 public:
  /** Takes a new page (the exporting process) into `state`; fails as
   * ipcResourceError() says if the pool has none free and cannot grow. */
  static accinteError_t create(std::shared_ptr<SharedEventState>* state);
  /** Maps the page of another process's handle; nullptr if the handle is
   * malformed or its event or process is gone. */
  static std::shared_ptr<SharedEventState> open(const IpcEventHandleData& data);
  ~SharedEventState();
  SharedEventState(const SharedEventState&) = delete;
  SharedEventState& operator=(const SharedEventState&) = delete;

  /** Starts a record by this process and writes its generation. If all
   * kSharedEventSlots records before it are still outstanding, first blocks
   * until the oldest completes; fails with ::accinteErrorNotPermitted if
   * that would block a stream's worker, and with
   * ::accinteErrorIpcPeerExited if the oldest never will complete (its
   * recorder exited). */
  accinteError_t startRecord(uint64_t* generation);
  /** Marks generation `generation`, and no other, complete and wakes every
   * waiting process. */
  void complete(uint64_t generation);
  /** The generation of the latest record of any process; 0 if none. */
  uint64_t latest();
  /** ::accinteSuccess once the record `generation` completed (whatever
   * became of the others), ::accinteErrorIpcPeerExited if it never will
   * (its recorder exited), else ::accinteErrorNotReady. */
  accinteError_t query(uint64_t generation);
  /** Blocks until query(`generation`) is not ::accinteErrorNotReady and
   * returns it. */
  accinteError_t wait(uint64_t generation);

  /** The descriptor of the memfd that holds the page (-1 in an importing
   * process). */
  int fd() const {
    return fd_;
  }
  /** The nonce in the memfd's name. */
  uint64_t nonce() const {
    return nonce_;
  }
  /** Where the page starts in the memfd, in bytes. */
  uint64_t offset() const {
    return offset_;
  }
  /** The event's identity on its page (SharedEventPage::eventId). */
  uint64_t eventId() const {
    return eventId_;
  }

 private:
  SharedEventState(SharedEventPage* page, int fd, uint64_t nonce,
                   uint64_t offset, uint64_t eventId)
      : page_(page),
        fd_(fd),
        nonce_(nonce),
        offset_(offset),
        eventId_(eventId) {}

  /** True once the record `generation` completed. */
  bool isComplete(uint64_t generation);
  /** While the slot of a new record still holds the outstanding record
   * `state`: waits until it changes, a while at most. */
  accinteError_t waitForSlot(uint64_t slotIndex, uint64_t state);

  SharedEventPage* const page_;
  /** The pool's memfd in the exporting process, whose page goes back to
   * the pool (SharedEventPool); -1 in an importer, whose page is a mapping
   * of its own. */
  const int fd_;
  const uint64_t nonce_;
  const uint64_t offset_;
  const uint64_t eventId_;
};

/** Enqueues on `stream` the completion of `record`: it completes when the
 * stream reaches it, and carries the failures the stream carries then. */
void enqueueRecord(Stream& stream, std::shared_ptr<EventCompletion> record);

/** Enqueues on `stream` a wait for `record`, after which `stream` carries
 * the failures `record` carries too. */
void enqueueWait(Stream& stream, std::shared_ptr<EventCompletion> record);

/** Enqueues on `stream` the completion of a record of an interprocess
 * event: `record` (this process's view, with failures) and generation
 * `generation` of `shared`. */
void enqueueInterprocessRecord(Stream& stream,
                               std::shared_ptr<EventCompletion> record,
                               std::shared_ptr<SharedEventState> shared,
                               uint64_t generation);

/** Enqueues on `stream` a wait for generation `generation` of `shared`; if
 * its recording process exits first, the wait fails and `stream` carries
 * the failure. */
void enqueueInterprocessWait(Stream& stream,
                             std::shared_ptr<SharedEventState> shared,
                             uint64_t generation);

/** What a query, synchronize or stream wait of an event waits for: nothing,
 * a record of this process (`local`), or a generation of an interprocess
 * event's shared records made by another process. */
struct RecordTarget {
  /** A record of this process, with its failures. */
  std::shared_ptr<EventCompletion> local;
  /** Set when waiting on the shared records instead. */
  std::shared_ptr<SharedEventState> shared;
  /** The generation of `shared` to wait for. */
  uint64_t generation = 0;
  /** Set instead when the latest record was made on a capturing stream: a
   * point of that capture, which nothing outside it can wait for. */
  std::shared_ptr<const CapturedRecord> captured;
};

/** An event: its flags and its most recent record, if any. */
class Event {
 public:
  /** Creates an event with `accinteEvent*` flags; `shared` is the shared
   * state of an interprocess event (`opened` if from another process's
   * handle). */
  explicit Event(unsigned int flags,
                 std::shared_ptr<SharedEventState> shared = nullptr,
                 bool opened = false)
      : flags_(flags), shared_(std::move(shared)), opened_(opened) {}

  /** False if created with ::accinteEventDisableTiming. */
  bool hasTiming() const {
    return (flags_ & accinteEventDisableTiming) == 0;
  }

  /** False if created with ::accinteEventDisableFailureReport. */
  bool reportsFailures() const {
    return (flags_ & accinteEventDisableFailureReport) == 0;
  }

  /** The shared records of an interprocess event, else nullptr. */
  const std::shared_ptr<SharedEventState>& shared() const {
    return shared_;
  }

  /** True for an event opened from another process's handle. */
  bool isOpened() const {
    return opened_;
  }

  /** Starts a new record, made by the stream whose worker publishes its CPU
   * in `recorderCpu`, and writes its completion in `record`; for an
   * interprocess event, also a new generation of the shared records, in
   * `generation` (see SharedEventState::startRecord() for its errors). */
  accinteError_t startRecord(std::shared_ptr<const CpuSlot> recorderCpu,
                             std::shared_ptr<EventCompletion>* record,
                             uint64_t* generation = nullptr);

  /** Makes `record`, made on a capturing stream, the event's latest. */
  void recordInCapture(std::shared_ptr<const CapturedRecord> record);

  /** The most recent record of this process, or nullptr if never recorded
   * (or last recorded in a capture). */
  std::shared_ptr<EventCompletion> latestRecord();

  /** What a wait for the event's most recent record waits for: this
   * process's latest record, unless another process recorded the
   * interprocess event since. */
  RecordTarget latestTarget();

 private:
  const unsigned int flags_;
  const std::shared_ptr<SharedEventState> shared_;
  const bool opened_;
  std::mutex mutex_;
  std::shared_ptr<EventCompletion> latestRecord_;
  /** The shared generation of latestRecord_ (interprocess events). */
  uint64_t latestGeneration_ = 0;
  /** The latest record if it was made in a capture (then latestRecord_ is
   * null). */
  std::shared_ptr<const CapturedRecord> capturedRecord_;
};

/** Every live event of the process, by handle. */
class EventRegistry {
 public:
  /** The process-wide registry (intentionally never destroyed). */
  static EventRegistry& instance();

  /** Creates an event and writes its handle. */
  accinteError_t create(unsigned int flags, accinteEvent_t* handle);

  /** Registers an event opened from another process's handle and writes
   * its handle. */
  accinteError_t add(std::shared_ptr<Event> event, accinteEvent_t* handle);

  /** Resolves a handle; NULL or unknown gives
   * ::accinteErrorInvalidResourceHandle. */
  accinteError_t resolve(accinteEvent_t handle, std::shared_ptr<Event>* event);

  /** Unregisters an event; outstanding records and waits are unaffected. */
  accinteError_t destroy(accinteEvent_t handle);

 private:
  EventRegistry() = default;

  HandleTable<accinteEvent_t, Event> events_;
};

} // namespace accinte::emulator
