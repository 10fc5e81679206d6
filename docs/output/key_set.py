# stage: 02
"""Which dispatch keys accinte tensors carry, and which the thread excludes.

Each call is printed before its result, as in an interactive session; a
call too long for one line is typed on two, with a ``...`` continuation.
"""

import torch
import torch_accinte  # noqa: F401


def show(expression: str) -> None:
    first, *rest = expression.splitlines()
    print(f">>> {first}")
    for line in rest:
        print(f"... {line}")
    print(eval(expression))


show('torch._C._dispatch_key_set(torch.ones(3, device="accinte"))')
show('torch._C._dispatch_key_set(\n    torch.ones(3, device="accinte", requires_grad=True))')
show("torch._C._dispatch_key_set(torch.ones(3))")
show("torch._C._dispatch_tls_is_dispatch_key_excluded(\n"
     "    torch._C.DispatchKey.AutocastPrivateUse1)")
