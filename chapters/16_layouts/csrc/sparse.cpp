// Chapter 16, sparse tensors: COO (`SparsePrivateUse1`) and the compressed
// layouts CSR, CSC, BSR and BSC (`SparseCsrPrivateUse1`) on accinte.
//
// A sparse accinte tensor is a small header (sizes, nnz, whether it is
// coalesced) around ordinary dense accinte tensors: the indices and the
// values. ATen's sparse kernels that CPU and CUDA share work on those dense
// tensors through other ATen operators, so they work on accinte as they are:
// this file registers them for accinte's sparse keys. Where CPU and CUDA
// have kernels of their own (the sparse matrix products, sparse + sparse),
// a boxed fallback on each sparse key runs the CPU's sparse kernel and
// moves the results back, as chapter 02's fallback does for dense tensors;
// coalescing, which sparse code calls most, is a kernel of its own here,
// made of dense operators on the device.

#include <02_fallback/csrc/layout_fallback.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_dimI_native.h>
#include <ATen/ops/_dimV_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_broadcast_to_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/permute_native.h>
#include <ATen/ops/resize_as_sparse_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/select_copy_native.h>
#include <ATen/ops/select_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/unique_consecutive.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/zero_native.h>
#include <ATen/ops/zeros.h>
#include <c10/core/Device.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/DispatchKey.h>
#include <torch/library.h>

#include <optional>
#include <utility>
#include <vector>

namespace accinte {
namespace {

using at::Tensor;

// LITERALINCLUDE START: CH16_SPARSE_FALLBACK_KERNEL
// NB: chapter 02's fallback with the sparse layout's CPU key: the same
// device checks and refusals, the arguments copied to the host as sparse
// tensors (`Tensor.cpu()` moves the indices and values), the CPU's sparse
// kernel, and the results moved back, sparse or dense as the CPU returned
// them.
void sparseCooFallback(const c10::OperatorHandle& op,
                       torch::jit::Stack* stack) {
  cpuFallbackWithKey(op, stack, c10::DispatchKey::SparseCPU);
}

void sparseCompressedFallback(const c10::OperatorHandle& op,
                              torch::jit::Stack* stack) {
  cpuFallbackWithKey(op, stack, c10::DispatchKey::SparseCsrCPU);
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparseCooFallback>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(
      torch::CppFunction::makeFromBoxedFunction<&sparseCompressedFallback>());
}
// LITERALINCLUDE END: CH16_SPARSE_FALLBACK_KERNEL

// LITERALINCLUDE START: CH16_SPARSE_BY_NAME
// NB: a fallback serves only the operators that have no kernel at all for
// the key, and a CompositeExplicitAutograd kernel is a kernel for every
// backend key, sparse ones included. These operators have one beside their
// SparseCPU kernel, and it assumes a dense tensor: `mv` would call `addmv_`,
// `sum` would return a sparse tensor where the CPU returns a dense one.
// Registering the fallback by name puts the CPU's sparse kernel first.
TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  for (const char* name :
       {"mv", "sum", "abs", "abs_", "isinf", "nan_to_num", "nan_to_num_",
        "narrow_copy", "rad2deg", "rad2deg_", "rad2deg.out", "deg2rad",
        "deg2rad_", "deg2rad.out", "zeros.out"}) {
    m.impl(name,
           torch::CppFunction::makeFromBoxedFunction<&sparseCooFallback>());
  }
}

// NB: the compressed layouts meet a second kind: a structured operator
// (`mm`, `addmm`, `sin`...) has a generated CompositeExplicitAutograd-
// NonFunctional kernel, which serves SparseCsrPrivateUse1 too and calls the
// dense `out=` kernel (`mm` fails with "addmm: computation on CPU is not
// implemented for SparseCsr + SparseCsr @ Strided"). test_sparse_routes.py
// asks the dispatcher for every operator left to a composite.
TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  for (const char* name : {"mm",
                           "addmm",
                           "add.Tensor",
                           "add_.Tensor",
                           "mul.Tensor",
                           "mul_.Tensor",
                           "mul.Scalar",
                           "mul_.Scalar",
                           "sum",
                           "sum.dim_IntList",
                           "threshold_backward",
                           "abs",
                           "abs_",
                           "_conj_physical",
                           "conj_physical_",
                           "asin",
                           "asin_",
                           "asinh",
                           "asinh_",
                           "atan",
                           "atan_",
                           "atanh",
                           "atanh_",
                           "ceil",
                           "ceil_",
                           "deg2rad",
                           "deg2rad_",
                           "deg2rad.out",
                           "erf",
                           "erf_",
                           "erfinv",
                           "erfinv_",
                           "expm1",
                           "expm1_",
                           "floor",
                           "floor_",
                           "frac",
                           "frac_",
                           "isinf",
                           "isneginf",
                           "isposinf",
                           "log1p",
                           "log1p_",
                           "neg",
                           "neg_",
                           "rad2deg",
                           "rad2deg_",
                           "rad2deg.out",
                           "round",
                           "round_",
                           "sgn",
                           "sgn_",
                           "sign",
                           "sign_",
                           "signbit",
                           "sin",
                           "sin_",
                           "sinh",
                           "sinh_",
                           "sqrt",
                           "sqrt_",
                           "tan",
                           "tan_",
                           "tanh",
                           "tanh_",
                           "trunc",
                           "trunc_"}) {
    m.impl(
        name,
        torch::CppFunction::makeFromBoxedFunction<&sparseCompressedFallback>());
  }
}
// LITERALINCLUDE END: CH16_SPARSE_BY_NAME

