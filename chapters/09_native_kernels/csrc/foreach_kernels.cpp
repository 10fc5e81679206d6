// Chapter 09: the optimizers' multi-tensor operators. An optimizer step
// with `foreach=True` calls `_foreach_*` operators, each on whole lists of
// tensors (every parameter, every gradient, every state), and with
// `fused=True` one `_fused_adam_`, `_fused_adamw_` or `_fused_sgd_` for the
// whole step. ATen's kernel of a `_foreach_*` operator for every device but
// CUDA is a loop over the list with the single-tensor operator: one launch
// per tensor. These kernels check the lists on the host and then run the
// whole list in one launch, as CUDA's do.

#include <09_native_kernels/csrc/native_kernels.h>

#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/native/ForeachUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/result_type.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace accinte {
namespace {

using at::Tensor;

/** What a `_foreach_*` operator returns. */
enum class ForeachResults {
  /** Nothing: it writes its first list in place. */
  kInPlace,
  /** One tensor like each tensor of its first list (sizes, strides, dtype).
   */
  kLikeFirstList,
  /** One 0-dim norm per tensor of its first list. */
  kNorms,
};

// LITERALINCLUDE START: CH09_FOREACH_TABLE
/**
 * A multi-tensor operator that runs natively: the overload its CPU kernel
 * runs as, what it returns, and whether its result is floating for integral
 * inputs (division, square root, lerp, norms). CUDA's fast route takes
 * none of those: their integral lists go the single-tensor way.
 */
struct ForeachOperator {
  std::string_view name;
  std::string_view out_overload;
  ForeachResults results;
  bool promotes_integer_to_float;
};

// NB: the operators Adam, AdamW and SGD call with `foreach=True` (and with
// `capturable=True`), `fused=True` around the fused kernel (the step count),
// `zero_grad` without `set_to_none`, and `clip_grad_norm_`.
const std::vector<ForeachOperator>& foreachOperators() {
  using R = ForeachResults;
  static const std::vector<ForeachOperator> operators = {
      {"_foreach_add_.List", "", R::kInPlace, false},
      {"_foreach_add_.Scalar", "", R::kInPlace, false},
      {"_foreach_add_.ScalarList", "", R::kInPlace, false},
      {"_foreach_add_.Tensor", "", R::kInPlace, false},
      {"_foreach_add.List", "_foreach_add.List_out", R::kLikeFirstList, false},
      {"_foreach_add.Scalar", "_foreach_add.Scalar_out", R::kLikeFirstList,
       false},
      {"_foreach_sub_.List", "", R::kInPlace, false},
      {"_foreach_sub_.Scalar", "", R::kInPlace, false},
      {"_foreach_mul_.List", "", R::kInPlace, false},
      {"_foreach_mul_.Scalar", "", R::kInPlace, false},
      {"_foreach_mul_.ScalarList", "", R::kInPlace, false},
      {"_foreach_mul_.Tensor", "", R::kInPlace, false},
      {"_foreach_mul.Scalar", "_foreach_mul.Scalar_out", R::kLikeFirstList,
       false},
      {"_foreach_div_.List", "", R::kInPlace, true},
      {"_foreach_div_.Scalar", "", R::kInPlace, true},
      {"_foreach_div_.ScalarList", "", R::kInPlace, true},
      {"_foreach_div_.Tensor", "", R::kInPlace, true},
      {"_foreach_maximum_.List", "", R::kInPlace, false},
      {"_foreach_addcmul_.Scalar", "", R::kInPlace, false},
      {"_foreach_addcmul_.ScalarList", "", R::kInPlace, false},
      {"_foreach_addcdiv_.Scalar", "", R::kInPlace, true},
      {"_foreach_addcdiv_.ScalarList", "", R::kInPlace, true},
      {"_foreach_lerp_.Scalar", "", R::kInPlace, true},
      {"_foreach_lerp_.List", "", R::kInPlace, true},
      {"_foreach_sqrt_", "", R::kInPlace, true},
      {"_foreach_sqrt", "_foreach_sqrt.out", R::kLikeFirstList, true},
      {"_foreach_reciprocal_", "", R::kInPlace, true},
      {"_foreach_neg_", "", R::kInPlace, false},
      {"_foreach_neg", "_foreach_neg.out", R::kLikeFirstList, false},
      {"_foreach_pow.ScalarAndTensor", "", R::kLikeFirstList, false},
      {"_foreach_zero_", "", R::kInPlace, false},
      {"_foreach_norm.Scalar", "_foreach_norm.Scalar_out", R::kNorms, true},
  };
  return operators;
}
// LITERALINCLUDE END: CH09_FOREACH_TABLE

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

bool isNumber(const c10::TypePtr& type) {
  return type->kind() == c10::TypeKind::NumberType;
}

/** The arguments of one call of a `_foreach_*` operator, by kind. */
struct ForeachArguments {
  std::vector<std::vector<Tensor>> lists;
  std::vector<std::vector<at::Scalar>> scalar_lists;
  std::vector<at::Scalar> scalars;
  std::vector<Tensor> tensors;
  std::optional<at::ScalarType> dtype;

