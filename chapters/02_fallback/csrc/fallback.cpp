#include <02_fallback/csrc/fallback.h>

#include <01_minimal_ops/csrc/extensions.h>

#include <ATen/native/CPUFallback.h>
#include <c10/core/Device.h>
#include <torch/library.h>

#include <optional>
#include <string_view>
#include <vector>

namespace accinte {
namespace {

// LITERALINCLUDE START: CH02_REFUSAL_LIST
/** An operator the fallback must not run, and why. */
struct NativeOnly {
  std::string_view name;
  std::string_view reason;
};

// NB: refused by name, so every overload of the operator is refused. A
// native kernel registered for an overload (a later chapter's) is found by
// the dispatcher before the fallback, so it supersedes the refusal.
constexpr NativeOnly kNativeOnly[] = {
    {"aten::is_set_to", // LITERALINCLUDE EMPHASIZE
     "it asks whether two tensors share the same memory, and the fallback's "
     "CPU copies never do, so the answer would always be False"},
};

/**
 * True when the operator returns a view of an input (a non-writing alias).
 * The fallback could only return a copy: writes through the result, or to
 * the input, would not show in the other.
 */
bool returnsView(const c10::FunctionSchema& schema) {
  for (const c10::Argument& result : schema.returns()) {
    const c10::AliasInfo* alias = result.alias_info();
    if (alias != nullptr && !alias->isWrite()) { // LITERALINCLUDE EMPHASIZE
      return true;
    }
  }
  return false;
}

/** The reason `op` is refused, or nullopt if the fallback may run it. */
std::optional<std::string_view> refusal(const c10::OperatorHandle& op) {
  const std::string& name = op.schema().name();
  for (const NativeOnly& entry : kNativeOnly) {
    if (entry.name == name) { // LITERALINCLUDE EMPHASIZE
      return entry.reason;
    }
  }
  if (returnsView(op.schema())) { // LITERALINCLUDE EMPHASIZE
    return "it returns a view of its input, and the fallback can only return "
           "a copy, so writes through one would not show in the other";
  }
  return std::nullopt;
}
// LITERALINCLUDE END: CH02_REFUSAL_LIST

// LITERALINCLUDE START: CH02_SAME_DEVICE
// NB: as for CUDA, an index may stay on the host for advanced indexing
// (`x[cpu_index]`); every other operator takes host tensors only as 0-dim
// scalars.
constexpr std::string_view kHostIndexOperators[] = {
    "aten::index", "aten::index_put", "aten::index_put_",
    "aten::_index_put_impl_"};

/**
 * The accinte device of an operator's tensors, where its results belong.
 *
 * Raises the error CUDA raises when the tensors are on two different devices
 * of the backend, or when a CPU tensor that is not a 0-dim scalar is mixed
 * with accinte tensors.
 *
 * NB: `at::native::cpu_fallback` does not check: it would copy tensors from
 * accinte:0, accinte:1 and the host to the CPU alike, compute, and put the
 * results on the device of the *first* tensor argument, silently moving data
 * between devices, or returning a CPU tensor for
 * `torch.where(cpu_scalar_condition, a, b)`.
 */
std::optional<c10::Device> accinteDeviceOf(const c10::OperatorHandle& op,
                                           const torch::jit::Stack& stack) {
  std::optional<c10::Device> accinte;
  std::optional<c10::Device> host;
  const auto mismatch = [&](c10::Device first, c10::Device second) {
    TORCH_CHECK(false,
                "Expected all tensors to be on the same device, but found at "
                "least two devices, ",
                first, " and ", second, "! (when checking arguments of ",
                op.schema().operator_name(), ")");
  };
  bool host_tensors_allowed = false;
  for (std::string_view name : kHostIndexOperators) {
    host_tensors_allowed |= name == op.schema().name();
  }
  const auto check = [&](const at::Tensor& tensor) {
    if (!tensor.defined()) {
      return;
    }
    if (tensor.is_privateuseone()) {
      if (!accinte.has_value()) {
        accinte = tensor.device();              // LITERALINCLUDE EMPHASIZE
      } else if (*accinte != tensor.device()) { // LITERALINCLUDE EMPHASIZE
        mismatch(*accinte, tensor.device());    // LITERALINCLUDE EMPHASIZE
      }
    } else if (tensor.dim() > 0 && !host_tensors_allowed) {
      host = tensor.device(); // LITERALINCLUDE EMPHASIZE
    }
  };
  const size_t num_arguments = op.schema().arguments().size();
  for (const c10::IValue& value : torch::jit::last(stack, num_arguments)) {
    if (value.isTensor()) {
      check(value.toTensor());
    } else if (value.isTensorList()) {
      for (const at::Tensor& tensor : value.toTensorVector()) {
        check(tensor);
      }
    } else if (value.isOptionalTensorList()) {
      for (const std::optional<at::Tensor>& tensor :
           value.toOptionalTensorVector()) {
        if (tensor.has_value()) {
          check(*tensor);
        }
      }
    }
  }
  if (accinte.has_value() && host.has_value()) { // LITERALINCLUDE EMPHASIZE
    mismatch(*accinte, *host);                   // LITERALINCLUDE EMPHASIZE
  }
  return accinte;
}

/** True when the operator names a device of its own (`device=`), which
 * `cpu_fallback` then honours for the results. */
bool hasDeviceArgument(const c10::OperatorHandle& op,
                       const torch::jit::Stack& stack) {
  const size_t num_arguments = op.schema().arguments().size();
  for (const c10::IValue& value : torch::jit::last(stack, num_arguments)) {
    if (value.isDevice()) {
      return true;
    }
  }
  return false;
}

/**
 * Moves the new (not aliased) results that `cpu_fallback` left on the host,
 * because its first tensor argument was a CPU scalar, to `device`.
 */
void moveResultsTo(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                   c10::Device device) {
  const auto& returns = op.schema().returns();
  const size_t first = stack->size() - returns.size();
  for (size_t i = 0; i < returns.size(); ++i) {
    if (returns[i].alias_info() != nullptr) {
      continue; // an input written in place: already where it belongs
    }
    c10::IValue& value = (*stack)[first + i];
    if (value.isTensor()) {
      const at::Tensor& result = value.toTensor();
      if (result.defined() && result.is_cpu()) { // LITERALINCLUDE EMPHASIZE
        value = result.to(device);               // LITERALINCLUDE EMPHASIZE
      }
    } else if (value.isTensorList()) {
      std::vector<at::Tensor> results = value.toTensorVector();
      for (at::Tensor& result : results) {
        if (result.defined() && result.is_cpu()) { // LITERALINCLUDE EMPHASIZE
          result = result.to(device);              // LITERALINCLUDE EMPHASIZE
        }
      }
      value = c10::List<at::Tensor>(std::move(results));
    }
  }
}
// LITERALINCLUDE END: CH02_SAME_DEVICE

} // namespace

// LITERALINCLUDE START: CH02_GLOBAL_FALLBACK
void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (const auto reason = refusal(op)) {
    TORCH_CHECK_NOT_IMPLEMENTED(
        false, "accinte refuses to run '", op.schema().operator_name(),
        "' on the CPU fallback: ", *reason,
        ". The backend must implement it natively (a PrivateUse1 kernel).");
  }
  const std::optional<c10::Device> device = accinteDeviceOf(op, *stack);
  const bool device_argument = hasDeviceArgument(op, *stack);
  // Copies the inputs to the host, runs the CPU kernel, copies the results
  // back (and writes in-place and out= results into the original tensors).
  at::native::cpu_fallback(op, stack);
  if (device.has_value() && !device_argument) {
    moveResultsTo(op, stack, *device);
  }
}

