# stage: 02
"""Whether an operator has a kernel of its own for the PrivateUse1 key.

Each call is printed before its result, as in an interactive session; the
function gets a short name first, so that every call fits on a line.
"""

import torch
import torch_accinte  # noqa: F401

print(">>> has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key")
has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
for operator in ("aten::neg", "aten::abs.out", "aten::convolution", "aten::abs", "aten::add.out"):
    call = f'has_kernel("{operator}", "PrivateUse1")'
    print(f">>> {call}")
    print(eval(call))