  ForeachArguments(const c10::FunctionSchema& schema,
                   c10::ArrayRef<c10::IValue> values) {
    for (size_t index = 0; index < values.size(); ++index) {
      const c10::Argument& argument = schema.arguments()[index];
      const c10::IValue& value = values[index];
      if (value.isTensorList()) {
        lists.push_back(value.toTensorVector());
      } else if (value.isTensor()) {
        tensors.push_back(value.toTensor());
      } else if (isNumber(argument.type())) {
        // NB: a norm's order is no operand: type promotion ignores it.
        if (argument.name() != "ord") {
          scalars.push_back(value.toScalar());
        }
      } else if (argument.type()->kind() == c10::TypeKind::ListType &&
                 isNumber(argument.type()->containedType(0))) {
        std::vector<at::Scalar> list;
        for (const c10::IValue& element : value.toListRef()) {
          list.push_back(element.toScalar());
        }
        scalar_lists.push_back(std::move(list));
      } else if (argument.name() == "dtype" && !value.isNone()) {
        dtype = static_cast<at::ScalarType>(value.toInt());
      }
    }
    TORCH_INTERNAL_ASSERT(!lists.empty(), schema, ": no tensor list");
  }

  std::vector<at::TensorList> tensorLists() const {
    return {lists.begin(), lists.end()};
  }
};

// LITERALINCLUDE START: CH09_FOREACH_CHECKS
/**
 * The checks ATen's `_foreach_*` kernels make on every device, in their
 * words: lists that are not empty, of one length, scalar lists of that
 * length too, and a tensor operand that is a single number.
 */
void checkForeachArguments(const ForeachArguments& arguments) {
  const at::TensorList first = arguments.lists.front();
  for (const Tensor& tensor : arguments.tensors) {
    TORCH_CHECK(tensor.dim() == 0 && tensor.numel() == 1,
                "scalar tensor expected to be 0 dim but it has ", tensor.dim(),
                " dimensions and ", tensor.numel(), " elements.");
  }
  at::native::check_foreach_api_restrictions(first);
  for (size_t index = 1; index < arguments.lists.size(); ++index) {
    at::native::check_foreach_api_restrictions(first, arguments.lists[index]);
  }
  for (const std::vector<at::Scalar>& scalars : arguments.scalar_lists) {
    at::native::check_foreach_api_restrictions(first, scalars);
  }
}

/**
 * Whether the lists can run as one launch: CUDA's fast route. Every tensor
 * on one accinte device, of one dtype, dense, the tensors at one index of
 * the lists of one size and layout, and no operand (scalar, tensor, `dtype`)
 * that promotes the result to another dtype. Anything else (a list spread
 * over two devices, a CPU tensor, a broadcast, mixed dtypes, an integral
 * list where the result is floating) goes the single-tensor way, as on CUDA.
 */
bool canRunAsOneLaunch(const ForeachOperator& entry,
                       const ForeachArguments& arguments) {
  const std::vector<at::TensorList> lists = arguments.tensorLists();
  if (!at::native::check_fast_path_restrictions(
          lists, {}, entry.promotes_integer_to_float)) {
    return false;
  }
  const Tensor& first = lists.front().front();
  if (!first.is_privateuseone()) {
    return false;
  }
  for (const at::Scalar& scalar : arguments.scalars) {
    if (!at::native::_check_tensors_do_type_promotion_with_scalars(
            lists.front(), {scalar})) {
      return false;
    }
  }
  for (const std::vector<at::Scalar>& scalars : arguments.scalar_lists) {
    if (!at::native::_check_tensors_do_type_promotion_with_scalars(
            lists.front(), scalars)) {
      return false;
    }
  }
  for (const Tensor& tensor : arguments.tensors) {
    // NB: a 0-dim CPU tensor is read at launch, as a number.
    const bool here = tensor.device() == first.device() || tensor.is_cpu();
    if (!here || at::result_type(first, tensor) != first.scalar_type()) {
      return false;
    }
  }
  if (entry.results == ForeachResults::kNorms) {
    // NB: some norms of an empty tensor are errors (the infinity norm has
    // no identity): ATen's kernel raises them on the host.
    for (const Tensor& tensor : lists.front()) {
      if (tensor.numel() == 0) {
        return false;
      }
    }
  }
  return !arguments.dtype.has_value() ||
         *arguments.dtype == first.scalar_type();
}
// LITERALINCLUDE END: CH09_FOREACH_CHECKS

/**
 * The single-tensor operators' own host checks, for lists that run as one
 * launch: ATen's loop over the lists, on Meta copies of their first tensors
 * (and the first element of each scalar list).
 *
 * NB: the one launch runs the CPU's multi-tensor kernel, which skips them
 * (`neg` refuses a bool tensor, in its words); on this route every tensor
 * of a list has the first one's dtype, so the first tensors stand for all.
 */
void checkAsSingleTensors(const c10::OperatorHandle& op,
                          c10::ArrayRef<c10::IValue> values) {
  torch::jit::Stack meta;
  meta.reserve(values.size());
  for (const c10::IValue& value : values) {
    if (value.isTensorList()) {
      const Tensor first = value.toTensorList().get(0);
      meta.emplace_back(c10::List<Tensor>({at::detail::empty_strided_meta(
          first.sizes(), first.strides(), first.scalar_type())}));
    } else if (value.isList()) {
      const c10::List<c10::IValue> whole = value.toList();
      c10::impl::GenericList first(whole.elementType());
      first.push_back(whole.get(0));
      meta.emplace_back(std::move(first));
    } else {
      meta.push_back(value);
    }
  }
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &meta);
}

