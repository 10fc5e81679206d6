#include "telemetry.h"

#include "config.h"
#include "lifecycle.h"
#include "trace.h"

#include <accinte/runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>

namespace accinte::emulator {

namespace {

// LITERALINCLUDE START: EMULATOR_BUSY_TIME
/** The sample period is kept in buckets of this many nanoseconds (10 ms). */
constexpr int64_t kBucketNs = 10'000'000;
/** The number of buckets of one sample period. */
constexpr int64_t kBucketCount =
    int64_t{ACCINTE_UTILIZATION_SAMPLE_PERIOD_MS} * 1'000'000 / kBucketNs;
static_assert(kBucketCount * kBucketNs ==
                  int64_t{ACCINTE_UTILIZATION_SAMPLE_PERIOD_MS} * 1'000'000,
              "the sample period is a whole number of buckets");

/**
 * When one kind of work (kernels, or memory operations) kept one device busy
 * during the most recent sample period.
 *
 * Work that overlaps, on several streams, is counted once: a count of the
 * operations running says when the device turns busy (0 to 1) and idle again
 * (1 to 0), and only these busy intervals, disjoint by construction, are
 * recorded. A finished interval is added to the buckets of the 10 ms it
 * covers; a ring of one sample period's buckets forgets the older ones
 * without ever being swept. The interval still open is added when asked.
 */
class BusyTime {
 public:
  // LITERALINCLUDE START: EMULATOR_BUSY_TRANSITIONS
  /** Notes one more operation running from `now`. */
  void begin(int64_t now) {
    if (running_++ == 0) {
      busySince_ = now;
    }
  }

  /** Notes that one operation stopped running at `now`. */
  void end(int64_t now) {
    if (--running_ == 0) {
      add(busySince_, now);
    }
  }
  // LITERALINCLUDE END: EMULATOR_BUSY_TRANSITIONS

  /** The busy nanoseconds from `from` (the start of a bucket no older than
   * the ring holds) to `now`. */
  int64_t busyBetween(int64_t from, int64_t now) const {
    int64_t busy = 0;
    for (const Bucket& bucket : buckets_) {
      if (bucket.index >= from / kBucketNs) {
        busy += bucket.busyNs;
      }
    }
    if (running_ > 0) {
      busy += now - std::max(busySince_, from);
    }
    return busy;
  }

 private:
  /** Adds the busy interval [begin, end] to the buckets it covers. */
  void add(int64_t begin, int64_t end) {
    // NB: only the buckets a sample period ending now can still see: a long
    // kernel costs at most one ring's worth of buckets.
    begin = std::max(begin, (end / kBucketNs - kBucketCount + 1) * kBucketNs);
    for (int64_t index = begin / kBucketNs; index <= end / kBucketNs; ++index) {
      Bucket& bucket = buckets_[static_cast<size_t>(index % kBucketCount)];
      if (bucket.index != index) {
        bucket = Bucket{index, 0}; // A bucket of an older period.
      }
      bucket.busyNs += std::min(end, (index + 1) * kBucketNs) -
                       std::max(begin, index * kBucketNs);
    }
  }

