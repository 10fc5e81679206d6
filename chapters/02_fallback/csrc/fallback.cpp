#include <02_fallback/csrc/fallback.h>
#include <02_fallback/csrc/layout_fallback.h>

#include <01_minimal_ops/csrc/extensions.h>
#include <01_minimal_ops/csrc/runtime.h>

#include <ATen/MemoryOverlap.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/ConvUtils.h>
#include <c10/core/Device.h>
#include <torch/library.h>

#include <atomic>
#include <optional>
#include <string_view>
#include <utility>
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

/** The reason `op` is refused, or nullopt if the fallback may run it with
 * the CPU kernels of `cpu_key`. */
std::optional<std::string_view> refusal(const c10::OperatorHandle& op,
                                        c10::DispatchKey cpu_key) {
  const std::string& name = op.schema().name();
  for (const NativeOnly& entry : kNativeOnly) {
    if (entry.name == name) { // LITERALINCLUDE EMPHASIZE
      return entry.reason;
    }
  }
  // NB: a view the CPU has no kernel for either (a sparse `view`) goes on,
  // to the CPU's own "Could not run" error.
  if (returnsView(op.schema()) && // LITERALINCLUDE EMPHASIZE
      op.hasComputedKernelForDispatchKey(cpu_key)) {
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
 * of the backend, or when a CPU tensor that is not a 0-dim scalar input (one
 * of more dimensions, or one the operator writes) is mixed with accinte
 * tensors.
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
  // NB: a host tensor is only ever an input. One the operator writes (a
  // 0-dim `out=` or `self` too) is refused as TensorIterator refuses it for
  // CUDA: the results belong on the device.
  const auto check = [&](const at::Tensor& tensor, bool written) {
    if (!tensor.defined()) {
      return;
    }
    if (tensor.is_privateuseone()) {
      if (!accinte.has_value()) {
        accinte = tensor.device();              // LITERALINCLUDE EMPHASIZE
      } else if (*accinte != tensor.device()) { // LITERALINCLUDE EMPHASIZE
        mismatch(*accinte, tensor.device());    // LITERALINCLUDE EMPHASIZE
      }
    } else if (written || (tensor.dim() > 0 && !host_tensors_allowed)) {
      host = tensor.device(); // LITERALINCLUDE EMPHASIZE
    }
  };
  // LITERALINCLUDE END: CH02_SAME_DEVICE
  // LITERALINCLUDE START: CH02_DEVICE_WALK
  const auto& arguments = op.schema().arguments();
  const auto values = torch::jit::last(stack, arguments.size());
  for (size_t index = 0; index < values.size(); ++index) {
    const c10::IValue& value = values[index];
    const bool written = isWritten(arguments[index]);
    if (value.isTensor()) {
      check(value.toTensor(), written);
    } else if (value.isTensorList()) {
      for (const at::Tensor& tensor : value.toTensorVector()) {
        check(tensor, written);
      }
    } else if (value.isOptionalTensorList()) {
      for (const std::optional<at::Tensor>& tensor :
           value.toOptionalTensorVector()) {
        if (tensor.has_value()) {
          check(*tensor, written);
        }
      }
    }
  }
  if (accinte.has_value() && host.has_value()) { // LITERALINCLUDE EMPHASIZE
    mismatch(*accinte, *host);                   // LITERALINCLUDE EMPHASIZE
  }
  return accinte;
}
// LITERALINCLUDE END: CH02_DEVICE_WALK

// LITERALINCLUDE START: CH02_MOVE_RESULTS

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
// LITERALINCLUDE END: CH02_MOVE_RESULTS

// LITERALINCLUDE START: CH02_UNDECLARED_WRITES
/** An operator whose CPU kernel writes arguments that its schema does not
 * mark as written. */
struct UndeclaredWrites {
  std::string_view name;
  std::string_view arguments[2];
};

// NB: `cpu_fallback` writes back exactly the arguments the schema marks as
// written: `Tensor(a!)`, `Tensor(a!)?`, `Tensor(a!)[]`, `Tensor(a!)?[]`.
// These schemas say `Tensor? running_mean` although, in training, the
// kernels update the running statistics in place; the host copies would be
// updated and dropped. (The newer `_native_batch_norm_legit` and
// `_batch_norm_with_update` say `Tensor(a!) running_mean`.)
constexpr UndeclaredWrites kUndeclaredWrites[] = {
    {"aten::native_batch_norm", // LITERALINCLUDE EMPHASIZE
     {"running_mean", "running_var"}},
    {"aten::batch_norm_update_stats", // LITERALINCLUDE EMPHASIZE
     {"running_mean", "running_var"}},
};
// LITERALINCLUDE END: CH02_UNDECLARED_WRITES

// LITERALINCLUDE START: CH02_WRITE_BACK
/**
 * The accinte tensors an operator writes without declaring it, each with a
 * host copy that takes its place on the stack. `cpu_fallback` leaves a host
 * tensor as it is, so the CPU kernel updates the copy, and writeBack()
 * copies it into the device tensor.
 */
class UndeclaredWriteBack {
 public:
  UndeclaredWriteBack(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
    const c10::FunctionSchema& schema = op.schema();
    for (const UndeclaredWrites& entry : kUndeclaredWrites) {
      if (entry.name != schema.name()) {
        continue;
      }
      const size_t first = stack->size() - schema.arguments().size();
      for (std::string_view name : entry.arguments) {
        const std::optional<int> index =
            schema.argumentIndexWithName(std::string(name));
        TORCH_INTERNAL_ASSERT(index.has_value(), schema, " has no ", name);
        c10::IValue& value = (*stack)[first + *index];
        if (value.isTensor() && value.toTensor().is_privateuseone()) {
          at::Tensor device = value.toTensor();
          at::Tensor host = device.cpu(); // LITERALINCLUDE EMPHASIZE
          value = host;
          copies_.emplace_back(std::move(device), std::move(host));
        }
      }
    }
  }

  /** Copies the host copies, as the CPU kernel left them, to the device. */
  void writeBack() const {
    for (const auto& [device, host] : copies_) {
      device.copy_(host); // LITERALINCLUDE EMPHASIZE
    }
  }

 private:
  std::vector<std::pair<at::Tensor, at::Tensor>> copies_;
};
// LITERALINCLUDE END: CH02_WRITE_BACK

} // namespace