/** The results of a functional `_foreach_*` operator, on the device. */
std::vector<Tensor> foreachResults(ForeachResults kind, at::TensorList first) {
  std::vector<Tensor> results;
  results.reserve(first.size());
  for (const Tensor& tensor : first) {
    if (kind == ForeachResults::kNorms) {
      results.push_back(at::empty(
          {},
          tensor.options().dtype(at::toRealValueType(tensor.scalar_type()))));
    } else {
      // NB: a dense tensor's strides are kept, as TensorIterator keeps
      // them for the CPU's single-tensor operator.
      results.push_back(at::empty_like(tensor));
    }
  }
  return results;
}

// LITERALINCLUDE START: CH09_FOREACH_KERNEL
/**
 * The boxed accinte kernel of every operator of foreachOperators().
 *
 * On the host: ATen's list checks, then CUDA's choice of route. Lists that
 * can run as one launch get their results allocated (a functional operator)
 * and one kernel that runs the CPU's kernel of the operator on views of
 * every tensor of every list. The others run ATen's loop over the lists with
 * the single-tensor operators (each its own launch, with its own host
 * checks and errors), as CUDA's slow route does.
 */
class ForeachKernel final : public c10::OperatorKernel {
 public:
  ForeachKernel(const c10::OperatorHandle& op, ForeachOperator entry)
      : entry_(entry) {
    if (!entry.out_overload.empty()) {
      out_overload_ = atenOperator(entry.out_overload);
    }
    // NB: the loop over the single-tensor operators is ATen's kernel for
    // every device without one of its own, the CPU included; the slow
    // route reaches it through the CPU's entry.
    TORCH_INTERNAL_ASSERT(!op.hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
                              op.hasKernelForDispatchKey(
                                  c10::DispatchKey::CompositeExplicitAutograd),
                          op.schema(),
                          ": expected ATen's loop over the list as its kernel");
  }

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet,
                  torch::jit::Stack* stack) {
    const size_t count = op.schema().arguments().size();
    const c10::ArrayRef<c10::IValue> values = torch::jit::last(*stack, count);
    const ForeachArguments arguments(op.schema(), values);
    checkForeachArguments(arguments);
    if (!canRunAsOneLaunch(entry_, arguments)) {
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
      return;
    }
    checkAsSingleTensors(op, values);
    const c10::Device device = arguments.lists.front().front().device();
    const c10::DeviceGuard guard(device);
    std::vector<c10::IValue> launched(values.begin(), values.end());
    std::optional<std::vector<Tensor>> results;
    std::vector<c10::IValue> copied_into;
    if (entry_.results != ForeachResults::kInPlace) {
      results = foreachResults(entry_.results, arguments.lists.front());
      // NB: an out= overload writes the device results itself; without one
      // (`_foreach_pow.ScalarAndTensor`) the results are copied into them.
      (out_overload_.has_value() ? launched : copied_into)
          .emplace_back(*results);
    }
    launchCpuKernel( // LITERALINCLUDE EMPHASIZE
        device.index(), out_overload_.value_or(op), launched, copied_into);
    torch::jit::drop(*stack, count);
    if (results.has_value()) {
      torch::jit::push(*stack, std::move(*results));
    }
  }

 private:
  ForeachOperator entry_;
  std::optional<c10::OperatorHandle> out_overload_;
};
// LITERALINCLUDE END: CH09_FOREACH_KERNEL

