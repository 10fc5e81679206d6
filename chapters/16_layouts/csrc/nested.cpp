// Chapter 16, nested tensors: the kernels of the strided nested layout on
// accinte. A strided nested tensor is a c10 `NestedTensorImpl`: one dense
// buffer (an ordinary accinte tensor) and, on the host, the sizes, strides
// and offsets of its components. Its dispatch key set holds `NestedTensor`
// with the buffer's backend bit, so the dispatcher looks its operators up
// under the runtime key `NestedTensorPrivateUse1`, a table of its own that
// neither the dense `PrivateUse1` kernels nor the CPU fallback serve.
//
// The jagged layout (`layout=torch.jagged`) needs nothing here: it is a
// Python subclass whose operators run on its dense accinte tensors.

#include <02_fallback/csrc/layout_fallback.h>

#include <ATen/NestedTensorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/nested/NestedTensorUtils.h>
#include <ATen/ops/_nested_from_padded_and_nested_example_native.h>
#include <ATen/ops/_nested_from_padded_native.h>
#include <ATen/ops/_nested_select_backward_native.h>
#include <ATen/ops/_nested_tensor_size_native.h>
#include <ATen/ops/_nested_tensor_storage_offsets_native.h>
#include <ATen/ops/_nested_tensor_strides_native.h>
#include <ATen/ops/_nested_view_from_buffer_native.h>
#include <ATen/ops/_safe_softmax_native.h>
#include <ATen/ops/_softmax_backward_data_native.h>
#include <ATen/ops/_softmax_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/_transformer_encoder_layer_fwd_native.h>
#include <ATen/ops/abs_native.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/alias_native.h>
#include <ATen/ops/all_native.h>
#include <ATen/ops/bmm_native.h>
#include <ATen/ops/cat_native.h>
#include <ATen/ops/chunk_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/cos_native.h>
#include <ATen/ops/detach_native.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/embedding_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/eq_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/ge_native.h>
#include <ATen/ops/gelu_backward_native.h>
#include <ATen/ops/gelu_native.h>
#include <ATen/ops/gt_native.h>
#include <ATen/ops/is_same_size_native.h>
#include <ATen/ops/isinf_native.h>
#include <ATen/ops/isnan_native.h>
#include <ATen/ops/isneginf_native.h>
#include <ATen/ops/isposinf_native.h>
#include <ATen/ops/linear_backward_native.h>
#include <ATen/ops/linear_native.h>
#include <ATen/ops/logical_not_native.h>
#include <ATen/ops/masked_fill_native.h>
#include <ATen/ops/matmul_backward_native.h>
#include <ATen/ops/matmul_native.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/narrow_native.h>
#include <ATen/ops/native_dropout_backward_native.h>
#include <ATen/ops/native_dropout_native.h>
#include <ATen/ops/native_layer_norm.h>
#include <ATen/ops/native_layer_norm_backward.h>
#include <ATen/ops/neg_native.h>
#include <ATen/ops/normal_native.h>
#include <ATen/ops/ones_like_native.h>
#include <ATen/ops/relu_native.h>
#include <ATen/ops/select_native.h>
#include <ATen/ops/sgn_native.h>
#include <ATen/ops/silu_backward_native.h>
#include <ATen/ops/silu_native.h>
#include <ATen/ops/sin_native.h>
#include <ATen/ops/split_with_sizes_native.h>
#include <ATen/ops/sqrt_native.h>
#include <ATen/ops/squeeze_native.h>
#include <ATen/ops/sub_native.h>
#include <ATen/ops/tanh_native.h>
#include <ATen/ops/threshold_backward_native.h>
#include <ATen/ops/to_padded_tensor_native.h>
#include <ATen/ops/transpose_native.h>
#include <ATen/ops/unbind_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/value_selecting_reduction_backward_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/where_native.h>
#include <ATen/ops/zero_native.h>
#include <c10/core/DispatchKey.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <tuple>

