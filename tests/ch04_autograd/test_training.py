"""Chapter 04: autograd and optimizers through ordinary operators.

A small network is built twice from the same CPU parameters, once on the
CPU and once on accinte; gradients, losses and parameters must agree.
Everything stays on the device between steps: gradients and optimizer
state are accinte tensors.
"""

import pytest
import torch
import torch_accinte  # noqa: F401

STEPS = 15


def mlp():
    """A two-layer MLP with parameters drawn from a private generator (so the
    global seeds are left untouched)."""
    generator = torch.Generator().manual_seed(4)
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    return model


def batch():
    generator = torch.Generator().manual_seed(5)
    return (torch.randn(32, 6, generator=generator),
            torch.randn(32, 3, generator=generator))


def loss_fn(model, inputs, targets):
    # NB: written out instead of F.mse_loss, whose out= CPU kernel warns
    # about resizing a 0-dim output whenever it runs through a fallback.
    return ((model(inputs) - targets) ** 2).mean()


def test_gradients_of_a_small_network_equal_the_cpu(accinte):
    cpu_model = mlp()
    device_model = mlp().to(accinte)
    inputs, targets = batch()
    loss_fn(cpu_model, inputs, targets).backward()
    loss_fn(device_model, inputs.to(accinte), targets.to(accinte)).backward()
    for (name, expected), actual in zip(cpu_model.named_parameters(),
                                        device_model.parameters()):
        assert actual.grad.device == accinte, name
        torch.testing.assert_close(actual.grad.cpu(), expected.grad, msg=name)


def test_gradients_of_a_convolution_network_equal_the_cpu(accinte):
    generator = torch.Generator().manual_seed(6)

    def convnet():
        model = torch.nn.Sequential(
            torch.nn.Conv2d(2, 3, 3), torch.nn.ReLU(), torch.nn.Flatten(),
            torch.nn.Linear(3 * 4 * 4, 2))
        return model

    cpu_model = convnet()
    device_model = convnet()
    device_model.load_state_dict(cpu_model.state_dict())
    device_model.to(accinte)
    inputs = torch.randn(5, 2, 6, 6, generator=generator)
    cpu_model(inputs).square().mean().backward()
    device_model(inputs.to(accinte)).square().mean().backward()
    for expected, actual in zip(cpu_model.parameters(),
                                device_model.parameters()):
        assert actual.grad.device == accinte
        torch.testing.assert_close(actual.grad.cpu(), expected.grad)


OPTIMIZERS = {
    "sgd-momentum": lambda params, impl: torch.optim.SGD(
        params, lr=0.05, momentum=0.9, **impl),
    "adam": lambda params, impl: torch.optim.Adam(params, lr=0.02, **impl),
    "adamw": lambda params, impl: torch.optim.AdamW(
        params, lr=0.02, weight_decay=0.1, **impl),
}
# NB: by default the optimizers pick the _foreach_* operators for accinte
# (test below); fused=True picks the _fused_* ones. On accinte both run
# through the CPU fallback, the for-loop through ordinary operators.
IMPLEMENTATIONS = {
    "default": {},
    "for-loop": {"foreach": False},
    "fused": {"fused": True},
}


# LITERALINCLUDE START: CH04_PY_TRAINING_LOOP
def train(device, make_optimizer, impl):
    model = mlp().to(device)
    optimizer = make_optimizer(model.parameters(), impl)
    inputs, targets = (t.to(device) for t in batch())
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = loss_fn(model, inputs, targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses), model, optimizer
# LITERALINCLUDE END: CH04_PY_TRAINING_LOOP


@pytest.mark.parametrize("impl", IMPLEMENTATIONS.values(),
                         ids=IMPLEMENTATIONS.keys())
@pytest.mark.parametrize("make_optimizer", OPTIMIZERS.values(),
                         ids=OPTIMIZERS.keys())
def test_training_reproduces_the_cpu(make_optimizer, impl, accinte):
    cpu_losses, cpu_model, _ = train("cpu", make_optimizer, impl)
    losses, model, optimizer = train(accinte, make_optimizer, impl)
    assert losses.device == accinte
    # The loss must actually go down, or agreement would prove little.
    assert cpu_losses[-1] < 0.8 * cpu_losses[0]
    torch.testing.assert_close(losses.cpu(), cpu_losses, rtol=1e-4, atol=1e-6)
    for expected, actual in zip(cpu_model.parameters(), model.parameters()):
        torch.testing.assert_close(actual.detach().cpu(), expected.detach(),
                                   rtol=1e-4, atol=1e-6)
    # The optimizer's state lives on the device too.
    for state in optimizer.state.values():
        for name, value in state.items():
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                assert value.device == accinte, name
    assert optimizer.state, "the optimizer kept no state"


def test_optimizers_choose_foreach_for_accinte(accinte):
    """PyTorch counts the renamed PrivateUse1 device among those with
    foreach kernels, so foreach=None means the _foreach_* operators."""
    from torch.optim.optimizer import _default_to_fused_or_foreach

    params = [torch.zeros(2, device=accinte)]
    assert _default_to_fused_or_foreach(
        params, differentiable=False, use_fused=False) == (False, True)


def test_gradients_accumulate_on_the_device(accinte):
    model = mlp().to(accinte)
    inputs, targets = (t.to(accinte) for t in batch())
    loss_fn(model, inputs, targets).backward()
    first = [p.grad.clone() for p in model.parameters()]
    loss_fn(model, inputs, targets).backward()
    for once, parameter in zip(first, model.parameters()):
        assert parameter.grad.device == accinte
        torch.testing.assert_close(parameter.grad.cpu(), 2 * once.cpu())


def test_no_grad_and_detach_build_no_graph(accinte):
    model = mlp().to(accinte)
    inputs = batch()[0].to(accinte)
    with torch.no_grad():
        out = model(inputs)
    assert not out.requires_grad and out.grad_fn is None
    out = model(inputs).detach()
    assert not out.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        out.sum().backward()
