#pragma once

#include <accinte/runtime.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace accinte::emulator {

namespace detail {
/** The current tracing session, or 0 when tracing is off; see
 * traceSession(). Written under the trace buffer's lock, read without it. */
extern std::atomic<uint64_t> activeTraceSession;
} // namespace detail

/**
 * The tracing session in progress, or 0 when tracing is off.
 *
 * NB: this relaxed load is all that tracing costs a runtime call when it is
 * off. Relaxed is enough: it only decides whether to prepare a record; the
 * record is stored under the buffer's lock, which checks the session again
 * (commitActivity()).
 */
inline uint64_t traceSession() {
  return detail::activeTraceSession.load(std::memory_order_relaxed);
}

/** Now, on the records' clock: nanoseconds of CLOCK_MONOTONIC. */
uint64_t activityNow();

/** A record being made, and the session it belongs to. */
struct PendingActivity {
  uint64_t session = 0;
  accinteActivityRecord record{};
};

/** Stores `activity.record` if its session is still the current one; counts
 * it dropped if the buffer is full. */
void commitActivity(const PendingActivity& activity);

/**
 * Traces one runtime call, from its construction (the call's entry) to its
 * destruction (the return), if tracing is on at entry: the call's own
 * ::accinteActivityKindRuntime record, and the correlation ids of the work it
 * enqueues (work()).
 *
 * NB: construct it after checkUsable(): in a forked child the trace buffer's
 * lock may have been held by a thread that does not exist there.
 */
class TracedCall {
 public:
  /** `name` is the runtime function's, a string literal. */
  explicit TracedCall(const char* name) {
    const uint64_t session = traceSession();
    if (session != 0) {
      begin(session, name);
    }
  }
  ~TracedCall() {
    if (call_) {
      end();
    }
  }
  TracedCall(const TracedCall&) = delete;
  TracedCall& operator=(const TracedCall&) = delete;

  /** True if the call is traced. */
  bool on() const {
    return call_ != nullptr;
  }

  /**
   * The record of work this call enqueues on `stream` of `device`, to be
   * completed by the worker that runs it (Operation::setActivity()). Only
   * when on(). `name` is copied; NULL (a kernel without a name) takes the
   * top of the calling thread's name stack, or "kernel".
   */
  std::unique_ptr<PendingActivity> work(accinteActivityKind kind,
                                        accinteActivityMemcpyKind memcpyKind,
                                        const char* name,
                                        accinteStream_t stream, int device,
                                        int srcDevice, int dstDevice,
                                        uint64_t bytes) const;

 private:
  void begin(uint64_t session, const char* name);
  void end();

  /** The call's own record; null when not traced. */
  std::unique_ptr<PendingActivity> call_;
};

} // namespace accinte::emulator
