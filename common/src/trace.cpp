#include "trace.h"

#include "lifecycle.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace accinte::emulator {

namespace detail {
std::atomic<uint64_t> activeTraceSession{0};
} // namespace detail

namespace {

// LITERALINCLUDE START: EMULATOR_TRACE_BUFFER
/**
 * The records of the tracing session, bounded.
 *
 * NB: one lock for the stream workers that add records and the host threads
 * that take them. It is taken only while tracing is on, once per record, and
 * held for a copy of one record: the workers of different streams never wait
 * for one another for longer than that.
 */
class TraceBuffer {
 public:
  /** The process-wide buffer (intentionally never destroyed: a worker may
   * still finish work while static objects are destroyed at exit). */
  static TraceBuffer& instance() {
    static TraceBuffer* buffer = new TraceBuffer();
    return *buffer;
  }

  void enable(size_t capacity) {
    std::lock_guard<std::mutex> lock(mutex_);
    session_ = ++lastSession_;
    capacity_ = capacity;
    std::deque<accinteActivityRecord>().swap(records_);
    dropped_ = 0;
    detail::activeTraceSession.store(session_, std::memory_order_relaxed);
  }

  void disable() {
    std::lock_guard<std::mutex> lock(mutex_);
    session_ = 0;
    detail::activeTraceSession.store(0, std::memory_order_relaxed);
  }

  // LITERALINCLUDE START: EMULATOR_TRACE_COMMIT
  void commit(const PendingActivity& activity) {
    std::lock_guard<std::mutex> lock(mutex_);
    // NB: checked under the lock, so that once disable() (or a new enable())
    // has returned, nothing of the session it ended is added.
    if (activity.session != session_) {
      return;
    }
    if (records_.size() >= capacity_) {
      ++dropped_; // LITERALINCLUDE EMPHASIZE
      return;
    }
    try {
      records_.push_back(activity.record);
    } catch (const std::bad_alloc&) {
      ++dropped_;
    }
  }
  // LITERALINCLUDE END: EMULATOR_TRACE_COMMIT

  size_t take(accinteActivityRecord* records, size_t capacity) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t count = std::min(capacity, records_.size());
    std::copy_n(records_.begin(), count, records);
    records_.erase(records_.begin(), records_.begin() + count);
    return count;
  }

  uint64_t dropped() {
    std::lock_guard<std::mutex> lock(mutex_);
    return dropped_;
  }

 private:
  TraceBuffer() = default;

  std::mutex mutex_;
  /** The session in progress, or 0. */
  uint64_t session_ = 0;
  uint64_t lastSession_ = 0;
  size_t capacity_ = 0;
  std::deque<accinteActivityRecord> records_;
  uint64_t dropped_ = 0;
};
// LITERALINCLUDE END: EMULATOR_TRACE_BUFFER

/** The runtime's correlation ids: one per traced call, never 0. */
std::atomic<uint64_t> nextCorrelationId{1};

/** The calling thread's external correlation ids, innermost last. */
thread_local std::vector<uint64_t> externalCorrelationIds;

/** The calling thread's kernel names, innermost last. */
thread_local std::vector<std::string> kernelNames;

uint32_t currentThreadId() {
  thread_local const auto id = static_cast<uint32_t>(syscall(SYS_gettid));
  return id;
}

void copyName(char (&destination)[ACCINTE_ACTIVITY_NAME_SIZE],
              const char* name) {
  std::strncpy(destination, name, sizeof(destination) - 1);
  destination[sizeof(destination) - 1] = '\0';
}

} // namespace

uint64_t activityNow() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

void commitActivity(const PendingActivity& activity) {
  TraceBuffer::instance().commit(activity);
}

// LITERALINCLUDE START: EMULATOR_TRACED_CALL
void TracedCall::begin(uint64_t session, const char* name) {
  call_ = std::make_unique<PendingActivity>();
  call_->session = session;
  accinteActivityRecord& record = call_->record;
  record.kind = accinteActivityKindRuntime;
  record.memcpyKind = accinteActivityMemcpyNone;
  record.device = currentDevice();
  record.srcDevice = record.dstDevice = -1;
  record.threadId = currentThreadId();
  record.stream = nullptr;
  record.correlationId =
      nextCorrelationId.fetch_add(1); // LITERALINCLUDE EMPHASIZE
  // LITERALINCLUDE EMPHASIZE NEXT 2
  record.externalCorrelationId =
      externalCorrelationIds.empty() ? 0 : externalCorrelationIds.back();
  copyName(record.name, name);
  record.start = activityNow();
}

