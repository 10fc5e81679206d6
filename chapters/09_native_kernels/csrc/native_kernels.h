#pragma once

/**
 * @file
 * Native accinte kernels for the hot operators of training: ATen's CPU
 * kernels, run on device memory inside emulator kernel launches.
 *
 * Every operator of the table runs in three steps. On the host, ATen's Meta
 * kernel of the operator checks the arguments and computes the results'
 * sizes, strides and dtype (broadcasting and type promotion included); the
 * results are allocated on the device. Then one kernel is launched on the
 * current stream: on the stream's worker, the device memory of every tensor
 * is seen as a CPU tensor and ATen's CPU kernel of the operator (its `out=`
 * overload, for a functional operator) writes the results in place.
 */

#include <accinte/export.h>

#include <string>
#include <vector>

namespace accinte {

/**
 * The ATen operators ("name.overload", or "name" for the default overload)
 * that run as native accinte kernels instead of taking the CPU fallback.
 */
ACCINTE_EXPORT std::vector<std::string> nativeKernelOperators();

} // namespace accinte
