#pragma once

/**
 * @file
 * The CPU fallback: how accinte runs every ATen operator it has no kernel
 * for.
 *
 * The fallback copies the operator's accinte inputs to the host, runs ATen's
 * CPU kernel, and copies the results back to the device the inputs came
 * from. It is correct for almost every operator and fast for none: each call
 * pays a device-to-host copy per input and a host-to-device copy per output,
 * and waits for the device each time.
 */

#include <01_minimal_ops/csrc/extensions.h>

#include <accinte/export.h>

#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace c10 {
class OperatorHandle;
} // namespace c10

namespace accinte {

/**
 * Runs `op` on the CPU with the arguments on `stack` and leaves its results,
 * on the inputs' accinte device, on `stack`.
 *
 * Before anything is copied it refuses, with `NotImplementedError`, an
 * operator that returns a view (one the CPU can run: the CPU's own error
 * tells a view it cannot run) or that nativeOnlyOperators() lists,
 * and, with `RuntimeError`, arguments on two different accinte devices.
 */
void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

/** Calls `visit(element, tensor)` for every defined tensor of `value`, alone
 * (`element` -1) or in a list (`Tensor[]`, `Tensor?[]`). */
template <typename Visit>
void forEachTensorOf(const c10::IValue& value, Visit&& visit) {
  if (value.isTensor() && value.toTensor().defined()) {
    visit(int64_t{-1}, value.toTensor());
  } else if (value.isTensorList()) {
    const c10::List<at::Tensor> list = value.toTensorList();
    for (size_t element = 0; element < list.size(); ++element) {
      const at::Tensor tensor = list.get(element);
      if (tensor.defined()) {
        visit(static_cast<int64_t>(element), tensor);
      }
    }
  } else if (value.isOptionalTensorList()) {
    const c10::List<std::optional<at::Tensor>> list =
        value.toOptionalTensorList();
    for (size_t element = 0; element < list.size(); ++element) {
      const std::optional<at::Tensor> tensor = list.get(element);
      if (tensor.has_value() && tensor->defined()) {
        visit(static_cast<int64_t>(element), *tensor);
      }
    }
  }
}

/** Whether the schema marks `argument` as written (`Tensor(a!)`,
 * `Tensor(a!)?`, `Tensor(a!)[]`). */
bool isWritten(const c10::Argument& argument);

/**
 * Raises the CPU's error when a written argument partly overlaps one the
 * operator reads (the same memory, in place, is fine), as TensorIterator
 * checks on the CPU. The fallback checks the device tensors before it
 * copies them; chapter 09's native kernels check before they launch.
 */
void checkNoPartialOverlap(const c10::OperatorHandle& op,
                           c10::ArrayRef<c10::IValue> arguments);

/**
 * `fill_.Tensor(self, value)` with `value` on another device than `self`:
 * fills `self` with `value.item()`, as ATen's kernel does (so a CPU tensor
 * can be filled with an accinte scalar, as with a CUDA one), leaves `self`
 * on `stack` in place of the two arguments and returns true. Returns false,
 * and leaves `stack` alone, when both are on one device. The fallback and
 * chapter 09's native `fill_` both use it.
 */
bool fillFromAnotherDevice(torch::jit::Stack* stack);

// LITERALINCLUDE START: CH02_CONVOLUTION_KERNELS
/**
 * Native kernels of `aten::convolution` and `aten::convolution_backward`,
 * which take the place of this chapter's CPU route for them.
 *
 * This chapter registers the PrivateUse1 kernel of both operators (the CPU
 * route, which the dispatcher must find before ATen's composite kernels),
 * and an operator has one kernel per dispatch key: a later chapter that runs
 * them natively installs its kernels here instead (chapter 09). Each is
 * called with the operator's arguments on the stack and leaves its results
 * there, in the memory format PyTorch predicts for the device, as the CPU
 * route does.
 */
struct ConvolutionKernels {
  /** Runs `aten::convolution`. */
  BoxedKernel forward = nullptr;
  /** Runs `aten::convolution_backward`. */
  BoxedKernel backward = nullptr;
};

/** Installs native convolution kernels in place of the CPU route. */
void registerConvolutionKernels(ConvolutionKernels kernels);
// LITERALINCLUDE END: CH02_CONVOLUTION_KERNELS

/**
 * The operators (all overloads of each name) that the fallback refuses to
 * run: a CPU copy would give a wrong answer, so accinte must implement them
 * natively. Each entry is "aten::name: why". The fallback also refuses every
 * operator that returns a view of an input, which this list does not repeat.
 */
ACCINTE_EXPORT std::vector<std::string> nativeOnlyOperators();

} // namespace accinte
