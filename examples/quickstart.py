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

# A small training loop written for any accelerator: nothing below names
# accinte. It needs the whole backend: autocast (chapter 05), pinned memory
# (chapter 07) and random numbers on the device (chapter 08).
needed = {"05_amp", "07_memory", "08_generator"}
if not needed <= set(torch_accinte.loaded_chapters):
    print(f"training loop skipped: this stage lacks {', '.join(sorted(needed - set(torch_accinte.loaded_chapters)))}")
    raise SystemExit(0)

device = torch.accelerator.current_accelerator()
torch.manual_seed(0)
features = torch.randn(512, 16)
targets = (features[:, :4].sum(dim=1, keepdim=True) > 0).float()
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(features, targets),
    batch_size=64, shuffle=True, pin_memory=True,
)
model = torch.nn.Sequential(
    torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Dropout(0.1),
    torch.nn.Linear(64, 1),
).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scaler = torch.amp.GradScaler(device.type)
loss_function = torch.nn.BCEWithLogitsLoss()
for epoch in range(3):
    total = 0.0
    for batch, target in loader:
        assert batch.is_pinned()
        batch = batch.to(device, non_blocking=True)
        target = target.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.float16):
            loss = loss_function(model(batch), target)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        total += loss.item()
    print(f"epoch {epoch}: mean loss {total / len(loader):.4f}")
model.eval()
with torch.no_grad():
    accuracy = ((model(features.to(device)) > 0).float().cpu() == targets).float().mean()
print(f"training accuracy on {device.type}: {accuracy.item():.2%}")
