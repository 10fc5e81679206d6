"""The kernels of the accinte operators around autograd, in stage 04.

Prints each operator's kernels for the keys that matter here, then the graph
that autograd records for custom_l1_norm.
"""

import re

import torch
import torch_accinte  # noqa: F401

KEYS = ("AutogradPrivateUse1", "AutogradCPU", "PrivateUse1", "CPU", "Meta")


def kernel_rows(operator: str) -> str:
    table = torch._C._dispatch_dump_table(operator)
    rows = {row.split(":")[0]: row for row in table.splitlines()}
    # NB: registration sites are paths of the build machine; keep only the
    # file name so that the output is the same everywhere.
    return "\n".join(
        "  " + re.sub(r"registered at \S*/([^/:\s]+):\d+", r"registered at \1",
                      rows[key])
        for key in KEYS if key in rows)


for name in ("custom_abs", "custom_autograd_fn_returns_self",
             "custom_autograd_fn_aliasing", "custom_l1_norm"):
    overload = getattr(torch.ops.accinte, name).default
    print(f"{overload._schema}\n{kernel_rows(overload.name())}\n")


def show_graph(node, depth=0):
    if node is None:
        return
    print("  " * depth + node.name())
    for child, _ in node.next_functions:
        show_graph(child, depth + 1)


x = torch.ones(3, device="accinte", requires_grad=True)
print("autograd graph of custom_l1_norm(x) * 2:")
show_graph((torch.ops.accinte.custom_l1_norm(x) * 2).grad_fn, depth=1)
