"""Chapter 13, compile: ``torch.compile`` with its default backend,
Inductor, on the device.

Inductor's compile time dominates this section (tens of seconds for a cold
cache on a loaded machine), so it compiles one thing once: a small
training step's forward and backward, a matrix product (an extern kernel)
followed by elementwise operations and a reduction (generated kernels).
The check compares with eager on the CPU: the values, the device of the
results and the gradients.
"""

import torch

from .._api import Section
from .._helpers import COPIES, DEVICE, OPERATORS

SECTION = Section(
    chapter="13", title="torch.compile", requires=(DEVICE, COPIES, OPERATORS),
    missing="torch.compile's default backend (Inductor) cannot generate or run code for the device")


def _step(x, weight, bias):
    hidden = torch.nn.functional.linear(x, weight, bias)
    return (torch.sin(hidden) * hidden.sum(dim=1, keepdim=True) / 4).square().mean()


@SECTION.check
def compiled_step_matches_eager_cpu(ctx):
    torch._dynamo.reset()
    x = torch.linspace(-2, 2, 40).reshape(5, 8)
    weight = torch.linspace(-1, 1, 48).reshape(6, 8).requires_grad_()
    bias = torch.linspace(0, 0.5, 6).requires_grad_()
    want = _step(x, weight, bias)
    want.backward()

    device_weight = weight.detach().to(ctx.dev()).requires_grad_()
    device_bias = bias.detach().to(ctx.dev()).requires_grad_()
    compiled = torch.compile(_step, fullgraph=True)
    loss = compiled(x.to(ctx.dev()), device_weight, device_bias)
    assert loss.device == ctx.dev(), f"the compiled result is on {loss.device}"
    loss.backward()
    torch.testing.assert_close(loss.detach().cpu(), want.detach())
    for name, got, reference in (("weight", device_weight, weight), ("bias", device_bias, bias)):
        assert got.grad is not None and got.grad.device == ctx.dev(), \
            f"the gradient of {name} is not on the device"
        torch.testing.assert_close(got.grad.cpu(), reference.grad, msg=f"the gradient of {name}")
    torch._dynamo.reset()
