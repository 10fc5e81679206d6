// Waits that spin, then block: a stream's worker with an empty queue and a
// host thread waiting for a stream or an event spin for a bounded time
// (ACCINTE_SPIN_US) before they sleep. No wake-up may be lost on either
// side, whenever the other side comes, and an idle thread must end up
// asleep.

#include "test_util.h"

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

using accinte::testing::DeviceBuffer;
using accinte::testing::Gate;
using accinte::testing::runScenario;

namespace {

pid_t currentThreadId() {
  return static_cast<pid_t>(syscall(SYS_gettid));
}

/** The scheduler's state of thread `tid` of this process, as /proc shows
 * it: 'R' running or runnable (a spinning thread), 'S' asleep (a thread
 * blocked on a condition variable), ...; '?' if it cannot be read. */
char threadState(pid_t tid) {
  std::ifstream file("/proc/self/task/" + std::to_string(tid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(file)),
                         std::istreambuf_iterator<char>());
  // NB: "tid (name) state ...": the name may hold spaces or parentheses.
  const size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) {
    return '?';
  }
  return text[close + 2];
}

/** True once thread `tid` is asleep; false if it still is not after a
 * minute.
 *
 * NB: not a timing assertion. The spin lasts microseconds; a thread whose
 * spin never ended would never be seen asleep, however long the test
 * waited, and the minute is only there to turn that into a failure. */
bool eventuallySleeps(pid_t tid) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (std::chrono::steady_clock::now() < deadline) {
    if (threadState(tid) == 'S') {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

/** The id of `stream`'s worker thread, taken by a kernel; -1 on failure. */
pid_t workerThreadId(accinteStream_t stream) {
  auto tid = std::make_shared<std::atomic<pid_t>>(-1);
  if (accinte::launchKernel(stream, {},
                            [tid] { tid->store(currentThreadId()); }) !=
          accinteSuccess ||
      accinteStreamSynchronize(stream) != accinteSuccess) {
    return -1;
  }
  return tid->load();
}

/** Where the round trips' threads run: wherever the scheduler puts them,
 * the host thread and the workers on two different CPUs (every wait can
 * spin), or all on one (no wait should spin). */
enum class Placement { kAnywhere, kApart, kTogether };

/** The first two CPUs this process may run on; false if it has only one. */
bool twoCpus(int* first, int* second) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    return false;
  }
  int found = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) {
      *(found++ == 0 ? first : second) = cpu;
    }
  }
  return found == 2;
}

bool pin(pid_t tid, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(tid, sizeof(set), &set) == 0;
}

/** Pins the calling thread and every stream worker of the process as
 * `placement` says; false if it cannot. */
bool place(Placement placement) {
  if (placement == Placement::kAnywhere) {
    return true;
  }
  int host = 0;
  int other = 0;
  if (!twoCpus(&host, &other)) {
    return false;
  }
  const int workers = placement == Placement::kApart ? other : host;
  bool ok = pin(currentThreadId(), host);
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) {
    return false;
  }
  while (dirent* entry = readdir(tasks)) {
    const pid_t tid = static_cast<pid_t>(std::atoi(entry->d_name));
    std::ifstream comm("/proc/self/task/" + std::string(entry->d_name) +
                       "/comm");
    std::string name;
    std::getline(comm, name);
    if (tid > 0 && name.rfind("accinte-", 0) == 0) {
      ok = pin(tid, workers) && ok;
    }
  }
  closedir(tasks);
  return ok;
}

/** A pause of one of the lengths that matter to a spin of the default
 * bound (50 µs): none, within the spin, about its end, well past it. */
void randomPause(std::mt19937& random) {
  static constexpr int kMicroseconds[] = {0, 0, 2, 10, 40, 60, 150};
  const int microseconds =
      kMicroseconds[random() % (sizeof(kMicroseconds) / sizeof(int))];
  if (microseconds > 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(microseconds));
  }
}

/**
 * Round trips of every kind through two streams, with pauses of random
 * lengths before and after each wait, so that each wait meets the other
 * side spinning, going to sleep or asleep. Returns the first round that
 * went wrong, or -1.
 *
 * NB: the kernels write plain integers that the host (or the other
 * stream's kernel) reads after the wait: under ThreadSanitizer, a wait that
 * returns without ordering the kernel's writes before the reader is a
 * reported race, not only a hang or a wrong value.
 */
