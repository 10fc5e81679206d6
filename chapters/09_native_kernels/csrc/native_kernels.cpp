// Chapter 09: native accinte kernels for the operators a training step spends
// its time in. One boxed kernel serves the whole table: it asks ATen's Meta
// kernel of the operator what the results look like, allocates them on the
// device, and launches ATen's CPU kernel on the device memory.

#include <09_native_kernels/csrc/native_kernels.h>

#include <01_minimal_ops/csrc/kernel.h>
#include <02_fallback/csrc/fallback.h>

#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/MetaFunctions.h>
#include <ATen/TensorIterator.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/native/cpu/mixed_data_type.h>
#include <ATen/native/layer_norm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/result_type.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

namespace accinte {
namespace {

// LITERALINCLUDE START: CH09_NATIVE_OPERATOR
/**
 * An operator that runs natively: its C++ Meta function, and the overload
 * its CPU kernel runs as.
 *
 * A functional operator (it writes none of its arguments) names its `out=`
 * overload: the kernel hands that overload the device outputs to write.
 * Without one (`relu`), the kernel runs the functional CPU kernel and copies
 * its result into the device output. In-place and `out=` operators write
 * their own arguments and run as themselves.
 */
struct NativeOperator {
  std::string_view name;
  std::string_view out_overload;
  c10::KernelFunction meta;
};

// NB: ATen's C++ Meta functions (at::meta::, structured kernels' host
// half: argument checks, broadcasting, type promotion, result sizes and
// strides). Not the dispatcher's Meta kernels: `import torch` replaces most
// of those by Python functions (torch/_meta_registrations.py), which would
// hold the GIL on every call.
#define ACCINTE_META(function) \
  c10::KernelFunction::makeFromUnboxedFunction(TORCH_FN(at::meta::function))
// An overloaded Meta function, with the signature of the overload.
#define ACCINTE_META_OF(function, ...)                               \
  c10::KernelFunction::makeFromUnboxedFunction(                      \
      c10::CompileTimeFunctionPointer<                               \
          __VA_ARGS__, static_cast<std::add_pointer_t<__VA_ARGS__>>( \
                           &at::meta::function)>())
// LITERALINCLUDE END: CH09_NATIVE_OPERATOR

using Tensor = at::Tensor;
using In = const at::Tensor&;
using Scalar = const at::Scalar&;
using Mode = std::optional<c10::string_view>;

// `relu` and `relu_` have no Meta function: ATen computes them as
// `clamp_min(0)`.
Tensor reluMeta(In self) {
  TORCH_CHECK(self.scalar_type() != at::kBool,
              "Boolean inputs not supported for relu");
  return at::meta::clamp_min(self, 0);
}

Tensor& reluInPlaceMeta(Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool,
              "Boolean inputs not supported for relu");
  return at::meta::clamp_min_(self, 0);
}

// LITERALINCLUDE START: CH09_HAND_WRITTEN
// NB: the operators below have no Meta function that ATen exports: their
// CPU and CUDA kernels check their arguments themselves. Each host check
// here makes the CPU kernel's checks, in its words, before anything is
// launched, and shapes the results as the CPU kernel shapes them; the
// launch asserts that they match (copyResults()).

/**
 * The options of a normalization's statistics and parameter gradients: the
 * input's dtype, or float32 for a bfloat16 or half input with float32
 * parameters, which the CPU kernels accept mixed (and no other mix).
 */
template <typename... Parameters>
at::TensorOptions parameterOptions(In input, const Parameters&... parameters) {
  const bool mixed = at::native::is_mixed_type(input, parameters...);
  if (mixed) {
    at::native::check_mixed_data_type(input, parameters...);
  }
  return input.options().dtype(at::native::param_scalar_type(input, mixed));
}

/** `native_layer_norm`: the result, and the mean and 1/std of each row. */
std::tuple<Tensor, Tensor, Tensor> layerNormMeta(
    In input, c10::SymIntArrayRef normalized_shape,
    const std::optional<Tensor>& weight_opt,
    const std::optional<Tensor>& bias_opt, double) {
  const Tensor weight = weight_opt.value_or(Tensor());
  const Tensor bias = bias_opt.value_or(Tensor());
  const at::TensorOptions options = parameterOptions(input, weight, bias);
  const at::IntArrayRef shape = C10_AS_INTARRAYREF_SLOW(normalized_shape);
  at::native::_check_layer_norm_inputs(input, shape, weight, bias);
  // NB: one statistic per row, kept as a size-1 dimension in place of
  // each normalized one.
  std::vector<int64_t> statistics(input.sizes().begin(),
                                  input.sizes().end() - shape.size());
  statistics.resize(input.dim(), 1);
  return {at::empty(input.sizes(), input.options()),
          at::empty(statistics, options), at::empty(statistics, options)};
}
// LITERALINCLUDE END: CH09_HAND_WRITTEN

/** `native_layer_norm_backward`: the gradients `output_mask` asks for. */
std::tuple<Tensor, Tensor, Tensor> layerNormBackwardMeta(
    In grad_out, In input, c10::SymIntArrayRef normalized_shape, In mean,
    In rstd, const std::optional<Tensor>& weight_opt,
    const std::optional<Tensor>& bias_opt, std::array<bool, 3> output_mask) {
  const Tensor weight = weight_opt.value_or(Tensor());
  const Tensor bias = bias_opt.value_or(Tensor());
  parameterOptions(input, weight, bias); // the mixed-dtype check
  at::native::_check_layer_norm_inputs(
      input, C10_AS_INTARRAYREF_SLOW(normalized_shape), weight, bias);
  TORCH_CHECK(grad_out.sizes() == input.sizes(),
              "native_layer_norm_backward: grad_out of size ", grad_out.sizes(),
              " for an input of size ", input.sizes());
  TORCH_CHECK((!output_mask[1] || weight.defined()) &&
                  (!output_mask[2] || bias.defined()),
              "native_layer_norm_backward: output_mask asks for the gradient "
              "of a weight or bias that is None");
  Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    grad_input = at::empty(input.sizes(), input.options());
  }
  if (output_mask[1]) {
    grad_weight = at::empty(weight.sizes(), weight.options());
  }
  if (output_mask[2]) {
    grad_bias = at::empty(bias.sizes(), bias.options());
  }
  return {grad_input, grad_weight, grad_bias};
}

/** `where.self_out`: the broadcast shape, and the dtype of `self` and
 * `other` promoted. */
Tensor& whereOutMeta(In condition, In self, In other, Tensor& out) {
  const at::ScalarType type = at::result_type(self, other);
  TORCH_CHECK(out.scalar_type() == type, "Expected out type to be ", type,
              " but got ", out.scalar_type());
  TORCH_CHECK(condition.scalar_type() == at::kBool ||
                  condition.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a "
              "tensor with dtype ",
              condition.scalar_type());
  // NB: TensorIterator sizes `out` (strides too, when it has no elements)
  // as the CPU kernel's own iterator will.
  at::TensorIteratorConfig()
      .check_all_same_dtype(false)
      .add_output(out)
      .add_const_input(condition)
      .add_const_input(self)
      .add_const_input(other)
      .build();
  return out;
}

