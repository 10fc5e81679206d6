"""A strided nested tensor on accinte: its dispatch keys, its components,
operators that run on the device, one that has no nested kernel anywhere,
and the jagged layout beside it."""

import warnings

import torch
import torch_accinte  # noqa: F401

# NB: PyTorch's prototype warning for the strided layout, noise here.
warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")

parts = [torch.arange(6.0).reshape(2, 3), torch.arange(3.0).reshape(1, 3)]
nt = torch.nested.nested_tensor(parts, device="accinte")
print("layout:", nt.layout, "device:", nt.device)
print("dispatch keys:", torch._C._dispatch_keys(nt))
print("component sizes:", nt._nested_tensor_size().tolist())

linear = torch.nn.Linear(3, 2).to("accinte")
with torch.no_grad():
    linear.weight.copy_(torch.tensor([[-1.0, 0.0, 1.0], [0.5, 0.5, -0.5]]))
    linear.bias.zero_()
    out = torch.relu(linear(nt) * 2)
for i, component in enumerate(out.unbind()):
    print(f"relu(linear(nt) * 2)[{i}] on {component.device}:",
          component.cpu().tolist())
print("padded with -1:")
print(torch.nested.to_padded_tensor(out, -1.0).cpu())

try:
    torch.cumsum(nt, 1)
except NotImplementedError as error:
    print("cumsum:", str(error).split(". ")[0])

jagged = torch.nested.nested_tensor(parts, layout=torch.jagged, device="accinte")
print("jagged:", type(jagged).__name__, "values on", jagged.values().device,
      "offsets", jagged.offsets().cpu().tolist())
