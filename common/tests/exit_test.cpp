// Process exit: queued work is drained, and a kernel that never returns does
// not hang the exit.

#include "test_util.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>

using accinte::testing::runScenario;

namespace {

std::atomic<bool> exitStarted{false};

void noteExitStarted() {
  exitStarted = true;
}

ACCINTE_SCENARIO(ExitDrainsQueuedWork) {
  accinteStream_t stream = nullptr;
  SCENARIO_CHECK(accinteStreamCreate(&stream) == accinteSuccess);
  // Registered after the runtime's exit hook, so it runs before it.
  std::atexit(&noteExitStarted);
  // Held until the process is exiting, so this work is still queued then.
  SCENARIO_CHECK(accinte::launchKernel(stream, {}, [] {
                   while (!exitStarted) {
                     std::this_thread::yield();
                   }
                 }) == accinteSuccess);
  // Proves it ran: the exit status can only come from this kernel.
  SCENARIO_CHECK(accinte::launchKernel(stream, {}, [] { _exit(42); }) ==
                 accinteSuccess);
  return 0;
}

TEST(Exit, QueuedWorkIsDrainedAtExit) {
  EXPECT_EQ(runScenario("ExitDrainsQueuedWork", {}), 42);
}

void* leakedBuffer = nullptr;

void useRuntimeAfterItsExitHook() {
  // Must not wait for the stuck worker forever.
  if (accinteDeviceSynchronize() != accinteSuccess ||
      accinteFree(leakedBuffer) != accinteSuccess) {
    _exit(3);
  }
}

ACCINTE_SCENARIO(ExitWithAStuckKernel) {
  // Registered before the runtime's exit hook, so it runs after it.
  std::atexit(&useRuntimeAfterItsExitHook);
  SCENARIO_CHECK(accinteMalloc(&leakedBuffer, 64) == accinteSuccess);
  SCENARIO_CHECK(accinte::launchKernel(nullptr, {}, [] {
                   while (true) {
                     pause();
                   }
                 }) == accinteSuccess);
  return 0;
}

TEST(Exit, AKernelThatNeverReturnsDoesNotHangTheExit) {
  EXPECT_EQ(runScenario("ExitWithAStuckKernel", {}), 0);
}

} // namespace
