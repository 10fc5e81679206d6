"""A quantized tensor on accinte, and what each step ran.

Quantizes the same values on the CPU and on the device, then shows the
quantizer, the integers, a view and the dequantized values; and a model
quantized dynamically with ``torch.ao`` on the device.
"""

import copy
import warnings

import torch
import torch_accinte  # noqa: F401

# PyTorch 2.13 deprecates the quantized creation functions.
warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
warnings.filterwarnings("ignore", message="torch.ao.quantization is deprecated")

x = torch.tensor([[0.05, 0.15, -0.25, 1.0], [2.5, -3.0, 20.0, -20.0]])
q_cpu = torch.quantize_per_tensor(x, 0.1, 3, torch.qint8)
q = torch.quantize_per_tensor(x.to("accinte"), 0.1, 3, torch.qint8)

print("device:", q.device, "| dtype:", q.dtype, "| qscheme:", q.qscheme())
print("scale, zero point:", q.q_scale(), q.q_zero_point())
print("integers:", q.int_repr().cpu().tolist())
print("same integers as the CPU:", torch.equal(q.int_repr().cpu(), q_cpu.int_repr()))
column = q[:, 1]
print("a column (a view):", column.stride(), column.int_repr().cpu().tolist())
print("dequantized:", [[round(v, 4) for v in row] for row in q.dequantize().cpu().tolist()])

channels = torch.quantize_per_channel(
    x.to("accinte"), torch.tensor([0.1, 0.5]), torch.tensor([0, 1]), 0, torch.quint8
)
scales = channels.q_per_channel_scales()
print("per channel scales:", [round(v, 4) for v in scales.tolist()], "on", scales.device)

model = torch.nn.Sequential(torch.nn.Linear(4, 3))
expected = torch.ao.quantization.quantize_dynamic(
    copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8
)(x)
dynamic = torch.ao.quantization.quantize_dynamic(
    copy.deepcopy(model).to("accinte"), {torch.nn.Linear}, dtype=torch.qint8
)
y = dynamic(x.to("accinte"))
print("dynamic linear:", y.device, "| same as the CPU:", torch.equal(y.cpu(), expected))
