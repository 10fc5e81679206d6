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

#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace accinte {

/**
 * The ATen operators ("name.overload", or "name" for the default overload)
 * that run as native accinte kernels instead of taking the CPU fallback.
 */
ACCINTE_EXPORT std::vector<std::string> nativeKernelOperators();

/**
 * One operator run as the operators of nativeOperators() run, for a kernel of
 * this chapter that is registered on its own because it does some work of its
 * own first (`index.Tensor` expands boolean masks; the convolutions are
 * installed behind chapter 02's registration).
 *
 * Calling it checks the devices, runs `meta` on Meta stand-ins of the
 * arguments, allocates the results on the device (or resizes the `out=`
 * arguments) and launches ATen's CPU kernel of the operator, or of
 * `out_overload`, on the device memory, in one launch on the current stream.
 */
class NativeKernel {
 public:
  /**
   * @param name the operator, "name.overload" in the aten namespace.
   * @param out_overload the `out=` overload the CPU kernel runs as, or ""
   *   for the operator itself.
   * @param meta the host check: a function with the operator's signature
   *   that checks Meta stand-ins of the arguments and returns Meta results
   *   of the sizes, strides and dtypes the CPU kernel gives.
   */
  NativeKernel(std::string_view name, std::string_view out_overload,
               c10::KernelFunction meta);

  /** Runs the operator on its arguments on `stack`; leaves its results. */
  void operator()(torch::jit::Stack* stack) const;

 private:
  c10::OperatorHandle op_;
  std::shared_ptr<c10::OperatorKernel> kernel_;
};

/**
 * Queues one kernel on the current stream of `device` that runs the CPU
 * kernel of `cpu_op` on `arguments`, as every operator of the table does:
 * on the stream's worker, each accinte tensor (alone or in a list) is a CPU
 * view of its device memory, a 0-dim CPU tensor is the copy taken at this
 * call, and the rest is passed by value.
 *
 * With `outputs` (device tensors, alone or in lists), `cpu_op` is a
 * functional operator without an `out=` overload: its results are copied
 * into them, which must have their sizes and dtypes.
 *
 * The caller has checked the arguments on the host: a CPU kernel that fails
 * on the worker fails the launch, reported by the next synchronization.
 */
ACCINTE_EXPORT void launchCpuKernel(c10::DeviceIndex device,
                                    const c10::OperatorHandle& cpu_op,
                                    c10::ArrayRef<c10::IValue> arguments,
                                    c10::ArrayRef<c10::IValue> outputs = {});

} // namespace accinte