Tensor whereMeta(In condition, In self, In other) {
  Tensor out =
      at::empty({0}, self.options().dtype(at::result_type(self, other)));
  return whereOutMeta(condition, self, other, out);
}

/** `index_select.out`: `self` with dimension `dim` as long as `index`. */
Tensor& indexSelectOutMeta(In self, int64_t dim, In index, Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  const int64_t count = index.numel();
  TORCH_CHECK_INDEX(index.dim() <= 1,
                    "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(!(self.dim() == 0 && count != 1),
              "index_select(): Index to scalar can have only 1 value, got ",
              count, " value(s)");
  TORCH_CHECK(
      index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
      "index_select(): Expected dtype int32 or int64 for index");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(),
              "index_select(): self and result must have the same scalar "
              "type");
  std::vector<int64_t> sizes = self.sizes().vec();
  if (self.dim() > 0) {
    sizes[dim] = count;
  }
  out.resize_(sizes);
  return out;
}

Tensor indexSelectMeta(In self, int64_t dim, In index) {
  Tensor out = at::empty({0}, self.options());
  return indexSelectOutMeta(self, dim, index, out);
}

/** `embedding_dense_backward`: one gradient row per embedding. */
Tensor embeddingBackwardMeta(In grad_output, In indices,
                             c10::SymInt num_weights, c10::SymInt, bool) {
  TORCH_CHECK(
      indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
      "embedding_backward(): Expected tensor for argument #2 "
      "'indices' to have one of the following scalar types: Long, "
      "Int; but got ",
      indices.scalar_type(), " instead");
  TORCH_CHECK(grad_output.dim() > 0,
              "embedding_backward(): grad_output has no dimension");
  return at::empty({num_weights.expect_int(), grad_output.size(-1)},
                   grad_output.options());
}

/** `max()`: the largest element, as a 0-dim tensor. */
Tensor& maxOutMeta(In self, Tensor& out) {
  TORCH_CHECK(self.numel() > 0,
              "max(): Expected reduction dim to be specified for "
              "input.numel() == 0. Specify the reduction dim with the 'dim' "
              "argument.");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(),
              "max(): Expected out tensor to have dtype ", self.scalar_type(),
              ", but got ", out.scalar_type(), " instead");
  out.resize_({});
  return out;
}

Tensor maxMeta(In self) {
  Tensor out = at::empty({}, self.options());
  return maxOutMeta(self, out);
}

/** `masked_fill_`: `mask` broadcasts to `self`, which keeps its shape. */
Tensor& maskedFillMeta(Tensor& self, In mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_fill_ only supports boolean masks, but got mask with "
              "dtype ",
              mask.dtype());
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) {
    TORCH_WARN(
        "Use of masked_fill_ on expanded tensors is deprecated. "
        "Please clone() the tensor before performing this operation. "
        "This also applies to advanced indexing e.g. tensor[mask] = scalar");
  }
  at::TensorIteratorConfig()
      .set_check_mem_overlap(false)
      .check_all_same_dtype(false)
      .resize_outputs(false)
      .add_output(self)
      .add_const_input(mask)
      .build();
  return self;
}

Tensor& maskedFillScalarMeta(Tensor& self, In mask, Scalar) {
  return maskedFillMeta(self, mask);
}

Tensor& maskedFillTensorMeta(Tensor& self, In mask, In value) {
  TORCH_CHECK(value.dim() == 0,
              "masked_fill_ only supports a 0-dimensional value tensor, but "
              "got tensor with ",
              value.dim(), " dimension(s).");
  return maskedFillMeta(self, mask);
}

/**
 * What `native_batch_norm` and its backward read per channel: each tensor
 * given must hold one element per channel.
 *
 * NB: stricter than the CPU kernel, which reads past a shorter tensor;
 * on the device that read would fault outside the allocation. The words
 * are those of the checks in PyTorch's `batch_norm`.
 */
int64_t checkChannels(
    In input,
    std::initializer_list<std::pair<const char*, Tensor>> per_channel) {
  const int64_t channels = input.size(1);
  for (const auto& [name, tensor] : per_channel) {
    TORCH_CHECK(!tensor.defined() || tensor.numel() == channels, name,
                " should contain ", channels, " elements not ", tensor.numel());
  }
  return channels;
}

/** `native_batch_norm`: the result, in the input's memory format, and the
 * batch's mean and 1/std per channel (none in evaluation). The CPU kernel
 * also updates the running statistics in place, through their views. */
std::tuple<Tensor, Tensor, Tensor> batchNormMeta(
    In input, const std::optional<Tensor>& weight_opt,
    const std::optional<Tensor>& bias_opt,
    const std::optional<Tensor>& running_mean_opt,
    const std::optional<Tensor>& running_var_opt, bool training, double,
    double) {
  const Tensor weight = weight_opt.value_or(Tensor());
  const Tensor bias = bias_opt.value_or(Tensor());
  const Tensor running_mean = running_mean_opt.value_or(Tensor());
  const Tensor running_var = running_var_opt.value_or(Tensor());
  const int64_t channels = checkChannels(input, {{"weight", weight},
                                                 {"bias", bias},
                                                 {"running_mean", running_mean},
                                                 {"running_var", running_var}});
  const at::TensorOptions statistics =
      parameterOptions(input, weight, bias, running_mean, running_var);
  return {at::empty(input.sizes(), input.options().memory_format(
                                       input.suggest_memory_format())),
          at::empty({training ? channels : 0}, statistics),
          at::empty({training ? channels : 0}, statistics)};
}

/** `native_batch_norm_backward`: the gradients `output_mask` asks for. */
std::tuple<Tensor, Tensor, Tensor> batchNormBackwardMeta(
    In grad_out, In input, const std::optional<Tensor>& weight_opt,
    const std::optional<Tensor>& running_mean_opt,
    const std::optional<Tensor>& running_var_opt,
    const std::optional<Tensor>& save_mean_opt,
    const std::optional<Tensor>& save_invstd_opt, bool train, double,
    std::array<bool, 3> output_mask) {
  const Tensor weight = weight_opt.value_or(Tensor());
  const Tensor running_mean = running_mean_opt.value_or(Tensor());
  const Tensor running_var = running_var_opt.value_or(Tensor());
  const Tensor save_mean = save_mean_opt.value_or(Tensor());
  const Tensor save_invstd = save_invstd_opt.value_or(Tensor());
  TORCH_CHECK(grad_out.sizes() == input.sizes(),
              "native_batch_norm_backward: grad_out of size ", grad_out.sizes(),
              " for an input of size ", input.sizes());
  // NB: training reads the batch's statistics, evaluation the running ones;
  // the others may be empty.
  const int64_t channels =
      checkChannels(input, {{"weight", weight},
                            {"running_mean", train ? Tensor() : running_mean},
                            {"running_var", train ? Tensor() : running_var},
                            {"save_mean", train ? save_mean : Tensor()},
                            {"save_invstd", train ? save_invstd : Tensor()}});
  const at::TensorOptions parameters = parameterOptions(
      input, weight, running_mean, running_var, save_mean, save_invstd);
  Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    grad_input =
        at::empty(input.sizes(),
                  input.options().memory_format(input.suggest_memory_format()));
  }
  if (output_mask[1]) {
    grad_weight = at::empty({channels}, parameters);
  }
  if (output_mask[2]) {
    grad_bias = at::empty({channels}, parameters);
  }
  return {grad_input, grad_weight, grad_bias};
}

