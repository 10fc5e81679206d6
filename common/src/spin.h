#pragma once

#include "config.h"

#include <chrono>
#include <thread>

namespace accinte::emulator {

/** Tells the CPU that the calling thread is in a spin-wait loop: the other
 * hardware thread of the core gets the core's resources, and leaving the
 * loop costs no pipeline flush. */
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

/** How many times spinUntil() checks its condition between two looks at the
 * clock (each followed by a yield of the CPU). */
constexpr int kSpinChecksPerYield = 64;

/**
 * Spins until `ready()` returns true or the process's spin bound
 * (Config::spinMicroseconds, `ACCINTE_SPIN_US`) has elapsed; returns the
 * last value of `ready()`. A caller that gets false blocks instead.
 *
 * NB: a wait that ends within microseconds costs two thread wake-ups when it
 * blocks (a system call to wake the sleeper, then the scheduler's latency),
 * more than the wait itself; spinning first saves both, as a GPU driver's
 * default schedule does. The spin is bounded, so a process with nothing to
 * do burns nothing for long, and it yields the CPU about every microsecond:
 * on a machine with more runnable threads than cores, the thread it waits
 * for may need this very core.
 *
 * `ready()` must be cheap and must not block: an atomic load.
 */
template <typename Ready>
bool spinUntil(const Ready& ready) {
  if (ready()) {
    return true;
  }
  const int bound = config().spinMicroseconds;
  if (bound == 0) {
    return false;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::microseconds(bound);
  while (true) {
    for (int i = 0; i < kSpinChecksPerYield; ++i) {
      cpuRelax();
      if (ready()) {
        return true;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return false;
    }
    std::this_thread::yield();
  }
}

} // namespace accinte::emulator
