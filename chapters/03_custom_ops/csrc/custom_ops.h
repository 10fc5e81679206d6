#pragma once

/**
 * @file
 * The accinte kernels of chapter 03's custom operators that other libraries
 * call directly.
 *
 * `accinte::custom_abs` is reached through the dispatcher
 * (`torch.ops.accinte.custom_abs`); the accinte kernel of the Python-defined
 * `accinte::scaled_add` is this launcher, which the `_C` module exposes to the
 * operator's Python implementation.
 */

#include <accinte/export.h>

#include <ATen/core/Tensor.h>

namespace accinte {

/**
 * Enqueues `out = x + alpha * y` on the current stream of the tensors'
 * device and returns without waiting.
 *
 * `out`, `x` and `y` must be accinte tensors of one device, with the same
 * sizes and the same floating-point dtype; `out` must not share memory with
 * `x` or `y`.
 */
ACCINTE_EXPORT void launchScaledAdd(const at::Tensor& out, const at::Tensor& x,
                                    const at::Tensor& y, double alpha);

} // namespace accinte
