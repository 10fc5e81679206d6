"""How the dispatcher routes accinte operators in stage 02.

Prints the PrivateUse1 row of the dispatch table of one operator per route
this chapter adds, then what a refused operator raises.
"""

import re

import torch
import torch_accinte  # noqa: F401

ROUTES = [
    ("aten::add.out", "no accinte kernel: the global CPU fallback"),
    ("aten::convolution", "per-operator boxed fallback"),
    ("aten::abs", "ATen's composite kernel, which calls abs.out"),
    ("aten::abs.out", "ATen's abs_out, whose stub has an accinte kernel"),
    ("aten::neg", "a plain accinte kernel"),
]


def accinte_row(operator: str) -> str:
    table = torch._C._dispatch_dump_table(operator)
    row = next(row for row in table.splitlines() if row.startswith("PrivateUse1:"))
    # NB: registration sites are absolute paths of the build machine, and
    # line numbers move whenever a source is edited; keep only the file name
    # so the output changes only when a route does.
    return re.sub(r"registered at \S*/([^/:\s]+):\d+", r"registered at \1", row)


for operator, route in ROUTES:
    print(f"{operator}  ({route})\n  {accinte_row(operator)}\n")

x = torch.ones(3, device="accinte")
try:
    x.is_set_to(x)
except NotImplementedError as error:
    print(f"NotImplementedError: {str(error).splitlines()[0]}")
