# stage: 02
"""Whether an operator has a kernel of its own for the PrivateUse1 key.

Each call is printed before its result, as in an interactive session.
"""

import torch
import torch_accinte  # noqa: F401

for operator in ("aten::neg", "aten::abs.out", "aten::convolution", "aten::abs", "aten::add.out"):
    call = f'torch._C._dispatch_has_kernel_for_dispatch_key("{operator}", "PrivateUse1")'
    print(f">>> {call}")
    print(eval(call))
