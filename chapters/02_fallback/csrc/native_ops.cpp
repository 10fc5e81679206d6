// Native accinte kernels: operators that run on the device's stream instead
// of taking the CPU fallback's round trip through host memory.

#include <01_minimal_ops/csrc/kernel.h>

#include <ATen/MemoryOverlap.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/Resize.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/abs_native.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <torch/library.h>

namespace accinte {
namespace {

// LITERALINCLUDE START: CH02_ABS_STUB
/**
 * The accinte kernel of `abs_stub`.
 *
 * ATen's own `abs.out` already did the host-side work before calling the
 * stub: it checked dtypes, resized the output and built a TensorIterator over
 * the accinte tensors. The kernel launched here views the same device memory
 * as CPU tensors and runs ATen's CPU `abs` on them, on the stream's worker.
 *
 * NB: the kernel calls the CPU operator, not `abs_stub(kCPU, ...)`: calling
 * a stub directly from outside libtorch depends on CPU-capability macros of
 * PyTorch's own build (AVX2, AVX512) that its installed headers do not set.
 */
void absKernel(at::TensorIteratorBase& iter) {
  if (iter.numel() == 0) {
    return;
  }
  const KernelTensor out(iter.tensor(0));
  const KernelTensor self(iter.tensor(1));
  launchOnCurrentStream(iter.device(0).index(), {out.buffer(), self.buffer()},
                        [out, self] {
                          at::Tensor result = out.cpuView();
                          at::abs_out(result, self.cpuView());
                        });
}

// LITERALINCLUDE END: CH02_ABS_STUB

// LITERALINCLUDE START: CH02_NEG_KERNEL
/**
 * Writes `-self` into `out` with a kernel on the current stream of their
 * device.
 *
 * NB: everything that can fail is checked here, on the host, before the
 * launch, as CUDA does: a kernel that fails on the stream's worker can only
 * report a sticky launch failure at the next synchronization, far from the
 * call that caused it.
 */
void negInto(const at::Tensor& self, const at::Tensor& out) {
  TORCH_CHECK(self.scalar_type() != at::kBool,
              "Negation, the `-` operator, on a bool tensor is not supported. "
              "If you are trying to invert a mask, use the `~` or "
              "`logical_not()` operator instead.");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "Found dtype ",
              out.scalar_type(), " but expected ", self.scalar_type());
  TORCH_CHECK(out.device() == self.device(),
              "Expected all tensors to be on the same device, but found at "
              "least two devices, ",
              self.device(), " and ", out.device(), "!");
  at::native::resize_output(out, self.sizes()); // LITERALINCLUDE EMPHASIZE
  at::assert_no_internal_overlap(out);
  at::assert_no_partial_overlap(out, self);
  if (self.numel() == 0) {
    return;
  }
  const KernelTensor source(self);
  const KernelTensor target(out);
  launchOnCurrentStream(self.device().index(), // LITERALINCLUDE EMPHASIZE
                        {source.buffer(), target.buffer()}, [source, target] {
                          at::Tensor result = target.cpuView();
                          at::neg_out(result, source.cpuView());
                        });
}

at::Tensor neg(const at::Tensor& self) {
  at::Tensor out = at::empty_like(self);
  negInto(self, out);
  return out;
}

at::Tensor& neg_(at::Tensor& self) {
  negInto(self, self);
  return self;
}

at::Tensor& neg_out(const at::Tensor& self, at::Tensor& out) {
  negInto(self, out);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("neg", TORCH_FN(neg));         // LITERALINCLUDE EMPHASIZE
  m.impl("neg_", TORCH_FN(neg_));       // LITERALINCLUDE EMPHASIZE
  m.impl("neg.out", TORCH_FN(neg_out)); // LITERALINCLUDE EMPHASIZE
}
// LITERALINCLUDE END: CH02_NEG_KERNEL

// LITERALINCLUDE START: CH02_ABS_OUT
// NB: `abs` and `abs_` are CompositeExplicitAutograd: for every backend they
// allocate a result and call `abs.out`, which is registered per backend. So
// the stub is reached by registering ATen's own `abs.out` for PrivateUse1;
// its TensorIterator then asks the stub for iter.device_type(), PrivateUse1.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("abs.out", TORCH_FN(at::native::abs_out));
}
// LITERALINCLUDE END: CH02_ABS_OUT

// LITERALINCLUDE START: CH02_VIEW_OPS
// NB: views must never take the CPU fallback, which could only return a copy
// (it refuses them). These three are the strided views that ATen implements
// per backend; its implementations only rewrite sizes, strides and dtype over
// the input's storage, so they serve accinte unchanged.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
  m.impl("unfold", TORCH_FN(at::native::unfold));
}
// LITERALINCLUDE END: CH02_VIEW_OPS

} // namespace
} // namespace accinte

// LITERALINCLUDE START: CH02_ABS_REGISTER_STUB
// NB: the macro names helpers of ATen's own namespace, so it is used there.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(abs_stub, &accinte::absKernel)
} // namespace at::native
// LITERALINCLUDE END: CH02_ABS_REGISTER_STUB
