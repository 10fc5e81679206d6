#pragma once

/**
 * @file
 * Turning emulator error codes into PyTorch errors.
 */

#include <accinte/runtime.h>

#include <c10/util/Exception.h>

#include <cstdint>
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

namespace accinte::detail {

/** Throws what ACCINTE_CHECK raises for `error`, returned by `expr`. */
[[noreturn]] inline void throwAcceleratorError(accinteError_t error,
                                               const char* expr,
                                               const char* function,
                                               const char* file,
                                               uint32_t line) {
  // NB: c10::AcceleratorError, as C10_CUDA_CHECK throws: Python sees a
  // torch.AcceleratorError (a RuntimeError) whose error_code is the code.
  throw c10::AcceleratorError(
      {function, file, line}, static_cast<int32_t>(error),
      c10::str("accinte error ", accinteGetErrorName(error), ": ",
               accinteGetErrorString(error), " (from ", expr, ")",
               failureDetail(error)));
}

} // namespace accinte::detail

/**
 * Checks the ::accinteError_t returned by `expr`; on failure raises a
 * `c10::AcceleratorError` (a Python `torch.AcceleratorError`, a
 * `RuntimeError`, whose `error_code` is the code) naming the code, its
 * meaning, the call that failed and, for a kernel that failed on a stream,
 * its message.
 */
#define ACCINTE_CHECK(expr)                                     \
  do {                                                          \
    const accinteError_t accinte_check_error_ = (expr);         \
    if (C10_UNLIKELY(accinte_check_error_ != accinteSuccess)) { \
      ::accinte::detail::throwAcceleratorError(                 \
          accinte_check_error_, #expr, __func__, __FILE__,      \
          static_cast<uint32_t>(__LINE__));                     \
    }                                                           \
  } while (0)