/** A named tensor list of a fused optimizer step. */
struct NamedList {
  const char* name;
  at::TensorList tensors;
};

// LITERALINCLUDE START: CH09_FUSED_CHECKS
/**
 * The host checks of `_fused_adam_`, `_fused_adamw_` and `_fused_sgd_`:
 * the lists one length (the optional ones may be empty), the parameters'
 * lists of one floating dtype, device and layout (CUDA's check, in its
 * words), one step count per parameter, and the AMP scalars and a tensor
 * `lr` single float32 numbers on that device. The CPU's kernel reads them
 * all on the stream's worker, where a mistake could only fail the launch.
 */
void checkFusedStep(
    const char* op, const std::vector<NamedList>& same_layout,
    const std::vector<NamedList>& optional_lists, const NamedList& state_steps,
    std::initializer_list<std::pair<const char*, Tensor>> scalars) {
  const NamedList& params = same_layout.front();
  const size_t count = params.tensors.size();
  auto checkLength = [&](const NamedList& list) {
    TORCH_CHECK(list.tensors.size() == count, op, ": expected ", list.name,
                " to hold one tensor per parameter (", count, "), but got ",
                list.tensors.size());
  };
  std::vector<at::TensorList> lists;
  std::string names;
  for (const NamedList& list : same_layout) {
    checkLength(list);
    lists.push_back(list.tensors);
    names += std::string(names.empty() ? "" : ", ") + list.name;
  }
  for (const NamedList& list : optional_lists) {
    if (!list.tensors.empty()) {
      checkLength(list);
      lists.push_back(list.tensors);
      names += std::string(", ") + list.name;
    }
  }
  if (count == 0) {
    return;
  }
  TORCH_CHECK(at::native::check_fast_path_restrictions(lists), op, ": ", names,
              " must have same dtype, device, and layout");
  const Tensor& first = params.tensors.front();
  const at::ScalarType dtype = first.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble ||
                  dtype == at::kHalf || dtype == at::kBFloat16,
              op,
              ": expected float32, float64, float16 or bfloat16 "
              "parameters, but got ",
              dtype);
  if (!state_steps.tensors.empty()) {
    checkLength(state_steps);
  }
  for (const Tensor& step : state_steps.tensors) {
    TORCH_CHECK(step.device() == first.device() && step.numel() == 1, op,
                ": expected each of ", state_steps.name,
                " to be a single number on ", first.device(),
                ", but got sizes ", step.sizes(), " on ", step.device());
  }
  for (const auto& [name, scalar] : scalars) {
    if (!scalar.defined()) {
      continue;
    }
    TORCH_CHECK(scalar.numel() == 1 && scalar.scalar_type() == at::kFloat &&
                    (scalar.device() == first.device() || scalar.is_cpu()),
                op, ": expected ", name, " to be a single float32 number on ",
                first.device(), ", but got sizes ", scalar.sizes(), " of ",
                scalar.scalar_type(), " on ", scalar.device());
  }
}
// LITERALINCLUDE END: CH09_FUSED_CHECKS