int roundTrips(int rounds, unsigned seed,
               Placement placement = Placement::kAnywhere) {
  std::mt19937 random(seed);
  accinteStream_t first = nullptr;
  accinteStream_t second = nullptr;
  accinteEvent_t event = nullptr;
  if (accinteStreamCreate(&first) != accinteSuccess ||
      accinteStreamCreate(&second) != accinteSuccess ||
      accinteEventCreateWithFlags(&event, accinteEventDisableTiming) !=
          accinteSuccess) {
    return 0;
  }
  DeviceBuffer device(sizeof(int));
  accinteStream_t defaultStream = nullptr;
  // NB: the default stream's worker starts now, so that place() finds it.
  if (device.status() != accinteSuccess ||
      accinteGetDefaultStream(0, &defaultStream) != accinteSuccess ||
      !place(placement)) {
    return 0;
  }
  int written = 0;
  int copied = 0;
  int result = -1;
  for (int round = 1; round <= rounds && result == -1; ++round) {
    int* target = &written;
    switch (round % 4) {
      case 0: // launch, then synchronize the stream
        if (accinte::launchKernel(first, {}, [target, round] {
              *target = round;
            }) != accinteSuccess) {
          result = round;
          break;
        }
        randomPause(random);
        if (accinteStreamSynchronize(first) != accinteSuccess ||
            written != round) {
          result = round;
        }
        break;
      case 1: // launch and record, then synchronize the event
        if (accinte::launchKernel(first, {},
                                  [target, round] { *target = round; }) !=
                accinteSuccess ||
            accinteEventRecord(event, first) != accinteSuccess) {
          result = round;
          break;
        }
        randomPause(random);
        if (accinteEventSynchronize(event) != accinteSuccess ||
            written != round) {
          result = round;
        }
        break;
      case 2: { // a kernel on one stream read by a kernel on the other
        int* source = &written;
        int* sink = &copied;
        if (accinte::launchKernel(first, {},
                                  [source, round] { *source = round; }) !=
                accinteSuccess ||
            accinteEventRecord(event, first) != accinteSuccess) {
          result = round;
          break;
        }
        randomPause(random);
        if (accinteStreamWaitEvent(second, event) != accinteSuccess ||
            accinte::launchKernel(second, {},
                                  [source, sink] { *sink = *source; }) !=
                accinteSuccess ||
            accinteStreamSynchronize(second) != accinteSuccess ||
            copied != round) {
          result = round;
        }
        break;
      }
      default: { // blocking copies there and back
        if (accinteMemcpy(device.ptr(), &round, sizeof(int),
                          accinteMemcpyHostToDevice) != accinteSuccess) {
          result = round;
          break;
        }
        randomPause(random);
        int back = 0;
        if (accinteMemcpy(&back, device.ptr(), sizeof(int),
                          accinteMemcpyDeviceToHost) != accinteSuccess ||
            back != round) {
          result = round;
        }
        break;
      }
    }
    randomPause(random);
  }
  accinteStreamSynchronize(second);
  accinteEventDestroy(event);
  accinteStreamDestroy(second);
  accinteStreamDestroy(first);
  return result;
}

TEST(Spin, NoWakeUpIsLostWheneverTheOtherSideComes) {
  EXPECT_EQ(roundTrips(3000, 1), -1);
}