namespace {

// Chapter 01 owns the one TORCH_LIBRARY_IMPL(_, PrivateUse1, m) fallback and
// forwards to the kernel installed here, when this chapter is linked in.
struct InstallCpuFallback {
  InstallCpuFallback() {
    registerFallbackKernel(&cpuFallback);
  }
} install_cpu_fallback;
// LITERALINCLUDE END: CH02_GLOBAL_FALLBACK

// LITERALINCLUDE START: CH02_PER_OP_FALLBACK
// NB: the global fallback sees only operators that have no kernel at all for
// PrivateUse1. `aten::convolution` has one for every backend: ATen's
// CompositeExplicitAutograd kernel, which picks an implementation by device
// type and, for a device it does not know, calls `convolution_overrideable`,
// whose default kernel only raises. Registering the fallback by name for the
// convolution and its backward puts the CPU route before those composites.
//
// Two losses have a kernel for every backend too, one that allocates
// the reduced (0-dim) result and calls the `out=` overload. Through the
// fallback that runs the CPU's `out=` kernel, which first sizes its output as
// the unreduced loss and warns that a non-empty output was resized: a
// warning the CPU never gives for `F.mse_loss`. By name, the functional form
// runs the CPU's own functional kernel instead, and saves a copy.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name :
       {"convolution", "convolution_backward", "mse_loss", "smooth_l1_loss"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
  }
}
// LITERALINCLUDE END: CH02_PER_OP_FALLBACK

} // namespace

std::vector<std::string> nativeOnlyOperators() {
  std::vector<std::string> result;
  for (const NativeOnly& entry : kNativeOnly) {
    result.emplace_back(std::string(entry.name) + ": " +
                        std::string(entry.reason));
  }
  return result;
}

} // namespace accinte
