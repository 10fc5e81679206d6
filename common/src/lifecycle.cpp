#include "lifecycle.h"

#include "config.h"
#include "stream.h"

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace accinte::emulator {

namespace {

// NB: plain lock-free atomics, because the fork handler runs in the child
// where any mutex may have been held by a thread that no longer exists.
std::atomic<bool> runtimeInitialised{false};
std::atomic<bool> forkedChild{false};

thread_local int threadCurrentDevice = 0;

// LITERALINCLUDE START: EMULATOR_FORK
/** Runs in the child after fork(): if the parent had any runtime state, that
 * state now refers to threads that were not copied, so disable the runtime.
 */
void onForkInChild() {
  if (runtimeInitialised.load()) {
    forkedChild.store(true);
  }
}

/** Installs the fork handler when the library is loaded, so that it is in
 * place before the first piece of state can exist. */
const int forkHandlerInstalled =
    pthread_atfork(nullptr, nullptr, &onForkInChild);
// LITERALINCLUDE END: EMULATOR_FORK

/** The exit hook: see ensureExitHookInstalled(). */
void stopWorkersAtExit() {
  if (isForkedChild()) {
    // The worker threads belong to the parent; there is nothing to join.
    return;
  }
  StreamRegistry::instance().shutdown();
}

} // namespace

void markInitialised() {
  (void)forkHandlerInstalled;
  runtimeInitialised.store(true);
}

bool isForkedChild() {
  return forkedChild.load();
}

accinteError_t checkUsable() {
  if (isForkedChild()) {
    return accinteErrorForkedChild;
  }
  return config().status;
}

void ensureExitHookInstalled() {
  static std::once_flag installed;
  // NB: the hook is registered after the first stream exists, hence after
  // every static object constructed before it; exit handlers run in reverse
  // order, so the workers are stopped before those objects are destroyed.
  std::call_once(installed, [] { std::atexit(&stopWorkersAtExit); });
}

int currentDevice() {
  return threadCurrentDevice;
}

void setCurrentDevice(int device) {
  threadCurrentDevice = device;
}

accinteError_t checkDevice(int device) {
  if (device < 0 || device >= config().deviceCount) {
    return accinteErrorInvalidDevice;
  }
  return accinteSuccess;
}

} // namespace accinte::emulator
