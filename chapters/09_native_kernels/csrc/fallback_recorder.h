#pragma once

/**
 * @file
 * Finding the operators of a workload that still take the CPU fallback.
 */

#include <accinte/export.h>

#include <cstdint>
#include <string>
#include <vector>

namespace accinte {

/** How often one operator took the CPU fallback while recording. */
struct FallbackCount {
  /** The operator, as "aten::name.overload". */
  std::string op;
  /** How many calls ran on the fallback. */
  int64_t calls;
  /** The host time those calls took, copies and waits included. */
  double seconds;
};

/**
 * Starts recording, on every thread, the calls of operators that run on
 * the CPU fallback, whichever route led there (chapter 01's global
 * fallback, or a kernel registered by name that calls it).
 *
 * Raises an error if a recording is already running.
 */
ACCINTE_EXPORT void startFallbackRecording();

/**
 * Stops the recording and returns what it saw, the operators that took the
 * most time first. Raises an error if no recording is running.
 */
ACCINTE_EXPORT std::vector<FallbackCount> stopFallbackRecording();

} // namespace accinte