namespace accinte {
namespace {

using at::Tensor;

// LITERALINCLUDE START: CH16_NESTED_CPU_ROUTE
/**
 * Runs a nested operator whose only kernel works on host memory through the
 * CPU: chapter 02's fallback with the `NestedTensorCPU` key, whose table
 * holds the nested kernels. The arguments go to the host (a nested tensor
 * as a nested tensor), PyTorch's kernel runs, and the results come back to
 * the arguments' accinte device, after the same device checks as for a
 * dense operator.
 */
void nestedCpuRoute(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  cpuFallbackWithKey(op, stack, c10::DispatchKey::NestedTensorCPU);
}
// LITERALINCLUDE END: CH16_NESTED_CPU_ROUTE

// LITERALINCLUDE START: CH16_NESTED_LAYER_NORM
/**
 * `native_layer_norm` of a contiguous nested tensor: the normalized
 * dimensions are regular and last, so the buffer, seen as `[M, N]` rows,
 * is normalized row by row by the dense accinte kernel.
 *
 * NB: PyTorch's nested kernel calls the layer-norm DispatchStub for the
 * buffer's device type, in which accinte has no kernel (chapter 09's layer
 * norm is an operator kernel): it fails on an internal assert.
 */
std::tuple<Tensor, Tensor, Tensor> nestedLayerNorm(
    const Tensor& input, at::IntArrayRef normalized_shape,
    const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    double eps) {
  TORCH_CHECK(weight.has_value() && bias.has_value(),
              "NestedTensor layer_norm requires weight and bias");
  TORCH_CHECK(!weight->is_nested(),
              "NestedTensor weight not supported for layer_norm");
  TORCH_CHECK(!bias->is_nested(),
              "NestedTensor bias not supported for layer_norm");
  const at::native::NestedTensorImpl* impl =
      at::native::get_nested_tensor_impl(input);
  TORCH_CHECK(at::native::nested_tensor_impl_is_contiguous(impl),
              "NestedTensor layer_norm requires a contiguous input");
  int64_t row = 1;
  const auto dims = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(dims >= 1,
              "Expected normalized_shape to be at least 1-dimensional");
  for (int64_t i = 0; i < dims; ++i) {
    const std::optional<int64_t> size = impl->opt_size(input.dim() - dims + i);
    TORCH_CHECK(size.has_value(),
                "normalized_shape extends into irregular "
                "dimensions for the nested tensor");
    TORCH_CHECK(*size == normalized_shape[i], "The shape at dimension ", i,
                "of normalized_shape doesn't match the input");
    row *= *size;
  }
  const Tensor rows = impl->get_buffer().view({-1, row});
  auto [out, mean, rstd] =
      at::native_layer_norm(rows, {row}, weight->view(-1), bias->view(-1), eps);
  return {at::native::wrap_buffer(out.view(-1), impl->get_nested_sizes()),
          mean.view(-1), rstd.view(-1)};
}

/** The derivative of nestedLayerNorm(), on the same rows. */
std::tuple<Tensor, Tensor, Tensor> nestedLayerNormBackward(
    const Tensor& grad_out, const Tensor& input,
    at::IntArrayRef normalized_shape, const Tensor& mean, const Tensor& rstd,
    const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    std::array<bool, 3> output_mask) {
  const at::native::NestedTensorImpl* impl =
      at::native::get_nested_tensor_impl(input);
  const Tensor grad = grad_out.contiguous();
  int64_t row = 1;
  for (int64_t size : normalized_shape) {
    row *= size;
  }
  const Tensor rows = impl->get_buffer().view({-1, row});
  const Tensor grad_rows =
      at::native::get_nested_tensor_impl(grad)->get_buffer().view({-1, row});
  const std::optional<Tensor> flat_weight =
      weight.has_value() && weight->defined()
          ? std::optional<Tensor>(weight->view(-1))
          : std::nullopt;
  const std::optional<Tensor> flat_bias =
      bias.has_value() && bias->defined()
          ? std::optional<Tensor>(bias->view(-1))
          : std::nullopt;
  auto [d_input, d_weight, d_bias] = at::native_layer_norm_backward(
      grad_rows, rows, {row}, mean.view({-1, 1}), rstd.view({-1, 1}),
      flat_weight, flat_bias, output_mask);
  if (d_input.defined()) {
    d_input =
        at::native::wrap_buffer(d_input.view(-1), impl->get_nested_sizes());
  }
  if (d_weight.defined()) {
    d_weight = d_weight.view(normalized_shape);
  }
  if (d_bias.defined()) {
    d_bias = d_bias.view(normalized_shape);
  }
  return {d_input, d_weight, d_bias};
}
// LITERALINCLUDE END: CH16_NESTED_LAYER_NORM

// LITERALINCLUDE START: CH16_NESTED_SDPA_CHOICE
/**
 * `_fused_sdp_choice` of nested accinte tensors: what the device's dense
 * kernel of the operator answers (chapter 09's choice, which sends nested
 * tensors to the math path), as `scaled_dot_product_attention` itself asks
 * the device's `_fused_sdp_choice_stub`.
 */
int64_t nestedSdpChoice(const Tensor& query, const Tensor& key,
                        const Tensor& value, const std::optional<Tensor>& mask,
                        double dropout_p, bool is_causal,
                        std::optional<double> scale, bool enable_gqa) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("aten::_fused_sdp_choice", "")
                             .typed<decltype(nestedSdpChoice)>();
  return op.redispatch(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                       query, key, value, mask, dropout_p, is_causal, scale,
                       enable_gqa);
}
// LITERALINCLUDE END: CH16_NESTED_SDPA_CHOICE

using SqueezeDim = Tensor (*)(const Tensor&, int64_t);
using SqueezeDims = Tensor (*)(const Tensor&, at::IntArrayRef);
using FillScalar = Tensor& (*)(Tensor&, const at::Scalar&);
using FillTensor = Tensor& (*)(Tensor&, const Tensor&);

} // namespace

