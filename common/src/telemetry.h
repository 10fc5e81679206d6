#pragma once

#include <accinte/runtime.h>

#include <cstdint>

namespace accinte::emulator {

/** What a stream operation keeps busy while it runs, for the utilization
 * rates (accinteDeviceGetUtilizationRates()). */
enum class BusyKind : uint8_t {
  /** Nothing: an event record or a wait. */
  kNone,
  /** A device's multiprocessors: a kernel. */
  kKernel,
  /** A device's memory: a copy or a memset. */
  kMemory,
};

/** The kind of work an operation does and the devices it does it on. */
struct BusyMark {
  /** What the operation keeps busy. */
  BusyKind kind = BusyKind::kNone;
  /** The devices it keeps busy, -1 for none: a copy across devices names
   * both, other work its stream's device. */
  int devices[2] = {-1, -1};
};

/**
 * Counts the work of `mark` as running on its devices from construction to
 * destruction.
 *
 * NB: this is all the utilization rates cost: a clock read and a short
 * lock per device at the start and at the end of each kernel, copy and
 * memset, nothing for other operations and nothing at all while the device
 * is idle (no sampling thread).
 */
class BusyScope {
 public:
  explicit BusyScope(const BusyMark& mark);
  ~BusyScope();
  BusyScope(const BusyScope&) = delete;
  BusyScope& operator=(const BusyScope&) = delete;

 private:
  const BusyMark mark_;
};

/** The utilization rates of a device, in percent. */
struct UtilizationRates {
  /** Share of the sample period during which a kernel was running. */
  unsigned int kernelPercent = 0;
  /** Share of the sample period during which a copy or memset was. */
  unsigned int memoryPercent = 0;
};

/** The utilization rates of `device` (checked by the caller) over the
 * sample period that ends now. */
UtilizationRates utilizationRates(int device);

} // namespace accinte::emulator