/**
 * `replication_pad1d`, `2d` and `3d`: their Meta function's checks and
 * sizes, in the input's suggested memory format.
 *
 * NB: the CPU kernel lays its result out that way and re-strides an out=
 * argument of another layout to it, which the Meta function does not say
 * (it gives a contiguous result). Run on the device memory of a contiguous
 * output, it would re-stride its own view of that memory and write the
 * values where the device tensor does not read them.
 */
Tensor inSuggestedFormat(In self, const Tensor& shaped) {
  return at::empty(shaped.sizes(), shaped.options().memory_format(
                                       self.suggest_memory_format()));
}

Tensor replicationPad1dMeta(In self, c10::SymIntArrayRef padding) {
  return inSuggestedFormat(self,
                           at::meta::replication_pad1d_symint(self, padding));
}

Tensor replicationPad2dMeta(In self, c10::SymIntArrayRef padding) {
  return inSuggestedFormat(self,
                           at::meta::replication_pad2d_symint(self, padding));
}

Tensor replicationPad3dMeta(In self, c10::SymIntArrayRef padding) {
  return inSuggestedFormat(self,
                           at::meta::replication_pad3d_symint(self, padding));
}

/** `native_dropout_backward`: `grad_output * mask * scale`, as the CPU
 * computes it, so shaped and promoted by the products' Meta functions. */
Tensor dropoutBackwardMeta(In grad_output, In mask, double scale) {
  Tensor factor = at::empty({}, grad_output.options().dtype(at::kDouble));
  factor.unsafeGetTensorImpl()->set_wrapped_number(true);
  return at::meta::mul(at::meta::mul(grad_output, mask), factor);
}

#define ACCINTE_HAND_WRITTEN(function) \
  c10::KernelFunction::makeFromUnboxedFunction(TORCH_FN(function))