/** The tensor argument `name`, or an undefined tensor for None or a float. */
Tensor optionalTensor(const c10::OperatorHandle& op,
                      c10::ArrayRef<c10::IValue> values, const char* name) {
  const std::optional<int> index = op.schema().argumentIndexWithName(name);
  TORCH_INTERNAL_ASSERT(index.has_value());
  return values[*index].isTensor() ? values[*index].toTensor() : Tensor();
}

/**
 * The boxed accinte kernel of the fused optimizer steps: the host checks,
 * then one launch that runs the CPU's fused kernel on views of every list.
 */
class FusedStepKernel final : public c10::OperatorKernel {
 public:
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet,
                  torch::jit::Stack* stack) {
    const size_t count = op.schema().arguments().size();
    const c10::ArrayRef<c10::IValue> values = torch::jit::last(*stack, count);
    auto list = [&](const char* name) {
      const std::optional<int> index = op.schema().argumentIndexWithName(name);
      TORCH_INTERNAL_ASSERT(index.has_value());
      return values[*index].toTensorVector();
    };
    const std::string name(op.schema().name());
    const char* op_name = name.c_str() + std::string_view("aten::").size();
    const std::vector<Tensor> params = list("self");
    const std::vector<Tensor> grads = list("grads");
    const Tensor lr = optionalTensor(op, values, "lr");
    const Tensor grad_scale = optionalTensor(op, values, "grad_scale");
    const Tensor found_inf = optionalTensor(op, values, "found_inf");
    const std::initializer_list<std::pair<const char*, Tensor>> scalars = {
        {"grad_scale", grad_scale}, {"found_inf", found_inf}, {"lr", lr}};
    if (name == "aten::_fused_sgd_") {
      const std::vector<Tensor> momentum = list("momentum_buffer_list");
      checkFusedStep(op_name, {{"params", params}, {"grads", grads}},
                     {{"momentum_buffer_list", momentum}}, {"", {}}, scalars);
      const std::optional<int> index =
          op.schema().argumentIndexWithName("momentum");
      TORCH_CHECK(
          values[*index].toDouble() == 0 || momentum.size() == params.size(),
          op_name,
          ": expected momentum_buffer_list to hold one "
          "tensor per parameter (",
          params.size(), "), but got ", momentum.size());
    } else {
      const std::vector<Tensor> exp_avgs = list("exp_avgs");
      const std::vector<Tensor> exp_avg_sqs = list("exp_avg_sqs");
      const std::vector<Tensor> max_exp_avg_sqs = list("max_exp_avg_sqs");
      const std::vector<Tensor> state_steps = list("state_steps");
      const std::optional<int> amsgrad =
          op.schema().argumentIndexWithName("amsgrad");
      TORCH_INTERNAL_ASSERT(amsgrad.has_value());
      std::vector<NamedList> same_layout = {{"params", params},
                                            {"grads", grads},
                                            {"exp_avgs", exp_avgs},
                                            {"exp_avg_sqs", exp_avg_sqs}};
      if (values[*amsgrad].toBool()) {
        same_layout.push_back({"max_exp_avg_sqs", max_exp_avg_sqs});
      }
      checkFusedStep(op_name, same_layout, {}, {"state_steps", state_steps},
                     scalars);
      TORCH_CHECK(state_steps.size() == params.size(), op_name,
                  ": expected state_steps to hold one tensor per parameter (",
                  params.size(), "), but got ", state_steps.size());
    }
    if (!params.empty()) {
      const c10::Device device = params.front().device();
      // NB: the checks put every tensor on the parameters' device, or a
      // scalar on the CPU; the dispatcher chose this kernel for an accinte
      // tensor.
      TORCH_INTERNAL_ASSERT(device.is_privateuseone());
      const c10::DeviceGuard guard(device);
      launchCpuKernel(device.index(), op, values);
    }
    torch::jit::drop(*stack, count);
  }
};

/** The numbers a GradScaler operator reads or writes hold one element
 * each; checked in the order and words of the CPU's kernels. */
void checkAmpSizes(
    std::initializer_list<std::pair<const char*, Tensor>> scalars) {
  for (const auto& [name, tensor] : scalars) {
    TORCH_CHECK(tensor.numel() == 1, name, " must be a 1-element tensor.");
  }
}

