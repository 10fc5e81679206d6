#pragma once

#include "config.h"

#include <sched.h>

#include <atomic>
#include <chrono>

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

/** The CPU a thread last ran on, published for the threads that wait for
 * it (see spinUntil()). */
class CpuSlot {
 public:
  /** Publishes `cpu`, the calling thread's current CPU. */
  void publish(int cpu = sched_getcpu()) {
    cpu_.store(cpu, std::memory_order_relaxed);
  }
  /** The CPU last published; -1 if none. */
  int cpu() const {
    return cpu_.load(std::memory_order_relaxed);
  }

 private:
  std::atomic<int> cpu_{-1};
};

/** How many times spinUntil() checks its condition between two looks at the
 * clock and the CPU. */
constexpr int kSpinChecksPerLook = 64;

/** A gap between two looks at the clock longer than this means that the
 * spinning thread lost its CPU in between (64 checks take about a
 * microsecond). */
constexpr std::chrono::microseconds kSpinPreemptedGap{10};

/**
 * Spins until `ready()` returns true or the process's spin bound
 * (Config::spinMicroseconds, `ACCINTE_SPIN_US`) has elapsed, or as soon as
 * spinning looks futile (below); returns the last value of `ready()`. A
 * caller that gets false blocks instead.
 *
 * `waitedFor`, if not null, is where the thread that will make `ready()`
 * true publishes its CPU; `self`, if not null, is where the calling thread
 * publishes its own while it spins. `ready()` must be cheap and must not
 * block: an atomic load.
 *
 * NB: a wait that ends within microseconds costs two thread wake-ups when it
 * blocks (a system call to wake the sleeper, then the scheduler's latency,
 * tens of microseconds when the sleeper's core was idle), more than the wait
 * itself; spinning first saves both, as a GPU driver's default schedule
 * does. The spin is bounded, so a process with nothing to do burns nothing
 * for long.
 *
 * NB: spinning pays only while both threads have a core, which CUDA's
 * default schedule approximates by comparing the process's active contexts
 * with the machine's logical processors. This spin ends as soon as it sees that
 * the awaited thread last ran on the spinner's own CPU (on a busy machine, the
 * scheduler keeps a thread it wakes on its waker's core, where a spinner
 * would only hold it up) or that the spinner lost its CPU for a while
 * (another thread wanted it): the machine has more runnable threads than
 * cores, and a waiter that sleeps leaves its core to the others and, woken,
 * runs at once, where one that spins would run again only at its next turn.
 * For the same reason the spin never yields (sched_yield()): on a busy CPU,
 * a yield gives the rest of the thread's turn away.
 */
template <typename Ready>
bool spinUntil(const Ready& ready, const CpuSlot* waitedFor = nullptr,
               CpuSlot* self = nullptr) {
  if (ready()) {
    return true;
  }
  const int bound = config().spinMicroseconds;
  if (bound == 0) {
    return false;
  }
  const auto sharesCpu = [&] {
    const int cpu = sched_getcpu();
    if (self != nullptr) {
      self->publish(cpu);
    }
    return waitedFor != nullptr && cpu >= 0 && waitedFor->cpu() == cpu;
  };
  if (sharesCpu()) {
    return false;
  }
  auto look = std::chrono::steady_clock::now();
  const auto deadline = look + std::chrono::microseconds(bound);
  while (true) {
    for (int i = 0; i < kSpinChecksPerLook; ++i) {
      cpuRelax();
      if (ready()) {
        return true;
      }
    }
    const auto previous = look;
    look = std::chrono::steady_clock::now();
    if (look >= deadline || look - previous > kSpinPreemptedGap ||
        sharesCpu()) {
      return ready();
    }
  }
}

} // namespace accinte::emulator