// LITERALINCLUDE START: CH09_TABLE
// NB: `neg`, `abs.out` and the views are chapter 02's, the random operators
// chapter 08's: an operator has one PrivateUse1 kernel. Composites need no
// entry: `linear`, `matmul`, `cross_entropy`, `abs` and `clone` reach the
// device through the operators listed here. The optimizers' `_foreach_*`
// operators have kernels of their own (foreach_kernels.cpp).
// LITERALINCLUDE START: CH09_FIRST_ROWS
const std::vector<NativeOperator>& nativeOperators() {
  static const std::vector<NativeOperator> operators = {
      // Elementwise arithmetic: broadcasting and type promotion come from
      // TensorIterator, in the Meta function on the host and in the CPU
      // kernel on the device.
      {"add.Tensor", "add.out", ACCINTE_META(add)}, // LITERALINCLUDE EMPHASIZE
      {"add_.Tensor", "", ACCINTE_META(add_)},      // LITERALINCLUDE EMPHASIZE
      {"add.out", "", ACCINTE_META(add_outf)},      // LITERALINCLUDE EMPHASIZE
      // LITERALINCLUDE END: CH09_FIRST_ROWS
      {"sub.Tensor", "sub.out", ACCINTE_META(sub)},
      {"sub_.Tensor", "", ACCINTE_META(sub_)},
      {"sub.out", "", ACCINTE_META(sub_outf)},
      {"mul.Tensor", "mul.out", ACCINTE_META(mul)},
      {"mul_.Tensor", "", ACCINTE_META(mul_)},
      {"mul.out", "", ACCINTE_META(mul_outf)},
      {"div.Tensor", "div.out", ACCINTE_META_OF(div, Tensor(In, In))},
      {"div_.Tensor", "", ACCINTE_META_OF(div_, Tensor & (Tensor&, In))},
      {"div.out", "", ACCINTE_META_OF(div_outf, Tensor & (In, In, Tensor&))},
      {"div.Tensor_mode", "div.out_mode",
       ACCINTE_META_OF(div, Tensor(In, In, Mode))},
      {"div_.Tensor_mode", "",
       ACCINTE_META_OF(div_, Tensor & (Tensor&, In, Mode))},
      {"div.out_mode", "",
       ACCINTE_META_OF(div_outf, Tensor & (In, In, Mode, Tensor&))},
      {"maximum", "maximum.out", ACCINTE_META(maximum)},
      {"maximum.out", "", ACCINTE_META(maximum_outf)},
      {"minimum", "minimum.out", ACCINTE_META(minimum)},
      {"minimum.out", "", ACCINTE_META(minimum_outf)},
      {"pow.Tensor_Scalar", "pow.Tensor_Scalar_out",
       ACCINTE_META_OF(pow, Tensor(In, Scalar))},
      {"pow_.Scalar", "", ACCINTE_META_OF(pow_, Tensor & (Tensor&, Scalar))},
      {"pow.Tensor_Scalar_out", "",
       ACCINTE_META_OF(pow_outf, Tensor & (In, Scalar, Tensor&))},
      {"pow.Tensor_Tensor", "pow.Tensor_Tensor_out",
       ACCINTE_META_OF(pow, Tensor(In, In))},
      {"pow_.Tensor", "", ACCINTE_META_OF(pow_, Tensor & (Tensor&, In))},
      {"pow.Tensor_Tensor_out", "",
       ACCINTE_META_OF(pow_outf, Tensor & (In, In, Tensor&))},
      {"addcmul", "addcmul.out", ACCINTE_META(addcmul)},
      {"addcmul_", "", ACCINTE_META(addcmul_)},
      {"addcmul.out", "", ACCINTE_META(addcmul_outf)},
      {"addcdiv", "addcdiv.out", ACCINTE_META(addcdiv)},
      {"addcdiv_", "", ACCINTE_META(addcdiv_)},
      {"addcdiv.out", "", ACCINTE_META(addcdiv_outf)},
      {"lerp.Scalar", "lerp.Scalar_out",
       ACCINTE_META_OF(lerp, Tensor(In, In, Scalar))},
      {"lerp_.Scalar", "",
       ACCINTE_META_OF(lerp_, Tensor & (Tensor&, In, Scalar))},
      {"lerp.Scalar_out", "",
       ACCINTE_META_OF(lerp_outf, Tensor & (In, In, Scalar, Tensor&))},
      // Comparisons.
      {"eq.Tensor", "eq.Tensor_out", ACCINTE_META_OF(eq, Tensor(In, In))},
      {"ne.Tensor", "ne.Tensor_out", ACCINTE_META_OF(ne, Tensor(In, In))},
      {"lt.Tensor", "lt.Tensor_out", ACCINTE_META_OF(lt, Tensor(In, In))},
      {"le.Tensor", "le.Tensor_out", ACCINTE_META_OF(le, Tensor(In, In))},
      {"gt.Tensor", "gt.Tensor_out", ACCINTE_META_OF(gt, Tensor(In, In))},
      {"ge.Tensor", "ge.Tensor_out", ACCINTE_META_OF(ge, Tensor(In, In))},
      {"eq.Scalar", "eq.Scalar_out", ACCINTE_META_OF(eq, Tensor(In, Scalar))},
      {"ne.Scalar", "ne.Scalar_out", ACCINTE_META_OF(ne, Tensor(In, Scalar))},
      {"lt.Scalar", "lt.Scalar_out", ACCINTE_META_OF(lt, Tensor(In, Scalar))},
      {"le.Scalar", "le.Scalar_out", ACCINTE_META_OF(le, Tensor(In, Scalar))},
      {"gt.Scalar", "gt.Scalar_out", ACCINTE_META_OF(gt, Tensor(In, Scalar))},
      {"ge.Scalar", "ge.Scalar_out", ACCINTE_META_OF(ge, Tensor(In, Scalar))},
      {"isneginf", "isneginf.out", ACCINTE_META(isneginf)},
      {"isneginf.out", "", ACCINTE_META(isneginf_outf)},
      {"isin.Tensor_Tensor", "isin.Tensor_Tensor_out",
       ACCINTE_META_OF(isin, Tensor(In, In, bool, bool))},
      {"isin.Tensor_Tensor_out", "",
       ACCINTE_META_OF(isin_outf, Tensor & (In, In, bool, bool, Tensor&))},
      // Masks: bitwise operators on bools (and integers), and triangles.
      {"bitwise_and.Tensor", "bitwise_and.Tensor_out",
       ACCINTE_META(bitwise_and)},
      {"bitwise_and_.Tensor", "", ACCINTE_META(bitwise_and_)},
      {"bitwise_and.Tensor_out", "", ACCINTE_META(bitwise_and_outf)},
      {"bitwise_or.Tensor", "bitwise_or.Tensor_out", ACCINTE_META(bitwise_or)},
      {"bitwise_or_.Tensor", "", ACCINTE_META(bitwise_or_)},
      {"bitwise_or.Tensor_out", "", ACCINTE_META(bitwise_or_outf)},
      {"bitwise_not", "bitwise_not.out", ACCINTE_META(bitwise_not)},
      {"bitwise_not_", "", ACCINTE_META(bitwise_not_)},
      {"bitwise_not.out", "", ACCINTE_META(bitwise_not_outf)},
      {"tril", "tril.out", ACCINTE_META(tril_symint)},
      {"tril_", "", ACCINTE_META(tril__symint)},
      {"tril.out", "", ACCINTE_META(tril_symint_outf)},
      // Unary functions and activations, and their backward.
      {"exp", "exp.out", ACCINTE_META(exp)},
      {"exp_", "", ACCINTE_META(exp_)},
      {"log", "log.out", ACCINTE_META(log)},
      {"log_", "", ACCINTE_META(log_)},
      {"sqrt", "sqrt.out", ACCINTE_META(sqrt)},
      {"sqrt_", "", ACCINTE_META(sqrt_)},
      {"rsqrt", "rsqrt.out", ACCINTE_META(rsqrt)},
      {"reciprocal", "reciprocal.out", ACCINTE_META(reciprocal)},
      {"reciprocal_", "", ACCINTE_META(reciprocal_)},
      {"rsqrt_", "", ACCINTE_META(rsqrt_)},
      {"sigmoid", "sigmoid.out", ACCINTE_META(sigmoid)},
      {"sigmoid_", "", ACCINTE_META(sigmoid_)},
      {"tanh", "tanh.out", ACCINTE_META(tanh)},
      {"tanh_", "", ACCINTE_META(tanh_)},
      {"clamp", "clamp.out",
       ACCINTE_META_OF(clamp, Tensor(In, const std::optional<at::Scalar>&,
                                     const std::optional<at::Scalar>&))},
      {"clamp_min", "clamp_min.out",
       ACCINTE_META_OF(clamp_min, Tensor(In, Scalar))},
      {"clamp_min_", "",
       ACCINTE_META_OF(clamp_min_, Tensor & (Tensor&, Scalar))},
      {"clamp_min.Tensor", "clamp_min.Tensor_out",
       ACCINTE_META_OF(clamp_min, Tensor(In, In))},
      {"clamp_min_.Tensor", "",
       ACCINTE_META_OF(clamp_min_, Tensor & (Tensor&, In))},
      {"clamp_max", "clamp_max.out",
       ACCINTE_META_OF(clamp_max, Tensor(In, Scalar))},
      {"relu", "",
       c10::KernelFunction::makeFromUnboxedFunction(TORCH_FN(reluMeta))},
      {"relu_", "",
       c10::KernelFunction::makeFromUnboxedFunction(TORCH_FN(reluInPlaceMeta))},
      {"gelu", "gelu.out", ACCINTE_META(gelu)},
      {"silu", "silu.out", ACCINTE_META(silu)},
      {"threshold_backward", "threshold_backward.grad_input",
       ACCINTE_META(threshold_backward)},
      {"sigmoid_backward", "sigmoid_backward.grad_input",
       ACCINTE_META(sigmoid_backward)},
      {"tanh_backward", "tanh_backward.grad_input",
       ACCINTE_META(tanh_backward)},
      {"gelu_backward", "gelu_backward.grad_input",
       ACCINTE_META(gelu_backward)},
      {"silu_backward", "silu_backward.grad_input",
       ACCINTE_META(silu_backward)},
      // Reductions.
      {"sum.dim_IntList", "sum.IntList_out", ACCINTE_META(sum)},
      {"mean.dim", "mean.out", ACCINTE_META(mean)},
      {"amax", "amax.out", ACCINTE_META(amax)},
      {"amin", "amin.out", ACCINTE_META(amin)},
      {"max.dim", "max.dim_max", ACCINTE_META(max)},
      {"min.dim", "min.dim_min", ACCINTE_META(min)},
      {"argmax", "argmax.out", ACCINTE_META(argmax)},
      {"linalg_vector_norm", "linalg_vector_norm.out",
       ACCINTE_META(linalg_vector_norm)},
      {"all", "all.all_out", ACCINTE_META_OF(all, Tensor(In))},
      {"all.all_out", "", ACCINTE_META_OF(all_outf, Tensor & (In, Tensor&))},
      {"all.dim", "all.out", ACCINTE_META_OF(all, Tensor(In, int64_t, bool))},
      {"all.out", "",
       ACCINTE_META_OF(all_outf, Tensor & (In, int64_t, bool, Tensor&))},
      {"any", "any.all_out", ACCINTE_META_OF(any, Tensor(In))},
      {"any.all_out", "", ACCINTE_META_OF(any_outf, Tensor & (In, Tensor&))},
      {"any.dim", "any.out", ACCINTE_META_OF(any, Tensor(In, int64_t, bool))},
      {"any.out", "",
       ACCINTE_META_OF(any_outf, Tensor & (In, int64_t, bool, Tensor&))},
      {"cumsum", "cumsum.out", ACCINTE_META(cumsum)},
      {"cumsum_", "", ACCINTE_META(cumsum_)},
      {"cumsum.out", "", ACCINTE_META(cumsum_outf)},
      // Indexing.
      {"gather", "gather.out", ACCINTE_META(gather)},
      {"gather.out", "", ACCINTE_META(gather_outf)},
      {"arange.start_out", "", ACCINTE_META(arange_outf)},
      // Pooling.
      {"max_pool2d_with_indices", "max_pool2d_with_indices.out",
       ACCINTE_META(max_pool2d_with_indices)},
      {"max_pool2d_with_indices.out", "",
       ACCINTE_META(max_pool2d_with_indices_outf)},
      {"max_pool2d_with_indices_backward",
       "max_pool2d_with_indices_backward.grad_input",
       ACCINTE_META(max_pool2d_with_indices_backward)},
      {"max_pool2d_with_indices_backward.grad_input", "",
       ACCINTE_META(max_pool2d_with_indices_backward_outf)},
      // Replication padding (host check above). NB: the out= overloads stay
      // on chapter 02's fallback, whose CPU copy the CPU kernel may
      // re-stride.
      {"replication_pad1d", "replication_pad1d.out",
       ACCINTE_HAND_WRITTEN(replicationPad1dMeta)},
      {"replication_pad2d", "replication_pad2d.out",
       ACCINTE_HAND_WRITTEN(replicationPad2dMeta)},
      {"replication_pad3d", "replication_pad3d.out",
       ACCINTE_HAND_WRITTEN(replicationPad3dMeta)},
      // Matrix products.
      {"mm", "mm.out", ACCINTE_META(mm)},
      {"mm.out", "", ACCINTE_META(mm_outf)},
      {"addmm", "addmm.out", ACCINTE_META(addmm)}, // LITERALINCLUDE EMPHASIZE
      {"addmm_", "", ACCINTE_META(addmm_)},
      {"addmm.out", "", ACCINTE_META(addmm_outf)},
      {"bmm", "bmm.out", ACCINTE_META(bmm)},
      {"bmm.out", "", ACCINTE_META(bmm_outf)},
      {"baddbmm", "baddbmm.out", ACCINTE_META(baddbmm)},
      {"baddbmm.out", "", ACCINTE_META(baddbmm_outf)},
      // Softmax, the negative log-likelihood loss, and their backward.
      {"_softmax", "_softmax.out", ACCINTE_META(_softmax)},
      {"_log_softmax", "_log_softmax.out", ACCINTE_META(_log_softmax)},
      {"_softmax_backward_data", "_softmax_backward_data.out",
       ACCINTE_META(_softmax_backward_data)},
      {"_log_softmax_backward_data", "_log_softmax_backward_data.out",
       ACCINTE_META(_log_softmax_backward_data)},
      {"nll_loss_forward", "nll_loss_forward.output",
       ACCINTE_META(nll_loss_forward_symint)},
      {"nll_loss_backward", "nll_loss_backward.grad_input",
       ACCINTE_META(nll_loss_backward_symint)},
      // Filling and joining.
      {"fill_.Scalar", "", ACCINTE_META_OF(fill_, Tensor & (Tensor&, Scalar))},
      {"fill_.Tensor", "", ACCINTE_META_OF(fill_, Tensor & (Tensor&, In))},
      {"zero_", "", ACCINTE_META(zero_)},
      {"cat", "cat.out", ACCINTE_META(cat)},
      // Operators whose host checks are written by hand (above).
      {"native_layer_norm", "", ACCINTE_HAND_WRITTEN(layerNormMeta)},
      {"native_layer_norm_backward", "",
       ACCINTE_HAND_WRITTEN(layerNormBackwardMeta)},
      {"where.self", "where.self_out", ACCINTE_HAND_WRITTEN(whereMeta)},
      {"where.self_out", "", ACCINTE_HAND_WRITTEN(whereOutMeta)},
      {"index_select", "index_select.out",
       ACCINTE_HAND_WRITTEN(indexSelectMeta)},
      {"index_select.out", "", ACCINTE_HAND_WRITTEN(indexSelectOutMeta)},
      {"embedding_dense_backward", "",
       ACCINTE_HAND_WRITTEN(embeddingBackwardMeta)},
      {"max", "max.unary_out", ACCINTE_HAND_WRITTEN(maxMeta)},
      {"max.unary_out", "", ACCINTE_HAND_WRITTEN(maxOutMeta)},
      // NB: not through `native_batch_norm.out`: the CPU's out= kernel
      // computes wrong statistics and results for an input that is not
      // contiguous (torch 2.13 to 2.15), where its functional kernel is
      // right; the functional kernel's results are copied instead.
      {"native_batch_norm", "", ACCINTE_HAND_WRITTEN(batchNormMeta)},
      {"native_batch_norm_backward", "",
       ACCINTE_HAND_WRITTEN(batchNormBackwardMeta)},
      {"native_dropout_backward", "native_dropout_backward.out",
       ACCINTE_HAND_WRITTEN(dropoutBackwardMeta)},
      {"masked_fill_.Scalar", "", ACCINTE_HAND_WRITTEN(maskedFillScalarMeta)},
      {"masked_fill_.Tensor", "", ACCINTE_HAND_WRITTEN(maskedFillTensorMeta)},
  };
  return operators;
}
// LITERALINCLUDE END: CH09_TABLE

