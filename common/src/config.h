#pragma once

#include <accinte/runtime.h>

#include <cstddef>
#include <optional>
#include <string_view>

namespace accinte::emulator {

/** The most devices `ACCINTE_DEVICE_COUNT` may ask for. */
constexpr int kMaxDeviceCount = 16;

/** How long a wait spins before it blocks, in microseconds, unless
 * `ACCINTE_SPIN_US` says otherwise (see Config::spinMicroseconds). */
constexpr int kDefaultSpinMicroseconds = 50;

/** The longest spin `ACCINTE_SPIN_US` may ask for: one second. */
constexpr int kMaxSpinMicroseconds = 1'000'000;

/**
 * The runtime's configuration, read from the environment once per process.
 *
 * NB: the configuration is read lazily (at the first call that needs the
 * devices) rather than at library load, so that a program may still set the
 * environment variables after loading the library, and so that a malformed
 * value turns into an error code instead of a failure to load.
 */
struct Config {
  /** ::accinteSuccess, or ::accinteErrorInitialization if a value is bad. */
  accinteError_t status = accinteSuccess;
  /** Number of devices (`ACCINTE_DEVICE_COUNT`). */
  int deviceCount = 2;
  /** Capacity of each device in bytes (`ACCINTE_DEVICE_MEMORY`). */
  size_t deviceMemory = size_t{8} << 30;
  /** How long a stream's worker with an empty queue, and a host thread
   * waiting for a stream or an event, spin before they block, in
   * microseconds (`ACCINTE_SPIN_US`); 0 never spins. The default is
   * kDefaultSpinMicroseconds, or 0 if the process may run on one CPU only. */
  int spinMicroseconds = kDefaultSpinMicroseconds;
};

/** Returns the process's configuration, parsing the environment on first
 * use. Thread-safe. */
const Config& config();

/** Parses a device count: a decimal integer in [1, 16]. */
std::optional<int> parseDeviceCount(std::string_view text);

/** Parses a spin bound in microseconds: a decimal integer in
 * [0, kMaxSpinMicroseconds]. */
std::optional<int> parseSpinMicroseconds(std::string_view text);

/** Parses a byte size: a positive decimal integer with an optional K, M or G
 * suffix (case-insensitive, powers of 1024). Overflow is an error. */
std::optional<size_t> parseByteSize(std::string_view text);

} // namespace accinte::emulator
