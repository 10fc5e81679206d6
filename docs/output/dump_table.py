# stage: 02
"""What the dispatcher holds for one operator: its computed table and its
registrations, cut to the rows of the keys accinte tensors carry.

Each call is printed before its result, as in an interactive session.
"""

import re

import torch
import torch_accinte  # noqa: F401

#: The keys of an accinte tensor, and the alias keys its kernels come from.
KEYS = ("name", "schema", "PrivateUse1", "AutogradPrivateUse1", "ADInplaceOrView",
        "AutocastPrivateUse1", "Autograd[alias]", "CompositeExplicitAutograd[alias]",
        "CompositeExplicitAutogradNonFunctional[alias]", "CompositeImplicitAutograd[alias]")


def short(row: str) -> str:
    # NB: registration sites are paths of the machine that built PyTorch or
    # this stage, and their line numbers move with every edit; keep only the
    # file name so this output changes only when a registration does.
    row = re.sub(r"registered at \S*/([^/:\s]+):\d+", r"registered at \1", row)
    return re.sub(r" :: \(.*?\) -> .*? \[", " [", row)


def show(call: str) -> None:
    print(f">>> print({call})")
    rows = eval(call).splitlines()
    kept = [short(row) for row in rows if row.split(":")[0] in KEYS]
    print("\n".join(kept))
    print(f"... ({len(rows) - len(kept)} rows of other keys left out)\n")


show('torch._C._dispatch_dump_table("aten::neg")')
show('torch._C._dispatch_dump("aten::neg")')
show('torch._C._dispatch_dump_table("aten::add.out")')
show('torch._C._dispatch_dump("aten::add.out")')