/** The dispatcher's handle of "name.overload" in the aten namespace. */
c10::OperatorHandle atenOperator(std::string_view qualified) {
  const size_t dot = qualified.find('.');
  const std::string name = "aten::" + std::string(qualified.substr(0, dot));
  const std::string overload = dot == std::string_view::npos
                                   ? ""
                                   : std::string(qualified.substr(dot + 1));
  return c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(),
                                                        overload.c_str());
}

/** `value` with every defined tensor, alone or in a list, replaced by
 * `map(tensor)`. */
template <typename Map>
c10::IValue mapTensors(const c10::IValue& value, Map&& map) {
  if (value.isTensor()) {
    const at::Tensor& tensor = value.toTensor();
    return tensor.defined() ? c10::IValue(map(tensor)) : value;
  }
  if (value.isTensorList()) {
    c10::List<at::Tensor> mapped;
    for (const at::Tensor& tensor : value.toTensorVector()) {
      mapped.push_back(tensor.defined() ? map(tensor) : tensor);
    }
    return mapped;
  }
  if (value.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> mapped;
    for (const std::optional<at::Tensor>& tensor :
         value.toOptionalTensorVector()) {
      mapped.push_back(tensor.has_value() && tensor->defined()
                           ? std::optional<at::Tensor>(map(*tensor))
                           : tensor);
    }
    return mapped;
  }
  return value;
}

/** Calls `visit(position, element, tensor)` for every defined tensor of
 * `values`; `element` is the index in a list, or -1. */
