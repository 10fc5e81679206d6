#pragma once

#include "config.h"

#include <sched.h>
#include <sys/resource.h>

#include <atomic>
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
 * clock (each followed by a yield of the CPU). */
constexpr int kSpinChecksPerYield = 64;

/** How many times the scheduler has given the calling thread's CPU to
 * another thread while it could have run; -1 if unknown. */
inline long involuntarySwitches() {
  rusage usage;
  if (getrusage(RUSAGE_THREAD, &usage) != 0) {
    return -1;
  }
  return usage.ru_nivcsw;
}

/**
 * Spins until `ready()` returns true or the process's spin bound
 * (Config::spinMicroseconds, `ACCINTE_SPIN_US`) has elapsed, or as soon as
 * spinning looks futile (below); returns the last value of `ready()`. A
 * caller that gets false blocks instead.
 *
 * `waitedFor`, if not null, is where the thread that will make `ready()`
 * true publishes its CPU; `self`, if not null, is where the calling thread
 * publishes its own, at every yield. `ready()` must be cheap and must not
 * block: an atomic load.
 *
 * NB: a wait that ends within microseconds costs two thread wake-ups when it
 * blocks (a system call to wake the sleeper, then the scheduler's latency,
 * tens of microseconds when the sleeper's core was idle), more than the wait
 * itself; spinning first saves both, as a GPU driver's default schedule
 * does. The spin is bounded, so a process with nothing to do burns nothing
 * for long, and it yields the CPU about every microsecond.
 *
 * NB: spinning pays only while the awaited thread has a core of its own,
 * which CUDA's default schedule approximates by comparing the process's
 * threads with the machine's cores. This spin ends as soon as it sees that
 * the awaited thread last ran on the spinner's own CPU (on a busy machine,
 * the scheduler keeps a thread it wakes on its waker's core), or that a
 * yield let another thread run: the machine has more runnable threads than
 * cores, and a waiter that sleeps leaves the core to the others and is
 * woken the moment the wait ends, where one that spins would run again only
 * at its next turn.
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
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::microseconds(bound);
  const long switches = involuntarySwitches();
  while (true) {
    for (int i = 0; i < kSpinChecksPerYield; ++i) {
      cpuRelax();
      if (ready()) {
        return true;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline ||
        involuntarySwitches() != switches || sharesCpu()) {
      return ready();
    }
    std::this_thread::yield();
  }
}

} // namespace accinte::emulator
