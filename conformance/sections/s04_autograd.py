"""Chapter 04: autograd on the device. ATen operators bring their
derivatives with them; the backend's own operators (found as in section
03) need an autograd kernel, registered for the autograd key."""

import torch

from .._api import Section
from .._helpers import COPIES, DEVICE, OPERATORS, assert_same, backend_operators, overload, tensor_arguments

SECTION = Section(
    chapter="04", title="Autograd", requires=(DEVICE, COPIES, OPERATORS),
    missing="the backend's own operators have no derivative on the device "
            "(no AutogradPrivateUse1 kernel, torch.autograd.Function or register_autograd)")


def _inputs(shape=(3, 4)):
    # NB: no zero, where |x| and friends have no derivative.
    return torch.linspace(-2, 2, 12, dtype=torch.float64).reshape(shape) + 0.01


@SECTION.check
def backend_operators_are_differentiable(ctx):
    """The backend's operators with an autograd kernel pass ``gradcheck`` on
    the device and give the CPU's gradients. (``opcheck``'s
    ``test_autograd_registration`` would be the check that the kernel sits at
    the autograd key, but it knows only CPU, CUDA and XPU tensors: the kit
    finds the operators by their AutogradPrivateUse1 kernels instead.)"""
    names = backend_operators("AutogradPrivateUse1")
    assert names, (f"no operator outside PyTorch's namespaces has a derivative on "
                   f"{ctx.device}")
    tested = []
    for name in names:
        op = overload(name)
        args = tensor_arguments(op, _inputs)
        if args is None:
            continue
        device_args = [a.to(ctx.dev(0)).requires_grad_() for a in args]
        assert torch.autograd.gradcheck(op, device_args), f"{name}: gradcheck failed"
        if torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU"):
            cpu_args = [a.clone().requires_grad_() for a in args]
            op(*cpu_args).sum().backward()
            op(*device_args).sum().backward()
            for position, (d, c) in enumerate(zip(device_args, cpu_args)):
                assert_same(d.grad, c.grad, f"{name}: gradient of argument {position}")
        tested.append(name)
    assert tested, "no differentiable operator of the backend takes only tensor arguments"


@SECTION.check
def no_derivative_is_an_error_not_zero(ctx):
    """An operator of the backend whose inputs require grad must not leave
    them without a gradient after a backward that succeeded (PyTorch's
    autograd fallback only warns): either it is differentiable, or backward
    raises."""
    tested = []
    for name in backend_operators("PrivateUse1"):
        op = overload(name)
        args = tensor_arguments(op, _inputs)
        if args is None:
            continue
        tested.append(name)
        device_args = [a.to(ctx.dev(0)).requires_grad_() for a in args]
        result = op(*device_args)
        if not isinstance(result, torch.Tensor) or not result.requires_grad:
            raise AssertionError(f"{name}: its result does not require grad although "
                                 "its inputs do (autograd would drop the graph)")
        try:
            result.sum().backward()
        except RuntimeError:
            continue
        grads = [a.grad for a in device_args]
        assert all(g is not None for g in grads), f"{name}: backward gave no gradient"
    assert tested, "no operator of the backend's own namespaces to differentiate"


@SECTION.check(chapter="02", missing="ATen operators' derivatives do not run on the "
               "device: their backward formulas need ATen operators")
def training_matches_cpu(ctx):
    """Three SGD steps of a small network on the device follow the CPU's."""
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(),
                                    torch.nn.Linear(8, 3))
    on_device = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(),
                                    torch.nn.Linear(8, 3))
    on_device.load_state_dict(reference.state_dict())
    on_device.to(ctx.dev(0))
    inputs = torch.linspace(-1, 1, 30).reshape(5, 6)
    target = torch.tensor([0, 2, 1, 1, 0])
    for model, device in ((reference, torch.device("cpu")), (on_device, ctx.dev(0))):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for _ in range(3):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(inputs.to(device)),
                                                     target.to(device))
            loss.backward()
            optimizer.step()
    for (name, got), want in zip(on_device.named_parameters(), reference.parameters()):
        assert_same(got, want, f"parameter {name} after three steps")
