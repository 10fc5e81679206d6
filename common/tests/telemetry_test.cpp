// Device telemetry: the utilization rates measured by the stream workers, and
// the clock, temperature and power modelled on them.
//
// NB: no assertion depends on how fast the machine is. A rate that must rise
// or fall is polled until it does, within a bound far above the sample
// period; a busy device is held busy by a Gate for as long as the test needs.

#include "test_util.h"

#include <chrono>
#include <thread>
#include <vector>

using accinte::testing::DeviceBuffer;
using accinte::testing::Gate;

namespace {

using Clock = std::chrono::steady_clock;

/** Far longer than the sample period, for every "eventually". */
constexpr std::chrono::seconds kPatience{30};

/** The sample period, and a little more. */
constexpr auto kPastOnePeriod =
    std::chrono::milliseconds(ACCINTE_UTILIZATION_SAMPLE_PERIOD_MS * 3 / 2);

struct Rates {
  unsigned int kernel = 0;
  unsigned int memory = 0;
};

Rates rates(int device) {
  Rates result;
  EXPECT_OK(
      accinteDeviceGetUtilizationRates(device, &result.kernel, &result.memory));
  EXPECT_LE(result.kernel, 100U);
  EXPECT_LE(result.memory, 100U);
  return result;
}

/** Polls `condition` until it holds or kPatience has passed. */
template <typename Condition>
bool eventually(Condition condition) {
  const auto deadline = Clock::now() + kPatience;
  while (!condition()) {
    if (Clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

/**
 * Runs `work` again and again for 200 ms. NB: between two polls of
 * eventually(), which sleeps 10 ms after each, so that the device is busy
 * most of every sample period: one 32 MiB copy takes a few milliseconds,
 * and a poll after each would leave the device idle three quarters of the
 * time on a fast machine.
 */
template <typename Work>
void repeatFor200Ms(Work work) {
  const auto until = Clock::now() + std::chrono::milliseconds(200);
  while (Clock::now() < until) {
    work();
  }
}

bool idle(int device) {
  const Rates now = rates(device);
  return now.kernel == 0 && now.memory == 0;
}

TEST(Telemetry, AnIdleDeviceIsIdleAndAtItsIdleValues) {
  // NB: eventually, in case the same process ran other tests just before.
  ASSERT_TRUE(eventually([] { return idle(0) && idle(1); }));
  unsigned int value = 0;
  ASSERT_OK(accinteDeviceGetClockRate(1, &value));
  EXPECT_EQ(value, 1500U);
  ASSERT_OK(accinteDeviceGetTemperature(1, &value));
  EXPECT_EQ(value, 30U);
  ASSERT_OK(accinteDeviceGetPowerUsage(1, &value));
  EXPECT_EQ(value, 40'000U);
}

TEST(Telemetry, ALongKernelRaisesTheKernelRateOfItsDeviceOnly) {
  ASSERT_OK(accinteSetDevice(1));
  Gate gate;
  ASSERT_OK(gate.block(nullptr));
  ASSERT_TRUE(eventually([] {
    const Rates one = rates(1);
    return one.kernel >= 90 && one.memory == 0 && idle(0);
  }));
  // The model: hotter and hungrier with the kernel rate, which only grows
  // while the gate holds.
  unsigned int celsius = 0;
  unsigned int milliwatts = 0;
  unsigned int mhz = 0;
  ASSERT_OK(accinteDeviceGetTemperature(1, &celsius));
  ASSERT_OK(accinteDeviceGetPowerUsage(1, &milliwatts));
  ASSERT_OK(accinteDeviceGetClockRate(1, &mhz));
  EXPECT_GE(celsius, 30U + 4 * 90 / 10);
  EXPECT_LE(celsius, 80U);
  EXPECT_GE(milliwatts, 40'000U + 1'600 * 90);
  EXPECT_LE(milliwatts, 240'000U);
  EXPECT_EQ(mhz, 1500U);
  ASSERT_OK(accinteDeviceGetTemperature(0, &celsius));
  EXPECT_EQ(celsius, 30U);

  // NB: read before the release, so the kernel ends after it.
  const auto released = Clock::now();
  gate.release();
  ASSERT_OK(accinteDeviceSynchronize());
  const Rates after = rates(1);
  // The finished kernel still fills most of the period that just ended,
  // unless this thread was held up for a whole period.
  if (Clock::now() - released < std::chrono::milliseconds(500)) {
    EXPECT_GE(after.kernel, 40U);
  }
  // ... and is forgotten once the period has moved past it.
  EXPECT_TRUE(eventually([] { return idle(1); }));
  // The sample period starts at a 10 ms step: from 0.99 s on.
  EXPECT_GE(
      Clock::now() - released,
      std::chrono::milliseconds(ACCINTE_UTILIZATION_SAMPLE_PERIOD_MS * 9 / 10));
  ASSERT_OK(accinteDeviceGetPowerUsage(1, &milliwatts));
  EXPECT_EQ(milliwatts, 40'000U);
  ASSERT_OK(accinteSetDevice(0));
}

TEST(Telemetry, KernelsOverlappingOnTwoStreamsCountOnce) {
  accinteStream_t second = nullptr;
  ASSERT_OK(accinteStreamCreate(&second));
  Gate gate;
  ASSERT_OK(gate.block(nullptr));
  ASSERT_OK(gate.block(second));
  // Both kernels have run for a whole period: were they added up, the rate
  // would be 200.
  std::this_thread::sleep_for(kPastOnePeriod);
  ASSERT_TRUE(eventually([] { return rates(0).kernel >= 90; }));
  for (int i = 0; i < 20; ++i) {
    EXPECT_LE(rates(0).kernel, 100U);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  gate.release();
  ASSERT_OK(accinteStreamDestroy(second));
  ASSERT_OK(accinteDeviceSynchronize());
}

TEST(Telemetry, KernelsTakingTurnsOnTwoStreamsAddUp) {
  // One kernel after the other on two streams keeps the device busy as much
  // as one kernel would: the busy intervals of both streams are kept.
  accinteStream_t second = nullptr;
  ASSERT_OK(accinteStreamCreate(&second));
  bool reached = false;
  const auto deadline = Clock::now() + kPatience;
  for (int turn = 0; !reached && Clock::now() < deadline; ++turn) {
    Gate gate;
    ASSERT_OK(gate.block(turn % 2 == 0 ? nullptr : second));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    reached = rates(0).kernel >= 50;
    gate.release();
    ASSERT_OK(accinteDeviceSynchronize());
  }
  EXPECT_TRUE(reached);
  ASSERT_OK(accinteStreamDestroy(second));
}

TEST(Telemetry, CopiesAndMemsetsRaiseTheMemoryRate) {
  constexpr size_t kBytes = size_t{32} << 20;
  std::vector<char> host(kBytes, 1);
  DeviceBuffer onZero(kBytes);
  ASSERT_OK(onZero.status());
  ASSERT_OK(accinteSetDevice(1));
  DeviceBuffer onOne(kBytes);
  ASSERT_OK(onOne.status());
  ASSERT_OK(accinteSetDevice(0));

  // To and from the host: the device's memory, not its kernels.
  EXPECT_TRUE(eventually([&] {
    repeatFor200Ms([&] {
      EXPECT_OK(accinteMemcpy(onZero.ptr(), host.data(), kBytes,
                              accinteMemcpyHostToDevice));
      EXPECT_OK(accinteMemcpy(host.data(), onZero.ptr(), kBytes,
                              accinteMemcpyDeviceToHost));
    });
    const Rates zero = rates(0);
    return zero.memory >= 50 && zero.kernel == 0;
  }));
  // Between two devices: both devices' memory.
  EXPECT_TRUE(eventually([&] {
    repeatFor200Ms([&] {
      EXPECT_OK(accinteMemcpy(onOne.ptr(), onZero.ptr(), kBytes,
                              accinteMemcpyDeviceToDevice));
    });
    return rates(0).memory >= 50 && rates(1).memory >= 50;
  }));
  // Memsets.
  EXPECT_TRUE(eventually([&] {
    repeatFor200Ms([&] {
      EXPECT_OK(accinteMemsetAsync(onZero.ptr(), 7, kBytes, nullptr));
      EXPECT_OK(accinteStreamSynchronize(nullptr));
    });
    return rates(0).memory >= 50;
  }));
  // A copy between host buffers, run by device 1's default stream, touches
  // no device's memory: device 1 falls idle while it copies.
  std::vector<char> other(kBytes);
  ASSERT_OK(accinteSetDevice(1));
  EXPECT_TRUE(eventually([&] {
    EXPECT_OK(accinteMemcpy(other.data(), host.data(), kBytes,
                            accinteMemcpyHostToHost));
    return idle(1);
  }));
  ASSERT_OK(accinteSetDevice(0));
}

TEST(Telemetry, BadArgumentsAreRefused) {
  unsigned int value = 0;
  for (int device : {-1, 2}) {
    EXPECT_EQ(accinteDeviceGetUtilizationRates(device, &value, &value),
              accinteErrorInvalidDevice);
    EXPECT_EQ(accinteDeviceGetClockRate(device, &value),
              accinteErrorInvalidDevice);
    EXPECT_EQ(accinteDeviceGetTemperature(device, &value),
              accinteErrorInvalidDevice);
    EXPECT_EQ(accinteDeviceGetPowerUsage(device, &value),
              accinteErrorInvalidDevice);
  }
  EXPECT_EQ(accinteDeviceGetUtilizationRates(0, nullptr, nullptr),
            accinteErrorInvalidValue);
  EXPECT_EQ(accinteDeviceGetClockRate(0, nullptr), accinteErrorInvalidValue);
  EXPECT_EQ(accinteDeviceGetTemperature(0, nullptr), accinteErrorInvalidValue);
  EXPECT_EQ(accinteDeviceGetPowerUsage(0, nullptr), accinteErrorInvalidValue);
  // Either rate alone.
  EXPECT_OK(accinteDeviceGetUtilizationRates(0, &value, nullptr));
  EXPECT_OK(accinteDeviceGetUtilizationRates(0, nullptr, &value));
}

} // namespace
