"""What the dispatcher knows about accinte in stage 01.

Prints the PrivateUse1-related rows of the dispatch tables of an operator
chapter 01 implements (``aten::empty.memory_format``), of one that ATen
implements for every backend in terms of another (``aten::add.Tensor``
calls ``aten::add.out``), and of that other one, which has no accinte kernel;
then the error a user gets for ``x + 2``.
"""

import re

import torch
import torch_accinte  # noqa: F401


def accinte_rows(operator: str) -> str:
    table = torch._C._dispatch_dump_table(operator)
    rows = [row for row in table.splitlines()
            if row.startswith(("PrivateUse1", "AutogradPrivateUse1"))]
    # NB: registration sites are absolute paths and line numbers of the build
    # machine; keep only the file name so the output is the same everywhere.
    return "\n".join(re.sub(r"registered at \S*/([^/:\s]+):\d+", r"registered at \1", row)
                     for row in rows)


for operator in ("aten::empty.memory_format", "aten::add.Tensor", "aten::add.out"):
    print(f"{operator}\n{accinte_rows(operator)}\n")

try:
    torch.ones(3).to("accinte") + 2
except NotImplementedError as error:
    print(f"NotImplementedError: {str(error).splitlines()[0]}")
