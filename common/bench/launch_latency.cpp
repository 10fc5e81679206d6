/**
 * @file
 * What the emulator's basic operations cost, without PyTorch: a launch, a
 * round trip to a stream's worker, opening device memory for a kernel, a
 * small blocking copy, an event between two streams; and, for scale, the
 * system calls with which the runtime opens and closes device memory.
 *
 * `make bench` runs it and adds each line to its results, as durations with
 * no CPU counterpart. Each number is the median over rounds of the mean time
 * per operation in a round. Output, one JSON object per line:
 *
 *     {"name": "...", "seconds": 1.2e-05}
 *
 * Tracing (accinteActivityEnable()) is off for every line but the pairs named
 * "tracing off" and "tracing on", measured in alternating blocks of rounds of
 * one loop so that both see the same machine; the ratio of each pair goes to
 * stderr.
 */

#include <accinte/kernel.h>
#include <accinte/runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

constexpr int kRounds = 31;
constexpr int kOperationsPerRound = 200;

void check(accinteError_t error, const char* call) {
  if (error != accinteSuccess) {
    std::fprintf(stderr, "launch_latency: %s failed: %s\n", call,
                 accinteGetErrorName(error));
    std::exit(1);
  }
}

/** Median over rounds of the seconds per call of `operation`, each round
 * ended by `finish` (counted in the round). */
double secondsPerOperation(const std::function<void()>& operation,
                           const std::function<void()>& finish) {
  std::vector<double> rounds;
  for (int round = 0; round <= kRounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kOperationsPerRound; ++i) {
      operation();
    }
    finish();
    const std::chrono::duration<double> elapsed =
        std::chrono::steady_clock::now() - start;
    if (round > 0) { // the first round warms up
      rounds.push_back(elapsed.count() / kOperationsPerRound);
    }
  }
  std::nth_element(rounds.begin(), rounds.begin() + rounds.size() / 2,
                   rounds.end());
  return rounds[rounds.size() / 2];
}

/** The median over rounds of the seconds per call of `operation`, with
 * tracing off and on: {off, on}.
 *
 * NB: the two states alternate in blocks of rounds, each block led by a
 * round that is not counted: the first launches after a switch pay for the
 * switch (the records taken out, memory freed by another thread), which is
 * no cost of either state. The records are taken out of the runtime after
 * each block, outside the timed rounds, so that the buffer never fills (a
 * full buffer drops records, which is cheaper than keeping them). */
std::pair<double, double> secondsPerOperationOffAndOn(
    const std::function<void()>& operation,
    const std::function<void()>& finish) {
  constexpr int kRoundsPerBlock = 4;
  std::vector<double> rounds[2];
  std::vector<accinteActivityRecord> records(4096);
  for (int block = 0; block < 2 * (kRounds / kRoundsPerBlock + 1); ++block) {
    const int on = block % 2;
    if (on) {
      check(accinteActivityEnable(0), "accinteActivityEnable");
    }
    for (int round = 0; round <= kRoundsPerBlock; ++round) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < kOperationsPerRound; ++i) {
        operation();
      }
      finish();
      const std::chrono::duration<double> elapsed =
          std::chrono::steady_clock::now() - start;
      if (round > 0) {
        rounds[on].push_back(elapsed.count() / kOperationsPerRound);
      }
    }
    if (on) {
      check(accinteActivityDisable(), "accinteActivityDisable");
      size_t count = 0;
      do {
        check(accinteActivityTake(records.data(), records.size(), &count),
              "accinteActivityTake");
      } while (count == records.size());
    }
  }
  double medians[2];
  for (int on = 0; on < 2; ++on) {
    auto& samples = rounds[on];
    std::nth_element(samples.begin(), samples.begin() + samples.size() / 2,
                     samples.end());
    medians[on] = samples[samples.size() / 2];
  }
  return {medians[0], medians[1]};
}

/** Restricts thread `tid` (0: the calling thread) to the CPUs in `cpus`. */
void pin(pid_t tid, const cpu_set_t& cpus) {
  if (sched_setaffinity(tid, sizeof(cpus), &cpus) != 0) {
    std::perror("launch_latency: sched_setaffinity");
    std::exit(1);
  }
}