// LITERALINCLUDE START: CH16_SPARSE_WRITE_BACK
/**
 * How `cpu_fallback` writes an in-place or `out=` result back: it calls
 * `_copy_from_and_resize(host_result, device_tensor)`, which dispatches on
 * the device tensor's sparse key. A sparse result may hold more or fewer
 * elements than the tensor it replaces, so the copy resizes first.
 */
Tensor copyFromAndResizeCoo(const Tensor& self, const Tensor& dst) {
  // NB: `copy_` on sparse tensors (copy_sparse_wrapper_) resizes the
  // destination to the source's nnz, and moves indices and values.
  dst.copy_(self);
  return dst;
}

Tensor copyFromAndResizeCompressed(const Tensor& self, const Tensor& dst) {
  // NB: the compressed `copy_` needs the same nnz on both sides.
  at::native::resize_as_sparse_compressed_(dst, self);
  dst.copy_(self);
  return dst;
}
// LITERALINCLUDE END: CH16_SPARSE_WRITE_BACK

// LITERALINCLUDE START: CH16_SPARSE_GUARDS
// NB: a new sparse tensor's header takes the *current* device of its type,
// and asserts that its indices and values are on it: the kernels that
// PyTorch generates for CUDA set the current device from the `device`
// argument, or from the first tensor's, first. These wrappers do the same
// for the kernels that create a tensor, so that a copy to accinte:1 works.
using OptionalDtype = std::optional<at::ScalarType>;
using OptionalLayout = std::optional<at::Layout>;
using OptionalDevice = std::optional<c10::Device>;
using OptionalBool = std::optional<bool>;
using OptionalFormat = std::optional<at::MemoryFormat>;

Tensor cooWithDimsAndTensors(int64_t sparse_dim, int64_t dense_dim,
                             c10::SymIntArrayRef size, const Tensor& indices,
                             const Tensor& values, OptionalDtype dtype,
                             OptionalLayout layout, OptionalDevice device,
                             OptionalBool pin_memory,
                             OptionalBool is_coalesced) {
  const c10::OptionalDeviceGuard guard(device); // LITERALINCLUDE EMPHASIZE
  return at::native::new_with_dims_and_tensor_sparse_symint(
      sparse_dim, dense_dim, size, indices, values, dtype, layout, device,
      pin_memory, is_coalesced);
}
// LITERALINCLUDE END: CH16_SPARSE_GUARDS