// LITERALINCLUDE START: CH16_NESTED_GENERIC_KERNELS
// NB: PyTorch's nested kernels that CPU and CUDA share (one name for both in
// native_functions.yaml) work on the buffer and the host metadata through
// other ATen operators, so on accinte they run the dense accinte kernels.
// They are exported (ATen/ops/<op>_native.h) and registered here as they
// are. Kernels that CPU and CUDA do not share are below this block.
TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  using namespace at::native;
  // Construction, copies, metadata.
  m.impl("_to_copy", TORCH_FN(_to_copy_nested));
  m.impl("copy_", TORCH_FN(copy_nested_));
  m.impl("clone", TORCH_FN(clone_nested));
  m.impl("empty_like", TORCH_FN(empty_like_nested));
  m.impl("ones_like", TORCH_FN(ones_like));
  m.impl("fill_.Scalar", TORCH_FN(static_cast<FillScalar>(fill_nested_)));
  m.impl("fill_.Tensor", TORCH_FN(static_cast<FillTensor>(fill_nested_)));
  m.impl("zero_", TORCH_FN(zero_nested_));
  m.impl("normal_", TORCH_FN(normal_nested_));
  m.impl("is_same_size", TORCH_FN(nested_is_same_size));
  m.impl("_nested_tensor_size", TORCH_FN(_nested_tensor_size));
  m.impl("_nested_tensor_strides", TORCH_FN(_nested_tensor_strides));
  m.impl("_nested_tensor_storage_offsets",
         TORCH_FN(_nested_tensor_storage_offsets));
  m.impl("_nested_from_padded_and_nested_example",
         TORCH_FN(NestedTensor_from_padded_and_nested_example));
  // Views and shapes.
  m.impl("unbind.int", TORCH_FN(NestedTensor_unbind));
  m.impl("values", TORCH_FN(values_nested));
  m.impl("alias", TORCH_FN(alias_nested));
  m.impl("detach", TORCH_FN(detach));
  m.impl("view", TORCH_FN(view_nested));
  m.impl("transpose.int", TORCH_FN(transpose_nested));
  m.impl("select.int", TORCH_FN(select_nested));
  m.impl("_nested_select_backward", TORCH_FN(_nested_select_backward_symint));
  m.impl("narrow", TORCH_FN(narrow_nested_symint));
  m.impl("chunk", TORCH_FN(chunk_nested_tensor));
  m.impl("split_with_sizes", TORCH_FN(split_with_sizes_nested));
  m.impl("cat", TORCH_FN(cat_nested));
  m.impl("squeeze", TORCH_FN(squeeze_nested));
  m.impl("squeeze.dim", TORCH_FN(static_cast<SqueezeDim>(squeeze_dim_nested)));
  m.impl("squeeze.dims",
         TORCH_FN(static_cast<SqueezeDims>(squeeze_dim_nested)));
  m.impl("unsqueeze", TORCH_FN(unsqueeze_nested));
  // Elementwise.
  m.impl("add.Tensor", TORCH_FN(NestedTensor_add_Tensor));
  m.impl("add_.Tensor", TORCH_FN(NestedTensor_add__Tensor));
  m.impl("sub.Tensor", TORCH_FN(NestedTensor_sub_Tensor));
  m.impl("mul.Tensor", TORCH_FN(NestedTensor_mul_Tensor));
  m.impl("mul_.Tensor", TORCH_FN(NestedTensor_mul__Tensor));
  m.impl("mul.Scalar", TORCH_FN(NestedTensor_mul_Scalar));
  m.impl("mul_.Scalar", TORCH_FN(NestedTensor_mul__Scalar));
  m.impl("div.Tensor", TORCH_FN(NestedTensor_div_Tensor));
  m.impl("div.Scalar", TORCH_FN(NestedTensor_div_Scalar));
  m.impl("masked_fill.Scalar", TORCH_FN(NestedTensor_masked_fill));
  m.impl("where.self", TORCH_FN(NestedTensor_where));
  m.impl("where.self_out", TORCH_FN(NestedTensor_where_out));
  m.impl("eq.Scalar", TORCH_FN(eq_scalar_nested));
  m.impl("eq.Tensor", TORCH_FN(eq_tensor_nested));
  m.impl("ge.Scalar", TORCH_FN(ge_scalar_nested));
  m.impl("gt.Scalar", TORCH_FN(gt_scalar_nested));
  m.impl("abs", TORCH_FN(NestedTensor_abs));
  m.impl("abs_", TORCH_FN(NestedTensor_abs_));
  m.impl("sgn", TORCH_FN(NestedTensor_sgn));
  m.impl("sgn_", TORCH_FN(NestedTensor_sgn_));
  m.impl("neg", TORCH_FN(NestedTensor_neg));
  m.impl("neg_", TORCH_FN(NestedTensor_neg_));
  m.impl("logical_not", TORCH_FN(NestedTensor_logical_not));
  m.impl("logical_not_", TORCH_FN(NestedTensor_logical_not_));
  m.impl("cos", TORCH_FN(NestedTensor_cos));
  m.impl("sin", TORCH_FN(NestedTensor_sin));
  m.impl("sqrt", TORCH_FN(NestedTensor_sqrt));
  m.impl("tanh", TORCH_FN(NestedTensor_tanh));
  m.impl("tanh_", TORCH_FN(NestedTensor_tanh_));
  m.impl("isnan", TORCH_FN(NestedTensor_isnan));
  m.impl("isinf", TORCH_FN(NestedTensor_isinf));
  m.impl("isposinf", TORCH_FN(NestedTensor_isposinf));
  m.impl("isneginf", TORCH_FN(NestedTensor_isneginf));
  m.impl("relu", TORCH_FN(NestedTensor_relu));
  m.impl("relu_", TORCH_FN(NestedTensor_relu_));
  m.impl("threshold_backward", TORCH_FN(threshold_backwards_nested));
  m.impl("gelu", TORCH_FN(NestedTensor_gelu));
  m.impl("gelu_", TORCH_FN(NestedTensor_gelu_));
  m.impl("gelu_backward", TORCH_FN(gelu_backwards_nested));
  m.impl("silu", TORCH_FN(NestedTensor_silu));
  m.impl("silu_", TORCH_FN(NestedTensor_silu_));
  m.impl("silu_backward", TORCH_FN(silu_backward_nested));
  m.impl("native_dropout", TORCH_FN(native_dropout_nested));
  m.impl("native_dropout_backward", TORCH_FN(native_dropout_backward));
  // Reductions over the regular last dimension, products.
  m.impl("all.dim", TORCH_FN(NestedTensor_all));
  m.impl("_softmax", TORCH_FN(softmax_nested));
  m.impl("_softmax_backward_data", TORCH_FN(nested_softmax_backward));
  m.impl("_safe_softmax", TORCH_FN(_safe_softmax));
  m.impl("value_selecting_reduction_backward",
         TORCH_FN(value_selecting_reduction_backward_nested_symint));
  m.impl("linear", TORCH_FN(nested_linear));
  m.impl("linear_backward", TORCH_FN(nested_linear_backward));
  m.impl("matmul", TORCH_FN(matmul_nested));
  m.impl("matmul.out", TORCH_FN(matmul_out_nested));
  m.impl("matmul_backward", TORCH_FN(matmul_backward_nested));
  m.impl("embedding", TORCH_FN(NestedTensor_embedding));
  m.impl("_transformer_encoder_layer_fwd",
         TORCH_FN(transformer_encoder_layer_forward));
}
// LITERALINCLUDE END: CH16_NESTED_GENERIC_KERNELS

