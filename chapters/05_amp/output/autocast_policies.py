"""The autocast policies registered for accinte, as a Markdown table.

Reads the table chapter 05's C++ recorded while it registered its
``AutocastPrivateUse1`` kernels, checks every entry against the dispatcher
(and the dispatcher against the table), and prints one row per policy.
"""

import torch
import torch_accinte  # noqa: F401
from torch_accinte import _C

EFFECT = {
    "lower_precision_fp": "casts floating-point accinte inputs to the region's "
                          "dtype (float16 or bfloat16)",
    "fp32": "casts lower-precision accinte inputs to float32",
    "fp32_set_opt_dtype": "runs in float32 by setting the optional `dtype` "
                          "argument, unless the caller set it",
    "fp32_append_dtype": "calls the overload that takes a `dtype`, with float32",
    "promote": "casts all floating-point accinte inputs to the widest one's dtype",
    "banned": "raises: unsafe in float16, use the logits variant",
}

table = _C._autocast_policies()
registered = {op for op in torch._C._dispatch_get_all_op_names()
              if torch._C._dispatch_has_kernel_for_dispatch_key(
                  op, "AutocastPrivateUse1")}
assert registered == {op for op, _ in table}, "table and dispatcher disagree"

by_policy = {}
for op, policy in table:
    by_policy.setdefault(policy, []).append(op.removeprefix("aten::"))

print("| Policy | Effect | Operators (`aten::`) |")
print("| --- | --- | --- |")
for policy, ops in by_policy.items():
    names = ", ".join(f"`{op}`" for op in ops)
    print(f"| `{policy}` ({len(ops)}) | {EFFECT[policy]} | {names} |")
print()
print(f"{len(table)} operators have an `AutocastPrivateUse1` kernel; every "
      "other operator falls through.")
