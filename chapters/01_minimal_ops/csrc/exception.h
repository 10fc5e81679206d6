#pragma once

/**
 * @file
 * Turning emulator error codes into PyTorch errors.
 */

#include <accinte/runtime.h>

#include <c10/util/Exception.h>

#include <string>

namespace accinte::detail {

/**
 * What ACCINTE_CHECK adds to the description of `error`: for a launch
 * failure, what the failed kernel or copy said (see
 * accinteGetLastFailureMessage()), since the call that reports a sticky
 * failure is rarely the one that caused it.
 */
inline std::string failureDetail(accinteError_t error) {
  if (error != accinteErrorLaunchFailure) {
    return "";
  }
  const std::string message = accinteGetLastFailureMessage();
  return message.empty() ? "" : ". The failed kernel reported: " + message;
}

} // namespace accinte::detail

/**
 * Checks the ::accinteError_t returned by `expr`; on failure raises a
 * `c10::Error` (a Python `RuntimeError`) naming the code, its meaning, the
 * call that failed and, for a kernel that failed on a stream, its message.
 */
#define ACCINTE_CHECK(expr)                                                    \
  do {                                                                         \
    const accinteError_t accinte_check_error_ = (expr);                        \
    TORCH_CHECK(accinte_check_error_ == accinteSuccess, "accinte error ",      \
                accinteGetErrorName(accinte_check_error_), ": ",               \
                accinteGetErrorString(accinte_check_error_), " (from ", #expr, \
                ")", ::accinte::detail::failureDetail(accinte_check_error_));  \
  } while (0)