  struct Bucket {
    /** Which 10 ms of the clock: the time divided by kBucketNs. */
    int64_t index = -1;
    /** The busy nanoseconds within them. */
    int64_t busyNs = 0;
  };
  std::array<Bucket, kBucketCount> buckets_{};
  /** The number of operations running now. */
  int running_ = 0;
  /** When the running ones made the device busy, if running_ > 0. */
  int64_t busySince_ = 0;
};
// LITERALINCLUDE END: EMULATOR_BUSY_TIME

/** What one device has been busy with. */
struct DeviceBusyTime {
  std::mutex mutex;
  BusyTime kernels;
  BusyTime memory;
};

/** Every device's busy time.
 *
 * NB: leaked on purpose, as the other registries: a worker detached at
 * exit may still finish an operation after static destructors have run. */
DeviceBusyTime& deviceBusyTime(int device) {
  static auto* devices = new std::array<DeviceBusyTime, kMaxDeviceCount>();
  return (*devices)[static_cast<size_t>(device)];
}

int64_t now() {
  return static_cast<int64_t>(activityNow());
}

/** Calls `fn(busyTime, now)` for the busy time of each device of `mark`
 * that counts its kind. */
template <typename Fn>
void forEachDevice(const BusyMark& mark, Fn fn) {
  if (mark.kind == BusyKind::kNone) {
    return;
  }
  for (int device : mark.devices) {
    if (device < 0) {
      continue;
    }
    DeviceBusyTime& busy = deviceBusyTime(device);
    std::lock_guard<std::mutex> lock(busy.mutex);
    // NB: the clock is read under the lock, so the times one device's
    // intervals are noted at never run backwards.
    fn(mark.kind == BusyKind::kKernel ? busy.kernels : busy.memory, now());
  }
}

/** The percentage of `busyNs` in `spanNs`, rounded down. */
unsigned int percent(int64_t busyNs, int64_t spanNs) {
  return static_cast<unsigned int>(busyNs * 100 / spanNs);
}

} // namespace

BusyScope::BusyScope(const BusyMark& mark) : mark_(mark) {
  forEachDevice(mark_, [](BusyTime& busy, int64_t at) { busy.begin(at); });
}

BusyScope::~BusyScope() {
  forEachDevice(mark_, [](BusyTime& busy, int64_t at) { busy.end(at); });
}

UtilizationRates utilizationRates(int device) {
  DeviceBusyTime& busy = deviceBusyTime(device);
  std::lock_guard<std::mutex> lock(busy.mutex);
  const int64_t at = now();
  // The sample period: from the start of the oldest bucket the ring holds to
  // now, between 0.99 and 1 second.
  const int64_t from = (at / kBucketNs - kBucketCount + 1) * kBucketNs;
  UtilizationRates rates;
  rates.kernelPercent = percent(busy.kernels.busyBetween(from, at), at - from);
  rates.memoryPercent = percent(busy.memory.busyBetween(from, at), at - from);
  return rates;
}

} // namespace accinte::emulator

using namespace accinte::emulator;

namespace {

// LITERALINCLUDE START: EMULATOR_TELEMETRY_MODEL
/** The emulated clock of the multiprocessors, which never changes. */
constexpr unsigned int kClockMhz = 1500;
/** The temperature of an idle device, in degrees Celsius. */
constexpr unsigned int kIdleCelsius = 30;
/** The power an idle device draws, in milliwatts. */
constexpr unsigned int kIdleMilliwatts = 40'000;

/** The temperature: 0.4 degree more per percent of kernel utilization and
 * 0.1 per percent of memory utilization, so 80 degrees when both are full.
 */
unsigned int temperature(const UtilizationRates& rates) {
  return kIdleCelsius + (4 * rates.kernelPercent + rates.memoryPercent) / 10;
}

/** The power: 1.6 W more per percent of kernel utilization and 0.4 W per
 * percent of memory utilization, so 240 W when both are full. */
unsigned int powerDraw(const UtilizationRates& rates) {
  return kIdleMilliwatts + 1'600 * rates.kernelPercent +
         400 * rates.memoryPercent;
}
// LITERALINCLUDE END: EMULATOR_TELEMETRY_MODEL

/** The checks every telemetry call starts with. */
accinteError_t checkTelemetryCall(int device, const void* out) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (out == nullptr) {
    return accinteErrorInvalidValue;
  }
  return checkDevice(device);
}

} // namespace

accinteError_t accinteDeviceGetUtilizationRates(int device,
                                                unsigned int* kernelPercent,
                                                unsigned int* memoryPercent) {
  ACCINTE_RETURN_IF_ERROR(checkTelemetryCall(
      device, kernelPercent != nullptr ? static_cast<const void*>(kernelPercent)
                                       : memoryPercent));
  const UtilizationRates rates = utilizationRates(device);
  if (kernelPercent != nullptr) {
    *kernelPercent = rates.kernelPercent;
  }
  if (memoryPercent != nullptr) {
    *memoryPercent = rates.memoryPercent;
  }
  return accinteSuccess;
}

accinteError_t accinteDeviceGetClockRate(int device, unsigned int* mhz) {
  ACCINTE_RETURN_IF_ERROR(checkTelemetryCall(device, mhz));
  *mhz = kClockMhz;
  return accinteSuccess;
}

accinteError_t accinteDeviceGetTemperature(int device, unsigned int* celsius) {
  ACCINTE_RETURN_IF_ERROR(checkTelemetryCall(device, celsius));
  *celsius = temperature(utilizationRates(device));
  return accinteSuccess;
}

accinteError_t accinteDeviceGetPowerUsage(int device,
                                          unsigned int* milliwatts) {
  ACCINTE_RETURN_IF_ERROR(checkTelemetryCall(device, milliwatts));
  *milliwatts = powerDraw(utilizationRates(device));
  return accinteSuccess;
}