bool isWritten(const c10::Argument& argument) {
  const c10::AliasInfo* alias = argument.alias_info();
  return alias != nullptr && alias->isWrite();
}

// LITERALINCLUDE START: CH02_PARTIAL_OVERLAP
void checkNoPartialOverlap(const c10::OperatorHandle& op,
                           c10::ArrayRef<c10::IValue> arguments) {
  const auto& schema = op.schema().arguments();
  // NB: only a strided tensor's elements are addressed through its strides;
  // a sparse or nested tensor's parts are tensors of their own.
  const auto strided = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && !t.is_nested();
  };
  // What the operator reads, with its place in a list (-1: alone).
  std::vector<std::pair<int64_t, at::Tensor>> read;
  for (size_t index = 0; index < arguments.size(); ++index) {
    // NB: a 0-dim `value` (`fill_`, `masked_fill_`, `index_fill_`) is a
    // number the CPU kernel reads before it writes: `x.fill_(x[2])` is fine.
    const bool number = schema[index].name() == "value" &&
                        arguments[index].isTensor() &&
                        arguments[index].toTensor().dim() == 0;
    if (!isWritten(schema[index]) && !number) {
      forEachTensorOf(arguments[index], [&](int64_t element, at::Tensor t) {
        read.emplace_back(element, std::move(t));
      });
    }
  }
  for (size_t index = 0; index < arguments.size(); ++index) {
    if (!isWritten(schema[index])) {
      continue;
    }
    forEachTensorOf(arguments[index], [&](int64_t element, at::Tensor out) {
      for (const auto& [other, input] : read) {
        // NB: two lists pair element by element (`_foreach_*`); a tensor
        // alone meets every element of a list (`cat`'s inputs).
        if ((element < 0 || other < 0 || element == other) && strided(out) &&
            strided(input)) {
          at::assert_no_partial_overlap(out, input);
        }
      }
    });
  }
}
// LITERALINCLUDE END: CH02_PARTIAL_OVERLAP

// NB: without this, the fallback would refuse the host `self` as a written
// host tensor; and `cpu_fallback` could not write back into it anyway.
bool fillFromAnotherDevice(torch::jit::Stack* stack) {
  at::Tensor self = (*stack)[stack->size() - 2].toTensor();
  const at::Tensor value = stack->back().toTensor();
  if (self.device() == value.device()) {
    return false;
  }
  TORCH_CHECK(value.dim() == 0,
              "fill_ only supports 0-dimension value tensor but got tensor "
              "with ",
              value.dim(), " dimensions.");
  self.fill_(value.item());
  torch::jit::drop(*stack, 2);
  torch::jit::push(*stack, std::move(self));
  return true;
}

// LITERALINCLUDE START: CH02_GLOBAL_FALLBACK
void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  cpuFallbackWithKey(op, stack, c10::DispatchKey::CPU);
}

