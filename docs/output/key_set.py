# stage: 02
"""Which dispatch keys accinte tensors carry, and which the thread excludes.

Each call is printed before its result, as in an interactive session.
"""

import torch
import torch_accinte  # noqa: F401


def show(expression: str) -> None:
    print(f">>> {expression}")
    print(eval(expression))


show('torch._C._dispatch_key_set(torch.ones(3, device="accinte"))')
show('torch._C._dispatch_key_set(torch.ones(3, device="accinte", requires_grad=True))')
show("torch._C._dispatch_key_set(torch.ones(3))")
show("torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.AutocastPrivateUse1)")
