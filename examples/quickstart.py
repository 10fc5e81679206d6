"""Quickstart: the accinte device from Python.

Run it after ``make demo`` (or ``pip install --no-build-isolation .``), or
against a stage: ``PYTHONPATH=build/stage01/python python examples/quickstart.py``.
"""

import torch
import torch_accinte

print(f"torch {torch.__version__}, torch_accinte chapters: "
      f"{', '.join(torch_accinte.loaded_chapters)}")
print(f"accelerator: {torch.accelerator.current_accelerator()}, "
      f"{torch.accelerator.device_count()} devices")
for index in range(torch.accinte.device_count()):
    print(f"  accinte:{index}: {torch.accinte.get_device_properties(index)}")

host = torch.arange(12, dtype=torch.float32).reshape(3, 4)
on_device = host.to("accinte")
print(f"moved a {tuple(on_device.shape)} tensor to {on_device.device}")
back = on_device.t().to("accinte:1").cpu()
assert torch.equal(back, host.t())
print(f"round trip via accinte:0 and accinte:1 is exact: {back.tolist()}")
print(f"device memory allocated: {torch.accelerator.memory_allocated(0)} bytes")