template <typename Visit>
void forEachTensorAt(c10::ArrayRef<c10::IValue> values, Visit&& visit) {
  for (size_t position = 0; position < values.size(); ++position) {
    forEachTensorOf(values[position],
                    [&](int64_t element, const at::Tensor& tensor) {
                      visit(position, element, tensor);
                    });
  }
}

/** A list argument with a copy of its own list: a c10::List is shared by
 * every IValue copied from it. Any other value as it is. */
c10::IValue ownList(const c10::IValue& value) {
  if (value.isTensorList()) {
    return value.toTensorList().copy();
  }
  if (value.isOptionalTensorList()) {
    return value.toOptionalTensorList().copy();
  }
  return value;
}

/** Puts `tensor` in element `element` of the list argument `list`. */
void setListElement(c10::IValue& list, int64_t element, at::Tensor tensor) {
  if (list.isTensorList()) {
    list.toTensorList().set(element, std::move(tensor));
  } else {
    list.toOptionalTensorList().set(element, std::move(tensor));
  }
}

// LITERALINCLUDE START: CH09_DEVICE_CHECK
/**
 * The accinte device the operator runs on: the device of its accinte tensors.
 *
 * Raises the error CUDA raises for tensors on two accinte devices, or for a
 * CPU tensor that is not a 0-dim scalar input (a 0-dim CPU tensor that the
 * operator reads is a scalar argument: its value is read at launch).
 */
c10::Device deviceOf(const c10::OperatorHandle& op,
                     c10::ArrayRef<c10::IValue> arguments) {
  std::optional<c10::Device> device;
  std::optional<c10::Device> host;
  const auto& schema = op.schema().arguments();
  forEachTensorAt(arguments, [&](size_t position, int64_t,
                                 const at::Tensor& tensor) {
    if (!tensor.is_privateuseone()) {
      // NB: as TensorIterator for CUDA: a CPU scalar is an input only. The
      // kernel could not write it (`running += loss` with `running` on the
      // CPU once left it unchanged).
      if (tensor.dim() > 0 || !tensor.is_cpu() || isWritten(schema[position])) {
        host = tensor.device();
      }
    } else if (!device.has_value()) {
      device = tensor.device();
    } else if (*device != tensor.device()) {
      host = tensor.device();
    }
  });
  // NB: the dispatcher picked this kernel because an accinte tensor is here.
  TORCH_INTERNAL_ASSERT(device.has_value());
  TORCH_CHECK(!host.has_value(),
              "Expected all tensors to be on the same device, but found at "
              "least two devices, ",
              *device, " and ", *host, "! (when checking arguments of ",
              op.schema().operator_name(), ")");
  return *device;
}
// LITERALINCLUDE END: CH09_DEVICE_CHECK

/**
 * `copy`, marked as a Python number if `original` is one.
 *
 * NB: a Python number arrives as a "wrapped" 0-dim tensor, which type
 * promotion ranks below a 0-dim tensor: `int_tensor + 1.5` is float32 (the
 * default dtype), `int_tensor + torch.tensor(1.5, dtype=torch.float64)` is
 * float64. Neither an empty_strided nor a clone keeps the mark.
 */
at::Tensor keepWrappedNumber(const at::Tensor& original, at::Tensor copy) {
  if (original.unsafeGetTensorImpl()->is_wrapped_number()) {
    copy.unsafeGetTensorImpl()->set_wrapped_number(true);
  }
  return copy;
}

/** A tensor of the same sizes, strides and dtype on the Meta device. */
at::Tensor metaLike(const at::Tensor& tensor) {
  return keepWrappedNumber(
      tensor, at::detail::empty_strided_meta(tensor.sizes(), tensor.strides(),
                                             tensor.scalar_type()));
}

/** A copy, taken now, of a 0-dim host tensor that a kernel will read. */
at::Tensor hostScalarSnapshot(const at::Tensor& tensor) {
  return keepWrappedNumber(tensor, tensor.clone());
}

// LITERALINCLUDE START: CH09_KERNEL_ARGUMENTS
/**
 * The arguments of one launch, held the way a kernel may hold them: the
 * accinte tensors as KernelTensor (memory and layout, never ownership), the
 * host scalars as copies taken at launch, everything else by value.
 */
class KernelArguments {
 public:
  /** Takes `values` apart; an accinte tensor becomes a KernelTensor. */
  explicit KernelArguments(c10::ArrayRef<c10::IValue> values)
      : values_(values.begin(), values.end()) {
    for (c10::IValue& value : values_) {
      value = ownList(value);
    }
    forEachTensorAt(values, [&](size_t position, int64_t element,
                                const at::Tensor& tensor) {
      at::Tensor held;
      if (tensor.is_privateuseone()) {
        tensors_.emplace_back(tensor);
        slots_.push_back({position, element});
        if (tensor.numel() > 0) {
          buffers_.push_back(tensors_.back().buffer());
        }
      } else {
        held = hostScalarSnapshot(tensor);
      }
      // NB: the accinte tensor itself must not stay in the arguments: an
      // undefined tensor holds its place until the kernel puts a view there.
      if (element < 0) {
        values_[position] = held;
      } else {
        setListElement(values_[position], element, held);
      }
    });
  }

  /** The device pointers the launch must make accessible. */
  const std::vector<const void*>& buffers() const {
    return buffers_;
  }

  /** On the worker: the arguments, with CPU views of the device memory. */
  torch::jit::Stack cpuStack() const {
    torch::jit::Stack stack(values_.begin(), values_.end());
    // NB: a c10::List is shared by every IValue copied from it: each call
    // fills a list of its own.
    for (c10::IValue& value : stack) {
      value = ownList(value);
    }
    for (size_t index = 0; index < slots_.size(); ++index) {
      const Slot& slot = slots_[index];
      at::Tensor view = tensors_[index].cpuView();
      if (slot.element < 0) {
        stack[slot.position] = std::move(view);
      } else {
        setListElement(stack[slot.position], slot.element, std::move(view));
      }
    }
    return stack;
  }

 private:
  /** Where a device tensor goes: an argument, or an element of a list. */
  struct Slot {
    size_t position;
    int64_t element;
  };

  std::vector<c10::IValue> values_;
  std::vector<KernelTensor> tensors_;
  std::vector<Slot> slots_;
  std::vector<const void*> buffers_;
};
// LITERALINCLUDE END: CH09_KERNEL_ARGUMENTS

// LITERALINCLUDE START: CH09_LAUNCH
/**
 * Enqueues `body` on the current stream of `device` with `buffers`
 * accessible: launchOnCurrentStream() for a list of buffers known only at run
 * time.
 */
template <typename Body>
void launchWithBuffers(c10::DeviceIndex device,
                       const std::vector<const void*>& buffers, Body&& body) {
  // NB: as launchOnCurrentStream() does, only the message of a c10::Error
  // is kept: its backtrace is the worker's, not the caller's.
  ACCINTE_CHECK(accinte::launchKernel(
      nativeStream(currentStream(device)), buffers.data(), buffers.size(),
      [body = std::forward<Body>(body)]() mutable {
        try {
          body();
        } catch (const c10::Error& error) {
          throw std::runtime_error(error.what_without_backtrace());
        }
      }));
}
// LITERALINCLUDE END: CH09_LAUNCH

