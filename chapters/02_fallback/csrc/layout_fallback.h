#pragma once

/**
 * @file
 * The CPU fallback for a layout's dispatch key.
 *
 * A layout other than the dense one (chapter 16's sparse, quantized and
 * nested tensors) has a dispatch key of its own, whose operators the CPU
 * runs under the CPU key of the same layout (`SparseCPU`, `SparseCsrCPU`,
 * `QuantizedCPU`, `NestedTensorCPU`), not under `CPU`. This is the one
 * extension the fallback needs for them: the CPU key to run.
 */

#include <ATen/core/stack.h>
#include <c10/core/DispatchKey.h>

namespace c10 {
class OperatorHandle;
} // namespace c10

namespace accinte {

/**
 * The CPU fallback, cpuFallback(), with the CPU kernel of
 * `cpu_key` (a key of the CPU backend, such as `QuantizedCPU`) run on the
 * host copies, and the same checks and refusals.
 */
void cpuFallbackWithKey(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                        c10::DispatchKey cpu_key);

} // namespace accinte