void cpuFallbackWithKey(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                        c10::DispatchKey cpu_key) {
  if (const auto reason = refusal(op, cpu_key)) {
    TORCH_CHECK_NOT_IMPLEMENTED(
        false, "accinte refuses to run '", op.schema().operator_name(),
        "' on the CPU fallback: ", *reason,
        ". The backend must implement it natively (a PrivateUse1 kernel).");
  }
  const c10::FunctionSchema& schema = op.schema();
  if (schema.name() == "aten::fill_" && schema.overload_name() == "Tensor" &&
      fillFromAnotherDevice(stack)) {
    return;
  }
  const std::optional<c10::Device> device = accinteDeviceOf(op, *stack);
  // NB: the CPU kernel's own check would see the host copies, which never
  // overlap: `torch.cat([x[2:], x[:2]], out=x)` would return a result.
  checkNoPartialOverlap(op,
                        torch::jit::last(*stack, schema.arguments().size()));
  const bool device_argument = hasDeviceArgument(op, *stack);
  const UndeclaredWriteBack undeclared(op, stack);
  // Copies the inputs to the host, runs the CPU kernel, copies the results
  // back (and writes in-place and out= results into the original tensors).
  try {
    at::native::cpu_fallback(op, stack, /*error_on_views=*/false, cpu_key);
  } catch (const c10::AcceleratorError& error) {
    // NB: the copies wait for the device, which a stream being captured
    // into a graph refuses; the error names the operator to give a kernel.
    TORCH_CHECK(!device.has_value() || !isCapturing(device->index()),
                "accinte: '", schema.operator_name(),
                "' has no accinte kernel, and the CPU fallback's copies "
                "cannot be captured into a graph (chapter 15_graphs); it "
                "needs a native kernel (chapter 09_native_kernels). ",
                error.what_without_backtrace());
    throw;
  }
  undeclared.writeBack();
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

// LITERALINCLUDE START: CH02_CONVOLUTION_FORMAT
// NB: what a convolution returns on a device PyTorch does not know is part of
// its contract: PyTorch's fake convolution, which torch.compile and export
// trace with, gives such a device (ConvBackend::Overrideable) results in the
// memory format _determine_backend_memory_format names for it, contiguous,
// and compiled code checks the strides it gets against them. The CPU returns
// channels-last results for channels-last input, so the fallback's results
// are put in the device's format before they are returned.
void convolutionFallback(const c10::OperatorHandle& op,
                         torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t first = stack->size() - schema.arguments().size();
  // convolution(input, weight, ...); convolution_backward(grad_output,
  // input, weight, ...).
  const size_t input =
      schema.operator_name().name == "aten::convolution" ? 0 : 1;
  const at::MemoryFormat format = at::native::_determine_backend_memory_format(
      (*stack)[first + input].toTensor(),
      (*stack)[first + input + 1].toTensor(),
      at::native::ConvBackend::Overrideable);
  cpuFallback(op, stack);
  const size_t results = stack->size() - schema.returns().size();
  for (size_t i = results; i < stack->size(); ++i) {
    if (!(*stack)[i].isTensor()) {
      continue;
    }
    const at::Tensor result = (*stack)[i].toTensor();
    if (result.defined()) {
      (*stack)[i] = result.contiguous(format); // LITERALINCLUDE EMPHASIZE
    }
  }
}
// LITERALINCLUDE END: CH02_CONVOLUTION_FORMAT

// The native convolution kernels a later chapter installed, if any.
// NB: constant-initialized, so installing from another library's static
// initializer never runs before them.
std::atomic<BoxedKernel> installed_convolution{nullptr};
std::atomic<BoxedKernel> installed_convolution_backward{nullptr};

/** `convolution` and `convolution_backward`: the native kernel a later
 * chapter installed, or else the CPU route. */
void convolutionKernel(const c10::OperatorHandle& op,
                       torch::jit::Stack* stack) {
  const BoxedKernel native =
      op.schema().operator_name().name == "aten::convolution"
          ? installed_convolution.load()
          : installed_convolution_backward.load();
  if (native != nullptr) {
    native(op, stack);
  } else {
    convolutionFallback(op, stack);
  }
}

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
//
// `_batch_norm_no_update` (batch norm with the running statistics, not
// updated) has a kernel for every backend that calls the CPU's batch norm
// directly, and so raises for any other device.
//
// The convolutions' registration is also where a later chapter's native
// kernels plug in (registerConvolutionKernels): this one stays the
// operators' PrivateUse1 kernel and hands them on.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name :
       {"mse_loss", "smooth_l1_loss", "_batch_norm_no_update"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
  }
  for (const char* name : {"convolution", "convolution_backward"}) {
    m.impl(name,
           torch::CppFunction::makeFromBoxedFunction<&convolutionKernel>());
  }
}
// LITERALINCLUDE END: CH02_PER_OP_FALLBACK

} // namespace

void registerConvolutionKernels(ConvolutionKernels kernels) {
  installed_convolution.store(kernels.forward);
  installed_convolution_backward.store(kernels.backward);
}

std::vector<std::string> nativeOnlyOperators() {
  std::vector<std::string> result;
  for (const NativeOnly& entry : kNativeOnly) {
    result.emplace_back(std::string(entry.name) + ": " +
                        std::string(entry.reason));
  }
  return result;
}

} // namespace accinte