Tensor cooWithDims(int64_t sparse_dim, int64_t dense_dim, at::IntArrayRef size,
                   OptionalDtype dtype, OptionalLayout layout,
                   OptionalDevice device, OptionalBool pin_memory) {
  const c10::OptionalDeviceGuard guard(device);
  return at::native::new_with_dims_sparse(sparse_dim, dense_dim, size, dtype,
                                          layout, device, pin_memory);
}

Tensor emptyCoo(at::IntArrayRef size, OptionalDtype dtype,
                OptionalLayout layout, OptionalDevice device,
                OptionalBool pin_memory, OptionalFormat format) {
  const c10::OptionalDeviceGuard guard(device);
  return at::native::empty_sparse(size, dtype, layout, device, pin_memory,
                                  format);
}

Tensor emptyCompressed(at::IntArrayRef size, OptionalDtype dtype,
                       OptionalLayout layout, OptionalDevice device,
                       OptionalBool pin_memory, OptionalFormat format) {
  const c10::OptionalDeviceGuard guard(device);
  return at::native::empty_sparse_compressed(size, dtype, layout, device,
                                             pin_memory, format);
}

Tensor emptyLikeCoo(const Tensor& self, OptionalDtype dtype,
                    OptionalLayout layout, OptionalDevice device,
                    OptionalBool pin_memory, OptionalFormat format) {
  const c10::OptionalDeviceGuard guard(device.value_or(self.device()));
  return at::native::empty_like_sparse_coo(self, dtype, layout, device,
                                           pin_memory, format);
}

Tensor emptyLikeCompressed(const Tensor& self, OptionalDtype dtype,
                           OptionalLayout layout, OptionalDevice device,
                           OptionalBool pin_memory, OptionalFormat format) {
  const c10::OptionalDeviceGuard guard(device.value_or(self.device()));
  return at::native::empty_like_sparse_csr(self, dtype, layout, device,
                                           pin_memory, format);
}

Tensor cloneCoo(const Tensor& self, OptionalFormat format) {
  const c10::OptionalDeviceGuard guard(self.device());
  return at::native::clone_sparse(self, format);
}

Tensor cloneCompressed(const Tensor& self, OptionalFormat format) {
  const c10::OptionalDeviceGuard guard(self.device());
  return at::native::clone_sparse_compressed(self, format);
}

// LITERALINCLUDE START: CH16_SPARSE_COALESCE
/**
 * `_coalesce` on the device: sorts the elements by their position, sums
 * the values of each position, and keeps one index per position. CPU and
 * CUDA each have a kernel of their own; this one is written with dense
 * operators on the indices and values, so it runs wherever they do, and
 * never copies the tensor to the host.
 */
Tensor coalesceOnDevice(const Tensor& self) {
  const c10::OptionalDeviceGuard guard(self.device());
  const int64_t nnz = self._nnz();
  // NB: as the CPU's kernel, a copy even of zero or one element, so that
  // the result never shares its indices with an uncoalesced input.
  if (nnz < 2) {
    Tensor copy = self.clone();
    copy._coalesced_(true);
    return copy;
  }
  const Tensor indices = self._indices();
  const Tensor values = self._values();
  // One number per element: its place in the row-major order of the
  // sparse dimensions (the CPU orders the coalesced elements the same way).
  Tensor position = at::zeros({nnz}, indices.options());
  for (int64_t dim = 0; dim < self.sparse_dim(); ++dim) {
    position.mul_(self.size(dim)).add_(indices[dim]);
  }
  // NB: a stable sort keeps duplicates in their order, so that their values
  // are summed in the order the CPU's kernel sums them.
  const auto [sorted, order] =
      position.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false);
  const auto [unique, group, counts] = at::unique_consecutive(
      sorted, /*return_inverse=*/true, /*return_counts=*/true);
  const Tensor first = counts.cumsum(0).sub_(counts); // each group's start
  std::vector<int64_t> value_sizes = values.sizes().vec();
  value_sizes[0] = unique.size(0);
  const Tensor summed =
      at::zeros(value_sizes, values.options())
          .index_add_(0, group, values.index_select(0, order));
  const Tensor kept = indices.index_select(1, order.index_select(0, first));
  return at::_sparse_coo_tensor_with_dims_and_tensors(
      self.sparse_dim(), self.dense_dim(), self.sizes(), kept, summed,
      self.options(), /*is_coalesced=*/true);
}
// LITERALINCLUDE END: CH16_SPARSE_COALESCE

