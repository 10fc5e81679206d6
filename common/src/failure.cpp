#include "failure.h"

#include <algorithm>

namespace accinte::emulator {

namespace {

/** The message of the failure last reported to this thread. */
thread_local std::string lastFailureMessage;

/** What a report of a failure carried through a wait says first. */
constexpr const char* kInheritedPrefix =
    "waited for an event of a stream whose earlier work failed: ";

} // namespace

void setLastFailureMessage(std::string message) {
  lastFailureMessage = std::move(message);
}

void carry(CarriedFailures& carried, CarriedFailure failure) {
  carried.erase(std::remove_if(carried.begin(), carried.end(),
                               [](const CarriedFailure& entry) {
                                 return entry.failure->isReported();
                               }),
                carried.end());
  if (failure.failure->isReported() || carried.size() >= kMaxCarriedFailures) {
    return;
  }
  for (const CarriedFailure& entry : carried) {
    if (entry.failure == failure.failure) {
      return;
    }
  }
  carried.push_back(std::move(failure));
}

CarriedFailures unreported(const CarriedFailures& carried) {
  CarriedFailures result;
  for (const CarriedFailure& entry : carried) {
    if (!entry.failure->isReported()) {
      result.push_back(entry);
    }
  }
  return result;
}

// LITERALINCLUDE START: EMULATOR_FAILURE_REPORT
accinteError_t report(const CarriedFailures& carried) {
  const CarriedFailure* first = nullptr;
  for (const CarriedFailure& entry : carried) {
    // NB: claimed one by one, atomically: two threads that synchronize two
    // carriers of the same failure at once cannot both report it.
    const bool claimed = entry.failure->claim(); // LITERALINCLUDE EMPHASIZE
    if (claimed && first == nullptr) {
      first = &entry;
    }
  }
  if (first == nullptr) {
    return accinteSuccess;
  }
  lastFailureMessage =
      (first->inherited ? kInheritedPrefix : "") + first->failure->message();
  return accinteErrorLaunchFailure;
}
// LITERALINCLUDE END: EMULATOR_FAILURE_REPORT

} // namespace accinte::emulator

const char* accinteGetLastFailureMessage(void) {
  return accinte::emulator::lastFailureMessage.c_str();
}