TEST(Spin, NoWakeUpIsLostWithManyHostThreads) {
  // Three host threads, each with streams of its own, and the default
  // stream, which all of them share through their blocking copies.
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (unsigned seed = 2; seed < 5; ++seed) {
    threads.emplace_back([seed, &failures] {
      if (roundTrips(1000, seed) != -1) {
        failures.fetch_add(1);
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(failures.load(), 0);
}

ACCINTE_SCENARIO(SpinRoundTrips) {
  SCENARIO_CHECK(roundTrips(1000, 5) == -1);
  return 0;
}

ACCINTE_SCENARIO(SpinRoundTripsApart) {
  SCENARIO_CHECK(roundTrips(2000, 6, Placement::kApart) == -1);
  return 0;
}

ACCINTE_SCENARIO(SpinRoundTripsTogether) {
  SCENARIO_CHECK(roundTrips(2000, 7, Placement::kTogether) == -1);
  return 0;
}

TEST(Spin, NoWakeUpIsLostWithTheWorkersOnAnotherCpuOrOnTheSame) {
  // NB: in a process of their own, so that the pinning stays there. Apart,
  // every wait can spin; together, none should, and every wait sleeps.
  int host = 0;
  int other = 0;
  if (!twoCpus(&host, &other)) {
    GTEST_SKIP() << "this process may run on one CPU only";
  }
  EXPECT_EQ(runScenario("SpinRoundTripsApart", {}), 0);
  EXPECT_EQ(runScenario("SpinRoundTripsTogether", {}), 0);
}

TEST(Spin, EveryBoundKeepsEveryWakeUp) {
  // 0 never spins: every wait blocks at once.
  for (const char* value : {"0", "1", "5", "1000", "1000000"}) {
    EXPECT_EQ(runScenario("SpinRoundTrips",
                          {std::string("ACCINTE_SPIN_US=") + value}),
              0)
        << "ACCINTE_SPIN_US=" << value;
  }
}

TEST(Spin, AnIdleWorkerSleepsAndWakesForTheNextLaunch) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  const pid_t worker = workerThreadId(stream);
  ASSERT_GT(worker, 0);
  ASSERT_NE(worker, currentThreadId());
  for (int round = 0; round < 3; ++round) {
    EXPECT_TRUE(eventuallySleeps(worker)) << "state " << threadState(worker);
    // The launch that finds the worker asleep wakes it.
    int ran = 0;
    int* target = &ran;
    ASSERT_OK(accinte::launchKernel(stream, {}, [target] { *target = 1; }));
    ASSERT_OK(accinteStreamSynchronize(stream));
    EXPECT_EQ(ran, 1);
  }
  ASSERT_OK(accinteStreamDestroy(stream));
}

/** Starts `wait` on a thread of its own once the stream behind `gate` is
 * blocked, checks that the thread ends up asleep, releases the gate and
 * returns what `wait` returned. */
template <typename Wait>
accinteError_t waitThatSleeps(Gate& gate, const Wait& wait) {
  std::atomic<pid_t> waiter{-1};
  accinteError_t status = accinteErrorNotReady;
  std::thread thread([&] {
    waiter.store(currentThreadId());
    status = wait();
  });
  while (waiter.load() == -1) {
    std::this_thread::yield();
  }
  EXPECT_TRUE(eventuallySleeps(waiter.load()))
      << "state " << threadState(waiter.load());
  gate.release();
  thread.join();
  return status;
}

TEST(Spin, AHostThreadThatWaitsLongSleepsAndIsWoken) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  {
    Gate gate;
    ASSERT_OK(gate.block(stream));
    EXPECT_OK(
        waitThatSleeps(gate, [&] { return accinteStreamSynchronize(stream); }));
  }
  {
    accinteEvent_t event = nullptr;
    ASSERT_OK(accinteEventCreate(&event));
    Gate gate;
    ASSERT_OK(gate.block(stream));
    ASSERT_OK(accinteEventRecord(event, stream));
    EXPECT_OK(
        waitThatSleeps(gate, [&] { return accinteEventSynchronize(event); }));
    ASSERT_OK(accinteEventDestroy(event));
  }
  {
    // A blocking copy waits on the default stream.
    DeviceBuffer buffer(sizeof(int));
    ASSERT_OK(buffer.status());
    const int value = 42;
    ASSERT_OK(accinteMemcpy(buffer.ptr(), &value, sizeof(int),
                            accinteMemcpyHostToDevice));
    Gate gate;
    ASSERT_OK(gate.block(nullptr));
    int back = 0;
    EXPECT_OK(waitThatSleeps(gate, [&] {
      return accinteMemcpy(&back, buffer.ptr(), sizeof(int),
                           accinteMemcpyDeviceToHost);
    }));
    EXPECT_EQ(back, 42);
  }
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST(Spin, AFailureIsReportedOnceWhetherTheWaitSpunOrSlept) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  const auto launchFailing = [&] {
    return accinte::launchKernel(stream, {},
                                 [] { return accinteErrorLaunchFailure; });
  };
  // Spun: the failing kernel is done within the spin.
  ASSERT_OK(launchFailing());
  EXPECT_EQ(accinteStreamSynchronize(stream), accinteErrorLaunchFailure);
  EXPECT_OK(accinteStreamSynchronize(stream));
  // Slept: the failing kernel waits behind a gate.
  {
    Gate gate;
    ASSERT_OK(gate.block(stream));
    ASSERT_OK(launchFailing());
    EXPECT_EQ(
        waitThatSleeps(gate, [&] { return accinteStreamSynchronize(stream); }),
        accinteErrorLaunchFailure);
  }
  EXPECT_OK(accinteStreamSynchronize(stream));
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST(Spin, DestroyingAStreamWhoseWorkerSpinsJoinsIt) {
  // Right after a synchronize the worker spins on its empty queue: the stop
  // must reach it there as well as asleep.
  for (int round = 0; round < 200; ++round) {
    accinteStream_t stream = nullptr;
    ASSERT_OK(accinteStreamCreate(&stream));
    ASSERT_OK(accinte::launchKernel(stream, {}, [] {}));
    ASSERT_OK(accinteStreamSynchronize(stream));
    ASSERT_OK(accinteStreamDestroy(stream));
  }
}

} // namespace