// LITERALINCLUDE START: CH16_SPARSE_COO_KERNELS
// NB: each of these is the kernel that native_functions.yaml names for both
// SparseCPU and SparseCUDA: it works on the indices and values through
// other ATen operators, so it runs on accinte unchanged. The views among
// them (`_indices`, `values`, `permute`...) must be kernels: the fallback
// can only return copies.
TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  // Construction and the sparse tensor's header.
  m.impl("_sparse_coo_tensor_with_dims_and_tensors",
         TORCH_FN(cooWithDimsAndTensors));
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(cooWithDims));
  m.impl("empty.memory_format", TORCH_FN(emptyCoo));
  m.impl("empty_like", TORCH_FN(emptyLikeCoo));
  m.impl("sparse_resize_", TORCH_FN(at::native::sparse_resize_));
  m.impl("sparse_resize_and_clear_",
         TORCH_FN(at::native::sparse_resize_and_clear_));
  m.impl("resize_as_sparse_", TORCH_FN(at::native::resize_as_sparse_));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("_dimI", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("_dimV", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
  m.impl("_coalesce", TORCH_FN(coalesceOnDevice));
  // Views of the indices and values, and of the whole tensor.
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
  m.impl("permute", TORCH_FN(at::native::permute_sparse_coo));
  m.impl("unsqueeze", TORCH_FN(at::native::unsqueeze_sparse));
  m.impl("_sparse_broadcast_to", TORCH_FN(at::native::sparse_broadcast_to));
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real_sparse));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex_sparse));
  // Copies, between devices too: they move indices and values.
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_wrapper_));
  m.impl("copy_sparse_to_sparse_", TORCH_FN(at::native::copy_sparse_));
  m.impl("clone", TORCH_FN(cloneCoo));
  m.impl("zero_", TORCH_FN(at::native::zero_sparse_));
  m.impl("_copy_from_and_resize", TORCH_FN(copyFromAndResizeCoo));
}
// LITERALINCLUDE END: CH16_SPARSE_COO_KERNELS

// LITERALINCLUDE START: CH16_SPARSE_COMPRESSED_KERNELS
TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(emptyCompressed));
  m.impl("empty_like", TORCH_FN(emptyLikeCompressed));
  m.impl("resize_as_sparse_",
         TORCH_FN(at::native::resize_as_sparse_compressed_));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse_csr));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse_csr));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse_csr));
  m.impl("crow_indices", TORCH_FN(at::native::crow_indices_sparse_csr));
  m.impl("col_indices", TORCH_FN(at::native::col_indices_sparse_csr));
  m.impl("ccol_indices", TORCH_FN(at::native::ccol_indices_sparse_csr));
  m.impl("row_indices", TORCH_FN(at::native::row_indices_sparse_csr));
  m.impl("values", TORCH_FN(at::native::values_sparse_csr));
  m.impl("select.int", TORCH_FN(at::native::select_sparse_csr));
  m.impl("select_copy.int", TORCH_FN(at::native::select_copy_sparse_csr));
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_compressed_));
  m.impl("clone", TORCH_FN(cloneCompressed));
  m.impl("zero_", TORCH_FN(at::native::zero_sparse_csr_));
  m.impl("_copy_from_and_resize", TORCH_FN(copyFromAndResizeCompressed));
}
// LITERALINCLUDE END: CH16_SPARSE_COMPRESSED_KERNELS

} // namespace
} // namespace accinte