/**
 * Copies the CPU results of a functional kernel into the views of the device
 * outputs, alone or in lists.
 */
void copyResults(const torch::jit::Stack& outputs,
                 const torch::jit::Stack& results) {
  struct Found {
    size_t position;
    int64_t element;
    at::Tensor tensor;
  };
  const auto collect = [](const torch::jit::Stack& values) {
    std::vector<Found> found;
    forEachTensorAt(values, [&](size_t position, int64_t element,
                                const at::Tensor& tensor) {
      found.push_back({position, element, tensor});
    });
    return found;
  };
  const std::vector<Found> targets = collect(outputs);
  const std::vector<Found> computed = collect(results);
  TORCH_INTERNAL_ASSERT(outputs.size() == results.size() &&
                        targets.size() == computed.size());
  for (size_t index = 0; index < targets.size(); ++index) {
    const at::Tensor& output = targets[index].tensor;
    const at::Tensor& result = computed[index].tensor;
    // NB: a host check written by hand shaped the output; copy_ would
    // broadcast or convert a result it got wrong, silently.
    TORCH_INTERNAL_ASSERT(
        targets[index].position == computed[index].position &&
            targets[index].element == computed[index].element &&
            output.sizes() == result.sizes() &&
            output.dtype() == result.dtype(),
        "result ", targets[index].position,
        " differs from its host check's shape");
    output.copy_(result);
  }
}

// LITERALINCLUDE START: CH09_CPU_KERNEL_ON_DEVICE
/**
 * The boxed accinte kernel of every operator of nativeOperators().
 *
 * On the host: checks the devices, runs the operator's Meta kernel (which
 * checks everything else and computes the results' sizes, strides and
 * dtype), allocates the results on the device, or resizes the `out=`
 * arguments as the CPU would. On the device: one kernel that runs ATen's CPU
 * kernel on views of the device memory.
 */
class CpuKernelOnDevice final : public c10::OperatorKernel {
 public:
  CpuKernelOnDevice(const c10::OperatorHandle& op, c10::KernelFunction meta,
                    std::optional<c10::OperatorHandle> out_overload)
      : meta_(std::move(meta)),
        out_overload_(std::move(out_overload)),
        fills_(op.schema().name() == "aten::fill_" ||
               op.schema().name() == "aten::zero_" ||
               op.schema().name() == "aten::masked_fill_"),
        fills_with_tensor_(op.schema().name() == "aten::fill_" &&
                           op.schema().overload_name() == "Tensor"),
        masks_with_tensor_(op.schema().name() == "aten::masked_fill_" &&
                           op.schema().overload_name() == "Tensor") {
    const c10::FunctionSchema& schema = op.schema();
    const auto& arguments = schema.arguments();
    for (size_t index = 0; index < arguments.size(); ++index) {
      if (isWritten(arguments[index])) {
        written_.push_back(index);
      }
    }
    // Which argument each result of an in-place or out= operator is.
    for (const c10::Argument& result : schema.returns()) {
      TORCH_INTERNAL_ASSERT(result.alias_info() != nullptr || written_.empty(),
                            schema, ": a result that is not an argument");
      if (result.alias_info() == nullptr) {
        continue;
      }
      for (size_t index : written_) {
        if (arguments[index].alias_info()->beforeSets() ==
            result.alias_info()->beforeSets()) {
          result_arguments_.push_back(index);
        }
      }
    }
    TORCH_INTERNAL_ASSERT(written_.empty() || !out_overload_.has_value(),
                          schema, " writes its arguments: it runs as itself");
    if (out_overload_.has_value()) {
      // NB: an out= overload takes the operator's arguments, then one
      // output per result, in order.
      TORCH_INTERNAL_ASSERT(out_overload_->schema().arguments().size() ==
                                arguments.size() + schema.returns().size(),
                            out_overload_->schema(),
                            " is not the out= overload of ", schema);
    }
  }

