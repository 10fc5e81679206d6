#include "config.h"

#include <sched.h>

#include <cstdint>
#include <cstdlib>
#include <limits>

namespace accinte::emulator {

namespace {

/** Parses a non-empty run of decimal digits; nullopt on anything else or on
 * overflow. */
std::optional<uint64_t> parseDecimal(std::string_view digits) {
  if (digits.empty()) {
    return std::nullopt;
  }
  uint64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      return std::nullopt;
    }
    value = value * 10 + digit;
  }
  return value;
}

/** Reads an environment variable; an unset or empty variable means "use the
 * default". */
std::optional<std::string_view> readEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || value[0] == '\0') {
    return std::nullopt;
  }
  return std::string_view(value);
}

/** The spin bound when `ACCINTE_SPIN_US` is unset.
 *
 * NB: a waiter that spins on the only CPU the process may use holds up the
 * very thread it waits for (CUDA's automatic schedule, likewise, spins only
 * while the process has no more active contexts than logical processors).
 */
int defaultSpinMicroseconds() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0 && CPU_COUNT(&cpus) < 2) {
    return 0;
  }
  return kDefaultSpinMicroseconds;
}

// LITERALINCLUDE START: EMULATOR_CONFIG
Config parseConfig() {
  Config parsed;
  if (auto text = readEnv("ACCINTE_DEVICE_COUNT")) {
    auto count = parseDeviceCount(*text);
    if (!count) {
      parsed.status = accinteErrorInitialization;
      return parsed;
    }
    parsed.deviceCount = *count;
  }
  if (auto text = readEnv("ACCINTE_DEVICE_MEMORY")) {
    auto bytes = parseByteSize(*text);
    if (!bytes) {
      parsed.status = accinteErrorInitialization;
      return parsed;
    }
    parsed.deviceMemory = *bytes;
  }
  parsed.spinMicroseconds = defaultSpinMicroseconds();
  if (auto text = readEnv("ACCINTE_SPIN_US")) {
    auto microseconds = parseSpinMicroseconds(*text);
    if (!microseconds) {
      parsed.status = accinteErrorInitialization;
      return parsed;
    }
    parsed.spinMicroseconds = *microseconds;
  }
  return parsed;
}
// LITERALINCLUDE END: EMULATOR_CONFIG

} // namespace

std::optional<int> parseDeviceCount(std::string_view text) {
  auto value = parseDecimal(text);
  if (!value || *value < 1 || *value > kMaxDeviceCount) {
    return std::nullopt;
  }
  return static_cast<int>(*value);
}

std::optional<int> parseSpinMicroseconds(std::string_view text) {
  auto value = parseDecimal(text);
  if (!value || *value > kMaxSpinMicroseconds) {
    return std::nullopt;
  }
  return static_cast<int>(*value);
}

std::optional<size_t> parseByteSize(std::string_view text) {
  unsigned shift = 0;
  if (!text.empty()) {
    switch (text.back()) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      default:
        break;
    }
  }
  if (shift != 0) {
    text.remove_suffix(1);
  }
  auto value = parseDecimal(text);
  if (!value || *value == 0 ||
      *value > (std::numeric_limits<size_t>::max() >> shift)) {
    return std::nullopt;
  }
  return static_cast<size_t>(*value) << shift;
}

const Config& config() {
  // NB: a function-local static is initialised exactly once even when the
  // first calls race, and Config is trivially destructible, so it is safe to
  // use from worker threads during process exit.
  static const Config parsed = parseConfig();
  return parsed;
}

} // namespace accinte::emulator
