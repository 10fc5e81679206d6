// Chapter 09: advanced indexing (`x[indices]`, `index.Tensor`) as a native
// kernel. The table's mechanism runs it; what this file adds is the step
// before it: boolean masks become the integer indices they select, which
// needs the mask's values on the host.

#include <09_native_kernels/csrc/native_kernels.h>

#include <ATen/MetaFunctions.h>
#include <ATen/core/List.h>
#include <ATen/native/IndexingUtils.h>
#include <torch/library.h>

#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace accinte {
namespace {

using OptionalTensors = c10::List<std::optional<at::Tensor>>;

// LITERALINCLUDE START: CH09_INDEX_MASKS
/**
 * `indices` as the device kernel takes them: integer tensors on the device
 * of `self`, or None.
 *
 * Makes the CPU kernel's checks that come before the indices' values, in its
 * words. A boolean (or uint8) mask becomes one index tensor per dimension it
 * covers, the coordinates of its true elements. How many there are depends
 * on the mask's values: the mask is copied to the host, which waits for the
 * work queued before that computes it (as CUDA's `nonzero` synchronizes), and
 * the coordinates are copied to the device. An index tensor on the host
 * (`x[cpu_index]`, allowed as on CUDA) is copied to the device.
 *
 * NB: whether each index is in range is checked by the CPU kernel, on the
 * stream's worker, before it reads: an index out of range fails the launch,
 * reported at the next synchronization with the CPU's message, as CUDA's
 * device-side assert is. Nothing is read out of bounds.
 */
OptionalTensors deviceIndices(const at::Tensor& self,
                              const OptionalTensors& indices) {
  TORCH_CHECK_INDEX(indices.size() <= static_cast<size_t>(self.dim()),
                    "too many indices for tensor of dimension ", self.dim(),
                    " (got ", indices.size(), ")");
  OptionalTensors staged;
  for (const std::optional<at::Tensor>& index : indices) {
    if (!index.has_value() || !index->defined()) {
      staged.push_back(std::nullopt);
      continue;
    }
    TORCH_CHECK_INDEX(index->is_cpu() || index->device() == self.device(),
                      "indices should be either on ", at::kCPU,
                      " or on the same device as the indexed tensor (",
                      self.device(), ")");
    const bool mask =
        index->scalar_type() == at::kBool || index->scalar_type() == at::kByte;
    staged.push_back(mask ? index->cpu() : *index); // LITERALINCLUDE EMPHASIZE
  }
  at::native::checkIndexTensorTypes(staged, /*allow_int=*/true);
  // NB: ATen's own expansion: the mask's shape check and uint8 warning, then
  // `nonzero` on the host copy, one column per dimension.
  OptionalTensors expanded;
  for (const at::Tensor& index : at::native::expandTensors(self, staged)) {
    if (index.defined()) {
      expanded.push_back(index.to(self.device())); // LITERALINCLUDE EMPHASIZE
    } else {
      expanded.push_back(std::nullopt);
    }
  }
  return expanded;
}
// LITERALINCLUDE END: CH09_INDEX_MASKS

/**
 * `index.Tensor` and `index.Tensor_out`: the indices made device indices,
 * then the table's mechanism with ATen's Meta function of `index`, which
 * broadcasts the index tensors and puts the indexed dimensions first when
 * they are not adjacent, as the CPU does.
 */
class IndexKernel final : public c10::OperatorKernel {
 public:
  IndexKernel(std::string_view name, std::string_view out_overload,
              c10::KernelFunction meta)
      : native_(name, out_overload, std::move(meta)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet,
                  torch::jit::Stack* stack) const {
    // index.Tensor(self, indices); index.Tensor_out(self, indices, out).
    const size_t first = stack->size() - op.schema().arguments().size();
    const at::Tensor self = (*stack)[first].toTensor();
    (*stack)[first + 1] =
        deviceIndices(self, (*stack)[first + 1].toOptionalTensorList());
    native_(stack);
  }

 private:
  NativeKernel native_;
};

#define ACCINTE_INDEX_META(function) \
  c10::KernelFunction::makeFromUnboxedFunction(TORCH_FN(at::meta::function))

// LITERALINCLUDE START: CH09_INDEX_REGISTER
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index.Tensor",
         torch::CppFunction::makeFromBoxedFunctor(std::make_unique<IndexKernel>(
             "index.Tensor", "index.Tensor_out", ACCINTE_INDEX_META(index))));
  m.impl("index.Tensor_out",
         torch::CppFunction::makeFromBoxedFunctor(std::make_unique<IndexKernel>(
             "index.Tensor_out", "", ACCINTE_INDEX_META(index_outf))));
}
// LITERALINCLUDE END: CH09_INDEX_REGISTER

} // namespace
} // namespace accinte
