#pragma once

/**
 * @file
 * Autocast on accinte: the cast policy of each operator under
 * `torch.autocast("accinte")`.
 *
 * The policies are kernels for the `AutocastPrivateUse1` dispatch key,
 * registered when the backend library loads. This header only exposes the
 * table of what was registered, so that the bindings (and through them the
 * guide) can show it.
 */

#include <accinte/export.h>

#include <string>
#include <vector>

namespace accinte {

/** One operator's autocast kernel: what it casts its inputs to. */
struct AutocastPolicy {
  /** The operator with its overload, e.g. `aten::pow.Tensor_Scalar`. */
  std::string op;
  /**
   * The cast policy, named as ATen's `at::autocast::CastPolicy`
   * (`lower_precision_fp`, `fp32`, `fp32_set_opt_dtype`,
   * `fp32_append_dtype`, `promote`), or `banned` for an operator that
   * raises under autocast.
   */
  std::string policy;
};

/**
 * Every `AutocastPrivateUse1` kernel this chapter registered, in
 * registration order. Operators without an entry fall through: autocast
 * leaves their inputs alone.
 */
ACCINTE_EXPORT const std::vector<AutocastPolicy>& autocastPolicies();

} // namespace accinte
