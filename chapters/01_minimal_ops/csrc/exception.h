#pragma once

/**
 * @file
 * Turning emulator error codes into PyTorch errors.
 */

#include <accinte/runtime.h>

#include <c10/util/Exception.h>

/**
 * Checks the ::accinteError_t returned by `expr`; on failure raises a
 * `c10::Error` (a Python `RuntimeError`) naming the code, its meaning and the
 * call that failed.
 */
#define ACCINTE_CHECK(expr)                                                    \
  do {                                                                         \
    const accinteError_t accinte_check_error_ = (expr);                        \
    TORCH_CHECK(accinte_check_error_ == accinteSuccess, "accinte error ",      \
                accinteGetErrorName(accinte_check_error_), ": ",               \
                accinteGetErrorString(accinte_check_error_), " (from ", #expr, \
                ")");                                                          \
  } while (0)