/** A set of one CPU. */
cpu_set_t onlyCpu(int cpu) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(cpu, &cpus);
  return cpus;
}

void report(const char* name, double seconds) {
  std::printf("{\"name\": \"%s\", \"seconds\": %.6e}\n", name, seconds);
  std::fflush(stdout);
}

} // namespace

int main() {
  accinteStream_t stream = nullptr;
  accinteStream_t other = nullptr;
  check(accinteStreamCreate(&stream), "accinteStreamCreate");
  check(accinteStreamCreate(&other), "accinteStreamCreate");
  void* first = nullptr;
  void* second = nullptr;
  check(accinteMalloc(&first, 4096), "accinteMalloc");
  check(accinteMalloc(&second, 4096), "accinteMalloc");
  accinteEvent_t event = nullptr;
  check(accinteEventCreateWithFlags(&event, accinteEventDisableTiming),
        "accinteEventCreateWithFlags");

  const auto synchronize = [&] {
    check(accinteStreamSynchronize(stream), "accinteStreamSynchronize");
  };
  const auto nothing = [] {};
  const auto launchEmpty = [&] {
    check(accinte::launchKernel(stream, nullptr, 0, [] {}), "launchKernel");
  };
  const void* const buffers[] = {first, second};
  const auto launchOnTwo = [&] {
    check(accinte::launchKernel(stream, buffers, 2, [] {}), "launchKernel");
  };

  report("emulator: empty kernel, launch and synchronize",
         secondsPerOperation([&] { launchEmpty(), synchronize(); }, nothing));
  report("emulator: kernel on 2 allocations, launch and synchronize",
         secondsPerOperation([&] { launchOnTwo(), synchronize(); }, nothing));
  report("emulator: empty kernel, launch only (queued back to back)",
         secondsPerOperation(launchEmpty, synchronize));
  report("emulator: kernel on 2 allocations, queued back to back",
         secondsPerOperation(launchOnTwo, synchronize));
  // NB: what tracing costs a launch, off (one relaxed atomic load per call)
  // and on (two records per launch: the call's and the kernel's).
  struct Traced {
    const char* what;
    std::function<void()> operation;
    std::function<void()> finish;
  };
  const Traced traced[] = {
      {"empty kernel, launch only (queued back to back)", launchEmpty,
       synchronize},
      {"empty kernel, launch and synchronize",
       [&] { launchEmpty(), synchronize(); }, nothing},
  };
  for (const Traced& item : traced) {
    const auto [off, on] =
        secondsPerOperationOffAndOn(item.operation, item.finish);
    const std::string name = std::string("emulator: ") + item.what;
    report((name + ", tracing off").c_str(), off);
    report((name + ", tracing on").c_str(), on);
    std::fprintf(stderr, "launch_latency: %s: tracing on / off = %.3f\n",
                 item.what, on / off);
  }
  // NB: where the two threads of a round trip run decides whether its waits
  // spin (see spinUntil() in common/src/spin.h): on two CPUs they do, on one
  // they sleep at once. Left to the scheduler, the rows above get either,
  // depending on what else the machine runs; these two place the caller and
  // the stream's worker themselves.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    std::perror("launch_latency: sched_getaffinity");
    return 1;
  }
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < 2; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) {
      cpus.push_back(cpu);
    }
  }
  if (cpus.size() == 2) {
    std::atomic<pid_t> worker{-1};
    check(accinte::launchKernel(
              stream, nullptr, 0,
              [&] { worker = static_cast<pid_t>(syscall(SYS_gettid)); }),
          "launchKernel");
    synchronize();
    pin(0, onlyCpu(cpus[0]));
    for (const bool apart : {true, false}) {
      pin(worker, onlyCpu(cpus[apart ? 1 : 0]));
      report(
          apart ? "emulator: empty kernel, launch and synchronize, caller "
                  "and worker on two CPUs"
                : "emulator: empty kernel, launch and synchronize, caller "
                  "and worker on one CPU",
          secondsPerOperation([&] { launchEmpty(), synchronize(); }, nothing));
    }
    pin(worker, allowed);
    pin(0, allowed);
  }
  // NB: what a graph is for: ten kernels launched one by one cost ten
  // enqueues and ten wake-ups of the worker, the same ten captured cost one
  // launch (see "Stream capture and graphs" in the emulator's page).
  constexpr int kChain = 10;
  check(accinteStreamBeginCapture(stream, accinteStreamCaptureModeGlobal),
        "accinteStreamBeginCapture");
  for (int i = 0; i < kChain; ++i) {
    launchOnTwo();
  }
  accinteGraph_t graph = nullptr;
  check(accinteStreamEndCapture(stream, &graph), "accinteStreamEndCapture");
  accinteGraphExec_t exec = nullptr;
  check(accinteGraphInstantiate(&exec, graph), "accinteGraphInstantiate");
  const auto launchChain = [&] {
    for (int i = 0; i < kChain; ++i) {
      launchOnTwo();
    }
  };
  const auto launchGraph = [&] {
    check(accinteGraphLaunch(exec, stream), "accinteGraphLaunch");
  };
  report(
      "emulator: 10 kernels on 2 allocations, launched one by one, and "
      "synchronize",
      secondsPerOperation([&] { launchChain(), synchronize(); }, nothing));
  report("emulator: the same 10 kernels as a graph, launched, and synchronize",
         secondsPerOperation([&] { launchGraph(), synchronize(); }, nothing));
  report("emulator: 10 kernels on 2 allocations, queued back to back",
         secondsPerOperation(launchChain, synchronize));
  report("emulator: the same 10 kernels as a graph, queued back to back",
         secondsPerOperation(launchGraph, synchronize));
  check(accinteGraphExecDestroy(exec), "accinteGraphExecDestroy");
  check(accinteGraphDestroy(graph), "accinteGraphDestroy");

  char byte = 0;
  report("emulator: blocking copy of 1 byte, device to host",
         secondsPerOperation(
             [&] {
               check(accinteMemcpy(&byte, first, 1, accinteMemcpyDeviceToHost),
                     "accinteMemcpy");
             },
             nothing));
  report("emulator: event between two streams, then synchronize",
         secondsPerOperation(
             [&] {
               check(accinteEventRecord(event, stream), "accinteEventRecord");
               check(accinteStreamWaitEvent(other, event),
                     "accinteStreamWaitEvent");
               check(accinteStreamSynchronize(other),
                     "accinteStreamSynchronize");
             },
             nothing));

  // NB: what opening and closing one allocation costs at the least: the two
  // mprotect calls the runtime makes, on a page of its own, while the
  // stream workers (other threads of the process) exist.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mapping =
      mmap(nullptr, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) {
    std::perror("launch_latency: mmap");
    return 1;
  }
  const auto openAndClose = [&] {
    if (mprotect(mapping, page, PROT_READ | PROT_WRITE) != 0) {
      std::perror("launch_latency: mprotect");
      std::exit(1);
    }
    // As a kernel does: the page is used while it is open.
    *static_cast<volatile char*>(mapping) += 1;
    if (mprotect(mapping, page, PROT_NONE) != 0) {
      std::perror("launch_latency: mprotect");
      std::exit(1);
    }
  };
  report("system: mprotect of one page to read-write, a write, back to none",
         secondsPerOperation(openAndClose, nothing));
  // NB: the same while another thread of the process runs on another core,
  // as the caller does while a worker opens and closes memory: removing
  // access must then make that core drop its cached translations too.
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  report("system: the same, while another thread of the process runs",
         secondsPerOperation(openAndClose, nothing));
  stop = true;
  spinner.join();
  munmap(mapping, page);

  check(accinteEventDestroy(event), "accinteEventDestroy");
  check(accinteFree(first), "accinteFree");
  check(accinteFree(second), "accinteFree");
  check(accinteStreamDestroy(other), "accinteStreamDestroy");
  check(accinteStreamDestroy(stream), "accinteStreamDestroy");
  return 0;
}