void TracedCall::end() {
  call_->record.end = activityNow();
  commitActivity(*call_);
}

std::unique_ptr<PendingActivity> TracedCall::work(
    accinteActivityKind kind, accinteActivityMemcpyKind memcpyKind,
    const char* name, accinteStream_t stream, int device, int srcDevice,
    int dstDevice, uint64_t bytes) const {
  // NB: the work inherits the call's session and ids, taken on the thread
  // that enqueues it; the worker that runs it adds only the times.
  auto work = std::make_unique<PendingActivity>(*call_);
  accinteActivityRecord& record = work->record;
  record.kind = kind;
  record.memcpyKind = memcpyKind;
  record.device = device;
  record.srcDevice = srcDevice;
  record.dstDevice = dstDevice;
  record.stream = stream;
  record.bytes = bytes;
  if (name == nullptr) {
    name = kernelNames.empty() ? "kernel" : kernelNames.back().c_str();
  }
  copyName(record.name, name);
  record.start = record.end = 0;
  return work;
}
// LITERALINCLUDE END: EMULATOR_TRACED_CALL

} // namespace accinte::emulator

using namespace accinte::emulator;

accinteError_t accinteActivityEnable(size_t capacity) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (capacity > ACCINTE_ACTIVITY_MAX_CAPACITY) {
    return accinteErrorInvalidValue;
  }
  // NB: the buffer's lock is runtime state a forked child cannot trust.
  markInitialised();
  TraceBuffer::instance().enable(
      capacity == 0 ? ACCINTE_ACTIVITY_DEFAULT_CAPACITY : capacity);
  return accinteSuccess;
}

accinteError_t accinteActivityDisable(void) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  TraceBuffer::instance().disable();
  return accinteSuccess;
}

accinteError_t accinteActivityIsEnabled(int* enabled) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (enabled == nullptr) {
    return accinteErrorInvalidValue;
  }
  *enabled = traceSession() != 0 ? 1 : 0;
  return accinteSuccess;
}

accinteError_t accinteActivityTake(accinteActivityRecord* records,
                                   size_t capacity, size_t* count) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (count == nullptr || (records == nullptr && capacity > 0)) {
    return accinteErrorInvalidValue;
  }
  *count = TraceBuffer::instance().take(records, capacity);
  return accinteSuccess;
}

accinteError_t accinteActivityGetDropped(uint64_t* dropped) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (dropped == nullptr) {
    return accinteErrorInvalidValue;
  }
  *dropped = TraceBuffer::instance().dropped();
  return accinteSuccess;
}

accinteError_t accinteActivityPushExternalCorrelationId(uint64_t id) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (id == 0) {
    return accinteErrorInvalidValue;
  }
  try {
    externalCorrelationIds.push_back(id);
  } catch (const std::bad_alloc&) {
    return accinteErrorHostMemoryAllocation;
  }
  return accinteSuccess;
}

accinteError_t accinteActivityPopExternalCorrelationId(uint64_t* id) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (externalCorrelationIds.empty()) {
    return accinteErrorInvalidValue;
  }
  if (id != nullptr) {
    *id = externalCorrelationIds.back();
  }
  externalCorrelationIds.pop_back();
  return accinteSuccess;
}

accinteError_t accinteActivityPushName(const char* name) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (name == nullptr) {
    return accinteErrorInvalidValue;
  }
  try {
    kernelNames.emplace_back(name);
  } catch (const std::bad_alloc&) {
    return accinteErrorHostMemoryAllocation;
  }
  return accinteSuccess;
}

accinteError_t accinteActivityPopName(void) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (kernelNames.empty()) {
    return accinteErrorInvalidValue;
  }
  kernelNames.pop_back();
  return accinteSuccess;
}

accinteError_t accinteActivityGetTimestamp(uint64_t* timestamp) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (timestamp == nullptr) {
    return accinteErrorInvalidValue;
  }
  *timestamp = activityNow();
  return accinteSuccess;
}