  // LITERALINCLUDE START: CH09_STEP_CHECK
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet,
                  torch::jit::Stack* stack) {
    if (fills_with_tensor_ && fillFromTensor(stack)) {
      return;
    }
    if (masks_with_tensor_) {
      readValueOfAnotherDevice(stack);
    }
    const size_t count = op.schema().arguments().size();
    const c10::ArrayRef<c10::IValue> arguments =
        torch::jit::last(*stack, count);
    const c10::Device device = deviceOf(op, arguments);

    // 1. ATen's Meta function checks the arguments and shapes the results.
    torch::jit::Stack meta;
    meta.reserve(count);
    for (const c10::IValue& value : arguments) {
      meta.push_back(mapTensors(value, metaLike)); // LITERALINCLUDE EMPHASIZE
    }
    meta_.callBoxed(op, c10::DispatchKeySet(c10::DispatchKey::Meta),
                    &meta); // LITERALINCLUDE EMPHASIZE
    // LITERALINCLUDE END: CH09_STEP_CHECK

    // LITERALINCLUDE START: CH09_STEP_RESULTS
    // 2. The results: new device tensors, or the arguments they write.
    std::vector<c10::IValue> results;
    if (written_.empty()) {
      results.reserve(meta.size());
      for (const c10::IValue& shaped : meta) {
        results.push_back(mapTensors(shaped, [&](const at::Tensor& like) {
          return at::empty_strided(like.sizes(),
                                   like.strides(), // LITERALINCLUDE EMPHASIZE
                                   like.options().device(device));
        }));
      }
    } else {
      checkOverlap(op, arguments);
    }
    resizeOutArguments(arguments, meta);
    // LITERALINCLUDE END: CH09_STEP_RESULTS

    // LITERALINCLUDE START: CH09_STEP_LAUNCH
    // 3. One kernel runs ATen's CPU kernel on the device memory.
    std::vector<c10::IValue> launched(arguments.begin(), arguments.end());
    if (out_overload_.has_value()) {
      launched.insert(launched.end(), results.begin(), results.end());
    }
    // NB: only a functional operator without an out= overload (`relu`) has
    // its CPU results copied into the device results.
    const bool copies = !out_overload_.has_value() && written_.empty();
    if (anyElements(written_.empty() ? results : launched)) {
      launchCpuKernel( // LITERALINCLUDE EMPHASIZE
          device.index(), out_overload_.value_or(op), launched,
          copies ? c10::ArrayRef<c10::IValue>(results)
                 : c10::ArrayRef<c10::IValue>());
    }
    // LITERALINCLUDE END: CH09_STEP_LAUNCH

    // LITERALINCLUDE START: CH09_STEP_RETURN
    // 4. The results replace the arguments on the stack.
    if (!written_.empty()) {
      results.clear();
      for (size_t index : result_arguments_) {
        results.push_back(arguments[index]);
      }
    }
    torch::jit::drop(*stack, count);
    for (c10::IValue& result : results) {
      torch::jit::push(*stack, std::move(result));
    }
  }
  // LITERALINCLUDE END: CH09_STEP_RETURN

 private:
  /**
   * What ATen's `fill_(self, value)` does before it fills: a value on
   * another device is read with `item()` (so a CPU tensor can be filled
   * with an accinte scalar, as with a CUDA one), and a value that is part
   * of `self` (`x.fill_(x[2])`) is copied first, so the fill does not
   * overwrite it on the way. Returns whether it already filled.
   */
  static bool fillFromTensor(torch::jit::Stack* stack) {
    if (fillFromAnotherDevice(stack)) {
      return true;
    }
    const at::Tensor& self = (*stack)[stack->size() - 2].toTensor();
    const at::Tensor value = stack->back().toTensor();
    if (self.is_alias_of(value)) {
      stack->back() = value.clone();
    }
    return false;
  }

  /**
   * `masked_fill_.Tensor(self, mask, value)` with a 0-dim `value` on
   * another accinte device than `self`: takes a host copy of it, which the
   * launch reads as a number, as CUDA's kernel reads `value.item()`.
   */
  static void readValueOfAnotherDevice(torch::jit::Stack* stack) {
    const at::Tensor& self = (*stack)[stack->size() - 3].toTensor();
    const at::Tensor value = stack->back().toTensor();
    if (value.dim() == 0 && value.is_privateuseone() &&
        value.device() != self.device()) {
      stack->back() = value.cpu();
    }
  }

  /**
   * Gives each out= argument the sizes and strides the Meta kernel gave its
   * stand-in: ATen's out= kernels resize a wrong-sized output (with a
   * warning, which the Meta kernel gave), and the device kernel then writes
   * a view of exactly that shape.
   */
  void resizeOutArguments(c10::ArrayRef<c10::IValue> arguments,
                          const torch::jit::Stack& meta) const {
    for (size_t result = 0; result < result_arguments_.size(); ++result) {
      const at::Tensor& target =
          arguments[result_arguments_[result]].toTensor();
      const at::Tensor& shaped = meta[result].toTensor();
      if (target.sizes() != shaped.sizes()) {
        target.resize_(shaped.sizes());
      }
      if (target.strides() != shaped.strides()) {
        target.as_strided_(shaped.sizes(), shaped.strides());
      }
    }
  }

  /**
   * As TensorIterator does on the CPU: a written tensor must not overlap
   * itself, nor partly overlap an input (the same memory, in place, is
   * fine). The CPU kernel would check too, but on the stream's worker, where
   * a user's mistake could only surface as a failed launch.
   */
  void checkOverlap(const c10::OperatorHandle& op,
                    c10::ArrayRef<c10::IValue> arguments) const {
    if (!fills_) {
      for (size_t index : written_) {
        forEachTensorAt(arguments.slice(index, 1),
                        [](size_t, int64_t, const at::Tensor& written) {
                          at::assert_no_internal_overlap(written);
                        });
      }
    }
    checkNoPartialOverlap(op, arguments);
  }

  static bool anyElements(c10::ArrayRef<c10::IValue> values) {
    bool any = false;
    forEachTensorAt(values, [&](size_t, int64_t, const at::Tensor& tensor) {
      any |= tensor.numel() > 0;
    });
    return any;
  }

  c10::KernelFunction meta_;
  std::optional<c10::OperatorHandle> out_overload_;
  // NB: a fill writes the same value through every alias of an element, so
  // the CPU lets it write a tensor that overlaps itself (an expanded one;
  // masked_fill_ warns that this is deprecated).
  bool fills_;
  // `fill_.Tensor`, whose value may be on another device or part of `self`.
  bool fills_with_tensor_;
  // `masked_fill_.Tensor`, whose value may be on another device.
  bool masks_with_tensor_;
  std::vector<size_t> written_;
  std::vector<size_t> result_arguments_;
};
// LITERALINCLUDE END: CH09_CPU_KERNEL_ON_DEVICE

} // namespace

// LITERALINCLUDE START: CH09_REGISTER
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const NativeOperator& entry : nativeOperators()) {
    const c10::OperatorHandle op = atenOperator(entry.name);
    std::optional<c10::OperatorHandle> out_overload;
    if (!entry.out_overload.empty()) {
      out_overload = atenOperator(entry.out_overload);
    }
    m.impl(std::string(entry.name).c_str(),          // LITERALINCLUDE EMPHASIZE
           torch::CppFunction::makeFromBoxedFunctor( // LITERALINCLUDE EMPHASIZE
               std::make_unique<CpuKernelOnDevice>(op, entry.meta,
                                                   std::move(out_overload))));
  }
}
// LITERALINCLUDE END: CH09_REGISTER

NativeKernel::NativeKernel(std::string_view name, std::string_view out_overload,
                           c10::KernelFunction meta)
    : op_(atenOperator(name)) {
  std::optional<c10::OperatorHandle> out;
  if (!out_overload.empty()) {
    out = atenOperator(out_overload);
  }
  kernel_ =
      std::make_shared<CpuKernelOnDevice>(op_, std::move(meta), std::move(out));
}

void NativeKernel::operator()(torch::jit::Stack* stack) const {
  (*static_cast<CpuKernelOnDevice*>(kernel_.get()))(
      op_, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
}

// LITERALINCLUDE START: CH09_CPU_KERNEL_LAUNCH
void launchCpuKernel(c10::DeviceIndex device, const c10::OperatorHandle& cpu_op,
                     c10::ArrayRef<c10::IValue> arguments,
                     c10::ArrayRef<c10::IValue> outputs) {
  KernelArguments kernel_arguments(arguments);
  KernelArguments results(outputs);
  std::vector<const void*> buffers = kernel_arguments.buffers();
  buffers.insert(buffers.end(), results.buffers().begin(),
                 results.buffers().end());
  launchWithBuffers( // LITERALINCLUDE EMPHASIZE
      device, buffers,
      [cpu_op, kernel_arguments = std::move(kernel_arguments),
       results = std::move(results), copies = !outputs.empty()] {
        // NB: the views are plain CPU tensors: nothing above the CPU kernel
        // (autograd, the lazy conjugation of a view) is left to do. The
        // operators whose PrivateUse1 kernel receives a conjugated tensor
        // are the ones whose kernels resolve it, on the CPU as well.
        const at::AutoDispatchBelowADInplaceOrView below_autograd;
        torch::jit::Stack cpu = kernel_arguments.cpuStack();
        cpu_op.redispatchBoxed( // LITERALINCLUDE EMPHASIZE
            c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu);
        if (copies) {
          copyResults(results.cpuStack(), cpu);
        }
      });
}
// LITERALINCLUDE END: CH09_CPU_KERNEL_LAUNCH

std::vector<std::string> nativeKernelOperators() {
  std::vector<std::string> names;
  for (const NativeOperator& entry : nativeOperators()) {
    names.emplace_back(entry.name);
  }
  return names;
}

} // namespace accinte
