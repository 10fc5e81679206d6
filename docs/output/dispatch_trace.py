# stage: 02
"""TORCH_SHOW_DISPATCH_TRACE=1 on the installed PyTorch, and what works
instead on a release build: a TorchDispatchMode that logs every call.
"""

import os
import subprocess
import sys

import torch
import torch_accinte  # noqa: F401
from torch.utils._python_dispatch import TorchDispatchMode

print(">>> torch.__version__, torch.version.debug")
print((torch.__version__, torch.version.debug))

program = 'import torch, torch_accinte; torch.neg(torch.ones(3, device="accinte"))'
# NB: typed on two lines, as a shell takes it, so that no wrap cuts it.
print(f"\n$ TORCH_SHOW_DISPATCH_TRACE=1 python -c \\\n    '{program}'")
result = subprocess.run(
    [sys.executable, "-c", program],
    env=dict(os.environ, TORCH_SHOW_DISPATCH_TRACE="1"),
    capture_output=True, text=True, check=True,
)
printed = result.stdout.splitlines() + result.stderr.splitlines()
print("\n".join(printed) if printed else "(prints nothing)")


class LogCalls(TorchDispatchMode):
    """Prints each ATen call that reaches the backend keys, then runs it."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        devices = sorted({str(a.device) for a in args if isinstance(a, torch.Tensor)})
        print(f"{func}  on {', '.join(devices) or 'no tensor'}")
        return func(*args, **(kwargs or {}))


print('\n>>> x = torch.ones(3, device="accinte")')
x = torch.ones(3, device="accinte")
print(">>> with LogCalls(): y = (x + 2).abs().sum()")
with LogCalls():
    y = (x + 2).abs().sum()