/** A single number of a GradScaler operator: its dtype and device. */
void checkAmpScalar(const char* name, const Tensor& tensor,
                    at::ScalarType dtype, const c10::Device& device) {
  TORCH_CHECK(tensor.scalar_type() == dtype, name, " must be ",
              dtype == at::kFloat ? "a float" : "an int", " tensor.");
  TORCH_CHECK(tensor.device() == device,
              "Expected all tensors to be on the same device, but found at "
              "least two devices, ",
              device, " and ", tensor.device(), "! (when checking argument ",
              name, ")");
}

/**
 * `_amp_foreach_non_finite_check_and_unscale_`, GradScaler's unscaling of
 * every gradient (chapter 05): one launch for the whole list.
 */
void ampUnscale(at::TensorList grads, Tensor& found_inf,
                const Tensor& inv_scale) {
  const c10::Device device = found_inf.device();
  checkAmpSizes({{"inv_scale", inv_scale}, {"found_inf", found_inf}});
  checkAmpScalar("inv_scale", inv_scale, at::kFloat, device);
  checkAmpScalar("found_inf", found_inf, at::kFloat, device);
  if (grads.empty()) {
    return;
  }
  for (const Tensor& grad : grads) {
    TORCH_CHECK(grad.device() == device,
                "Expected all tensors to be on the same device, but found at "
                "least two devices, ",
                device, " and ", grad.device(),
                "! (when checking argument scaled_grads)");
    TORCH_CHECK(grad.layout() == at::kStrided,
                "one of scaled_grads was not a strided tensor.");
    TORCH_CHECK_NOT_IMPLEMENTED(
        at::isFloatingType(grad.scalar_type()),
        "\"_amp_foreach_non_finite_check_and_unscale_cpu\" not implemented "
        "for '",
        c10::toString(grad.scalar_type()), "'");
  }
  const c10::DeviceGuard guard(device);
  static const c10::OperatorHandle op =
      atenOperator("_amp_foreach_non_finite_check_and_unscale_");
  launchCpuKernel(device.index(), op,
                  {c10::IValue(grads.vec()), found_inf, inv_scale});
}

/** `_amp_update_scale_`, GradScaler's update of its scale. */
Tensor& ampUpdateScale(Tensor& current_scale, Tensor& growth_tracker,
                       const Tensor& found_inf, double growth_factor,
                       double backoff_factor, int64_t growth_interval) {
  const c10::Device device = current_scale.device();
  checkAmpSizes({{"growth_tracker", growth_tracker},
                 {"current_scale", current_scale},
                 {"found_inf", found_inf}});
  checkAmpScalar("growth_tracker", growth_tracker, at::kInt, device);
  checkAmpScalar("current_scale", current_scale, at::kFloat, device);
  checkAmpScalar("found_inf", found_inf, at::kFloat, device);
  const c10::DeviceGuard guard(device);
  static const c10::OperatorHandle op = atenOperator("_amp_update_scale_");
  launchCpuKernel(device.index(), op,
                  {current_scale, growth_tracker, found_inf, growth_factor,
                   backoff_factor, growth_interval});
  return current_scale;
}

} // namespace

// LITERALINCLUDE START: CH09_FOREACH_REGISTER
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const ForeachOperator& entry : foreachOperators()) {
    m.impl(
        std::string(entry.name).c_str(),
        torch::CppFunction::makeFromBoxedFunctor(
            std::make_unique<ForeachKernel>(atenOperator(entry.name), entry)));
  }
  for (const char* fused :
       {"_fused_adam_", "_fused_adam_.tensor_lr", "_fused_adamw_",
        "_fused_adamw_.tensor_lr", "_fused_sgd_", "_fused_sgd_.tensor_lr"}) {
    m.impl(fused, torch::CppFunction::makeFromBoxedFunctor(
                      std::make_unique<FusedStepKernel>()));
  }
  m.impl("_amp_foreach_non_finite_check_and_unscale_", TORCH_FN(ampUnscale));
  m.impl("_amp_update_scale_", TORCH_FN(ampUpdateScale));
}
// LITERALINCLUDE END: CH09_FOREACH_REGISTER

} // namespace accinte
