"""What the dispatcher knows about the accinte operators in stage 03.

Prints each operator's schema and the rows of its dispatch table that hold a
kernel, then what FakeTensor makes of custom_abs: the result's metadata on
the accinte device, computed by the Meta kernel without touching the device.
"""

import re

import torch
import torch_accinte  # noqa: F401
from torch._subclasses.fake_tensor import FakeTensorMode

KEYS = ("PrivateUse1", "CPU", "Meta", "AutogradPrivateUse1", "AutogradCPU")


def kernel_rows(operator: str) -> str:
    table = torch._C._dispatch_dump_table(operator)
    rows = [row for row in table.splitlines() if row.split(":")[0] in KEYS]
    # NB: registration sites are absolute paths of the build machine; keep
    # only the file name so the output is the same everywhere.
    return "\n".join(re.sub(r"registered at \S*/([^/:\s]+):\d+", r"registered at \1", row)
                     for row in rows)


for packet in (torch.ops.accinte.custom_abs, torch.ops.accinte.scaled_add):
    overload = packet.default
    print(f"{overload._schema}\n{kernel_rows(overload.name())}\n")

with FakeTensorMode() as mode:
    fake = mode.from_tensor(torch.empty(2, 3, device="accinte").t())
    result = torch.ops.accinte.custom_abs(fake)
print(f"custom_abs(FakeTensor {tuple(fake.shape)} strides {fake.stride()}) "
      f"-> {type(result).__name__} on {result.device}, shape "
      f"{tuple(result.shape)}, strides {result.stride()}")
