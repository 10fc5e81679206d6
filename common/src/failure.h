#pragma once

#include <accinte/runtime.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace accinte::emulator {

/**
 * One failed operation (a kernel, a copy or a memset): what it said, and
 * whether anyone has been told.
 *
 * NB: one object, shared by the stream it failed on and by every event
 * record and stream that waited for it, so that the failure is reported
 * exactly once, by whichever of them the user synchronizes or queries first,
 * and by none of them afterwards.
 */
class Failure {
 public:
  explicit Failure(std::string message) : message_(std::move(message)) {}
  Failure(const Failure&) = delete;
  Failure& operator=(const Failure&) = delete;

  /** What the operation said (the exception's what(), or its code). */
  const std::string& message() const {
    return message_;
  }
  /** True once a synchronize or query has reported it. */
  bool isReported() const {
    return reported_.load();
  }
  /** Marks it reported; true for the one caller that did so. */
  bool claim() {
    return !reported_.exchange(true);
  }

 private:
  const std::string message_;
  std::atomic<bool> reported_{false};
};

/** A failure as a stream or an event record carries it. */
struct CarriedFailure {
  std::shared_ptr<Failure> failure;
  /** True if carried because of a wait for failed work elsewhere; the report
   * then says so. */
  bool inherited = false;
};

/** The unreported failures a stream or an event record carries, oldest
 * first. */
using CarriedFailures = std::vector<CarriedFailure>;

/** How many unreported failures one stream keeps. A synchronize reports
 * them all at once with the first one's message, so more would change
 * nothing but memory; later ones are dropped. */
constexpr size_t kMaxCarriedFailures = 16;

/** Adds `failure` to `carried`, unless it is reported or already there;
 * forgets the reported ones first. */
void carry(CarriedFailures& carried, CarriedFailure failure);

/** The failures of `carried` that nobody has reported yet. */
CarriedFailures unreported(const CarriedFailures& carried);

/**
 * Reports the failures of `carried` that nobody has reported yet: claims them
 * all and, if there was one, tells the calling thread the first one's message
 * and returns ::accinteErrorLaunchFailure; else returns ::accinteSuccess.
 */
accinteError_t report(const CarriedFailures& carried);

/** Makes `message` what accinteGetLastFailureMessage() tells the calling
 * thread. */
void setLastFailureMessage(std::string message);

} // namespace accinte::emulator
