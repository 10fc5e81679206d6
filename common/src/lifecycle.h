#pragma once

#include <accinte/runtime.h>

namespace accinte::emulator {

/**
 * Notes that this process now owns runtime state (worker threads, device or
 * pinned memory, events). A child forked after this point cannot use the
 * runtime: the worker threads its state refers to do not exist in it.
 *
 * NB: call this *before* creating the state, so that a fork racing with the
 * creation errs on the side of disabling the child.
 */
void markInitialised();

/** True in a child forked from a process that had initialised the runtime. */
bool isForkedChild();

/**
 * The check every API function (except the error-string ones) starts with:
 * ::accinteErrorForkedChild in a disabled forked child,
 * ::accinteErrorInitialization if the configuration is malformed, else
 * ::accinteSuccess.
 */
accinteError_t checkUsable();

/** Registers (once) the exit hook that stops every stream's worker thread
 * before the process's static objects are destroyed. */
void ensureExitHookInstalled();

/** Returns the calling host thread's current device. */
int currentDevice();

/** Makes `device` the calling host thread's current device (not checked). */
void setCurrentDevice(int device);

/** ::accinteSuccess if `device` is in [0, device count), else
 * ::accinteErrorInvalidDevice. */
accinteError_t checkDevice(int device);

} // namespace accinte::emulator

/** Returns from the calling function if `expr` is not ::accinteSuccess. */
#define ACCINTE_RETURN_IF_ERROR(expr)              \
  do {                                             \
    const accinteError_t accinte_status_ = (expr); \
    if (accinte_status_ != accinteSuccess) {       \
      return accinte_status_;                      \
    }                                              \
  } while (false)
