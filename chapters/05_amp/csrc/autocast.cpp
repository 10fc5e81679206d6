// Autocast on accinte: a fallthrough for every operator on the
// AutocastPrivateUse1 key, and cast policies for the operators PyTorch casts
// on its own accelerators.

#include <05_amp/csrc/autocast.h>

#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include <optional>
#include <string_view>

namespace accinte {
namespace {

// NB: a function-local static: the registrations below fill it while static
// initializers run, when a vector at namespace scope might not exist yet.
std::vector<AutocastPolicy>& mutablePolicies() {
  static std::vector<AutocastPolicy> policies;
  return policies;
}

/**
 * Records one registration. `spelled` is the operator as the policy lists
 * spell it: `mm`, or `pow, Tensor_Scalar` for an overload.
 */
void record(std::string_view spelled, std::string_view policy) {
  std::string op = "aten::";
  for (const char c : spelled) {
    if (c == ',') {
      op += '.';
    } else if (c != ' ') {
      op += c;
    }
  }
  mutablePolicies().push_back({std::move(op), std::string(policy)});
}

// LITERALINCLUDE START: CH05_FALLTHROUGH
// NB: autocast's dispatch key is in every accinte tensor's key set, so the
// dispatcher visits AutocastPrivateUse1 for every operator while autocast is
// on. A fallthrough kernel is not a kernel that runs: the dispatcher skips
// the key and goes on to the next one (autograd, then the backend) at no
// cost. Without it, every operator that has no policy below would fail with
// "Could not run ... with arguments from the 'AutocastPrivateUse1' backend".
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}
// LITERALINCLUDE END: CH05_FALLTHROUGH

// LITERALINCLUDE START: CH05_BANNED
/**
 * `binary_cross_entropy` under autocast: refused, as on CUDA and XPU. Its
 * input is a probability, typically a sigmoid's output, which float16 rounds
 * to exactly 0 or 1 far too early, and the loss's log then overflows.
 */
at::Tensor binaryCrossEntropyUnderAutocast(
    const at::Tensor& /*self*/, const at::Tensor& /*target*/,
    const std::optional<at::Tensor>& /*weight*/, int64_t /*reduction*/) {
  TORCH_CHECK(false,
              "binary_cross_entropy is unsafe to autocast on accinte: in "
              "float16 the probabilities saturate at 0 and 1 and the loss "
              "overflows. Compute the loss from logits instead, with "
              "torch.nn.functional.binary_cross_entropy_with_logits or "
              "torch.nn.BCEWithLogitsLoss, which autocast runs in float32; "
              "or leave the loss outside the autocast region.");
}
// LITERALINCLUDE END: CH05_BANNED

// The types the policy lists of ATen/autocast_mode.h spell unqualified in
// the signatures of the operators that need a dtype appended.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

// LITERALINCLUDE START: CH05_POLICY_MACROS
// One registration per operator: KERNEL_PRIVATEUSEONE(op[, overload], policy)
// registers ATen's wrapper for that policy on AutocastPrivateUse1: it casts
// the floating-point accinte tensors among the arguments, excludes the
// autocast key, and calls the operator again, which now dispatches to
// autograd and the backend. Each registration is recorded for the table.
#define ACCINTE_AUTOCAST(POLICY, ...)       \
  KERNEL_PRIVATEUSEONE(__VA_ARGS__, POLICY) \
  record(#__VA_ARGS__, #POLICY);
#define ACCINTE_LOWER_PRECISION(...) \
  ACCINTE_AUTOCAST(lower_precision_fp, __VA_ARGS__)
#define ACCINTE_FP32(...) ACCINTE_AUTOCAST(fp32, __VA_ARGS__)
#define ACCINTE_FP32_SET_OPT_DTYPE(...) \
  ACCINTE_AUTOCAST(fp32_set_opt_dtype, __VA_ARGS__)
#define ACCINTE_PROMOTE(...) ACCINTE_AUTOCAST(promote, __VA_ARGS__)
// NB: `norm.Scalar` has no dtype argument to set; its wrapper calls another
// overload, `norm.ScalarOpt_dtype`, with float32 appended.
#define ACCINTE_FP32_APPEND_DTYPE(FUNCTION, NAME, SIGNATURE, REDISPATCH, \
                                  POLICY)                                \
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(                   \
      FUNCTION, NAME, SIGNATURE, REDISPATCH, POLICY)                     \
  record(NAME, #POLICY);
// LITERALINCLUDE END: CH05_POLICY_MACROS

// LITERALINCLUDE START: CH05_POLICIES
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // Matrix products and convolutions: the lower precision (float16 or
  // bfloat16, whichever the region asks for). They gain the most from it,
  // and the hardware that runs them accumulates in float32.
  AT_FORALL_LOWER_PRECISION_FP(ACCINTE_LOWER_PRECISION)
  // Operators whose range or accuracy float16 cannot hold (exp, log, pow,
  // norms, losses, softmax's reductions): float32.
  AT_FORALL_FP32(ACCINTE_FP32)
  // NB: CUDA reaches `cross_entropy_loss` through log_softmax and nll_loss,
  // both float32; registering it (as CPU does) casts once, at the top.
  ACCINTE_FP32(cross_entropy_loss)
  // Reductions with an optional `dtype`: autocast sets it to float32 (an
  // explicit dtype from the caller is kept).
  AT_FORALL_FP32_SET_OPT_DTYPE(ACCINTE_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(ACCINTE_FP32_APPEND_DTYPE)
  // Operators that take several tensors and need one dtype: the widest
  // floating-point input's.
  AT_FORALL_PROMOTE(ACCINTE_PROMOTE)
  ACCINTE_PROMOTE(cat)
  ACCINTE_PROMOTE(stack)
  ACCINTE_PROMOTE(index_copy)

  m.impl("binary_cross_entropy", TORCH_FN(binaryCrossEntropyUnderAutocast));
  record("binary_cross_entropy", "banned");
}
// LITERALINCLUDE END: CH05_POLICIES

} // namespace

const std::vector<AutocastPolicy>& autocastPolicies() {
  return mutablePolicies();
}

} // namespace accinte
