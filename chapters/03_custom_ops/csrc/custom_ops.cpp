// Chapter 03: the `accinte` operator namespace. `accinte::custom_abs` is
// defined here with kernels for three dispatch keys (accinte, CPU, Meta);
// `accinte::scaled_add` is defined in Python and launches its accinte kernel
// through launchScaledAdd().

#include <01_minimal_ops/csrc/kernel.h>
#include <03_custom_ops/csrc/custom_ops.h>

#include <ATen/MemoryOverlap.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace accinte {
namespace {

// LITERALINCLUDE START: CH03_SCHEMA
// NB: TORCH_LIBRARY may appear once per namespace in the whole process; it
// creates `accinte`. Every other file, C++ or Python, that adds operators
// to it does so as a fragment (TORCH_LIBRARY_FRAGMENT, torch.library's
// "FRAGMENT" libraries and custom_op).
TORCH_LIBRARY(accinte, m) {
  m.def("custom_abs(Tensor self) -> Tensor");
}
// LITERALINCLUDE END: CH03_SCHEMA

// LITERALINCLUDE START: CH03_ABS_CHECK
/**
 * The argument checks of `custom_abs`, shared by every kernel, so that an
 * error looks the same on accinte, on the CPU and while tracing on meta or
 * fake tensors.
 */
void checkCustomAbsInput(const at::Tensor& self) {
  const at::ScalarType dtype = self.scalar_type();
  TORCH_CHECK(at::isFloatingType(dtype) ||
                  at::isIntegralType(dtype, /*includeBool=*/false),
              "accinte::custom_abs: expected a floating-point or integer "
              "tensor, got ",
              dtype);
}
// LITERALINCLUDE END: CH03_ABS_CHECK

// LITERALINCLUDE START: CH03_ABS_ACCINTE
/**
 * The accinte kernel: allocates the (contiguous) result on the input's
 * device and enqueues the computation on that device's current stream.
 *
 * NB: everything that can fail is checked before the launch; the kernel
 * itself only runs ATen's CPU `abs` on views of device memory.
 */
at::Tensor customAbsAccinte(const at::Tensor& self) {
  checkCustomAbsInput(self);
  at::Tensor out = at::empty(self.sizes(), self.options());
  if (self.numel() == 0) {
    return out;
  }
  const KernelTensor source(self);
  const KernelTensor target(out);
  launchOnCurrentStream(self.device().index(),
                        {source.buffer(), target.buffer()}, [source, target] {
                          at::Tensor result = target.cpuView();
                          at::abs_out(result, source.cpuView());
                        });
  return out;
}

TORCH_LIBRARY_IMPL(accinte, PrivateUse1, m) {
  m.impl("custom_abs", TORCH_FN(customAbsAccinte));
}
// LITERALINCLUDE END: CH03_ABS_ACCINTE

// LITERALINCLUDE START: CH03_ABS_CPU
/** The CPU kernel: the same computation and the same result layout. */
at::Tensor customAbsCpu(const at::Tensor& self) {
  checkCustomAbsInput(self);
  // NB: a backend kernel runs below autograd, but the ATen calls it makes
  // would dispatch to autograd again (and refuse `abs_out` on an input that
  // requires grad). Autograd for custom_abs belongs to its own key.
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  at::Tensor out = at::empty(self.sizes(), self.options());
  at::abs_out(out, self);
  return out;
}

TORCH_LIBRARY_IMPL(accinte, CPU, m) {
  m.impl("custom_abs", TORCH_FN(customAbsCpu));
}
// LITERALINCLUDE END: CH03_ABS_CPU

// LITERALINCLUDE START: CH03_ABS_META
/**
 * The Meta kernel: the result's dtype, sizes and strides, with no data.
 * FakeTensor runs it whenever a tracer (torch.compile, torch.export) meets
 * the operator.
 *
 * NB: under dynamic shapes the sizes are symbolic (`c10::SymInt`); reading
 * them with `sizes()` would fail, so the kernel stays in SymInt form.
 */
at::Tensor customAbsMeta(const at::Tensor& self) {
  checkCustomAbsInput(self);
  return at::empty_symint(self.sym_sizes(), self.options());
}

TORCH_LIBRARY_IMPL(accinte, Meta, m) {
  m.impl("custom_abs", TORCH_FN(customAbsMeta));
}
// LITERALINCLUDE END: CH03_ABS_META

} // namespace

// LITERALINCLUDE START: CH03_SCALED_ADD_LAUNCH
void launchScaledAdd(const at::Tensor& out, const at::Tensor& x,
                     const at::Tensor& y, double alpha) {
  for (const at::Tensor* tensor : {&out, &x, &y}) {
    TORCH_CHECK(tensor->is_privateuseone() && tensor->device() == x.device(),
                "launchScaledAdd: expected tensors on one accinte device, "
                "got ",
                out.device(), ", ", x.device(), " and ", y.device());
    TORCH_CHECK(tensor->sizes() == x.sizes() &&
                    tensor->scalar_type() == x.scalar_type(),
                "launchScaledAdd: expected tensors of one shape and dtype");
  }
  TORCH_CHECK(at::isFloatingType(x.scalar_type()),
              "launchScaledAdd: expected floating-point tensors, got ",
              x.scalar_type());
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, x);
  at::assert_no_overlap(out, y);
  if (out.numel() == 0) {
    return;
  }
  const KernelTensor target(out);
  const KernelTensor first(x);
  const KernelTensor second(y);
  launchOnCurrentStream(
      x.device().index(), {target.buffer(), first.buffer(), second.buffer()},
      [target, first, second, alpha] {
        at::Tensor result = target.cpuView();
        at::add_out(result, first.cpuView(), second.cpuView(), alpha);
      });
}
// LITERALINCLUDE END: CH03_SCALED_ADD_LAUNCH

} // namespace accinte