// LITERALINCLUDE START: CH16_NESTED_OWN_KERNELS
// NB: where CPU and CUDA have kernels of their own, accinte takes the CPU's
// when it is device-generic too (bmm: one dense `mm_out` per component;
// padding: dense `constant_pad_nd` and `stack` on the components),
// writes its own on the dense accinte kernels (layer norm), asks its own
// device (the attention choice), or runs the CPU's kernel on host copies:
// the sum over the last dimension (which CUDA does not have at all), and
// the attention of nn.MultiheadAttention's inference fast path (also inside
// nn.TransformerEncoderLayer's), whose CPU kernel is made of CPU kernels
// (`_transform_bias_rescale_qkv`, a fused softmax) that read host memory.
TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("bmm", TORCH_FN(at::native::bmm_nested));
  m.impl("to_padded_tensor",
         TORCH_FN(at::native::NestedTensor_to_padded_tensor_generic));
  m.impl("native_layer_norm", TORCH_FN(nestedLayerNorm));
  m.impl("native_layer_norm_backward", TORCH_FN(nestedLayerNormBackward));
  m.impl("_fused_sdp_choice", TORCH_FN(nestedSdpChoice));
  for (const char* name : {"sum.dim_IntList", "_nested_sum_backward",
                           "_native_multi_head_attention"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&nestedCpuRoute>());
  }
}
// LITERALINCLUDE END: CH16_NESTED_OWN_KERNELS

// LITERALINCLUDE START: CH16_NESTED_DENSE_KEYS
// NB: two nested operators dispatch on a dense tensor, so they reach the
// dense PrivateUse1 table, where chapter 02's fallback would refuse them:
// `_nested_view_from_buffer` returns a view of its buffer (which a CPU copy
// cannot be), and `_nested_from_padded` takes the components' sizes as a
// host tensor beside the device's padded tensor. Both kernels are
// device-generic.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_nested_view_from_buffer",
         TORCH_FN(at::native::_nested_view_from_buffer));
  m.impl("_nested_from_padded",
         TORCH_FN(at::native::nested_from_padded_generic));
}
// LITERALINCLUDE END: CH16_NESTED_DENSE_KEYS

} // namespace accinte
