"""Chapter 01: the backend's hooks (PrivateUse1HooksInterface), seen
through the APIs that consult them."""

import torch

from .._api import Section
from .._helpers import COPIES, DEVICE, PARITY, to_device

SECTION = Section(
    chapter="01", title="Hooks", requires=(DEVICE,),
    missing="the backend registers no PrivateUse1HooksInterface (is_available, "
            "lazy initialization, isPinnedPtr, hasPrimaryContext)")


@SECTION.check
def accelerator_is_the_device(ctx):
    """``torch.accelerator`` (which asks the hooks) names the device and can
    synchronize it."""
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator().type == ctx.device
    torch.accelerator.synchronize()
    assert torch.accelerator.current_stream().device.type == ctx.device


@SECTION.check(requires=(COPIES, PARITY))
def lazy_initialization(ctx):
    """Using the device initializes it (``is_initialized`` becomes true), as
    CUDA's lazy init does. NB: PyTorch has no device-generic way to ask,
    so the check reads the device module's ``is_initialized``: without it,
    it is blocked by the parity check."""
    to_device(ctx, torch.zeros(2))
    assert ctx.module.is_initialized()
    ctx.module.init()


@SECTION.check
def is_pinned_of_plain_host_memory(ctx):
    """``Tensor.is_pinned()`` asks the accelerator's hooks whether host
    memory is pinned: ordinary CPU memory is not, and asking is no error."""
    assert torch.arange(8.0).is_pinned() is False
    assert torch.empty(0).is_pinned() is False


@SECTION.check(requires=(COPIES,))
def device_tensor_reports_its_device(ctx):
    """A device tensor's ``device``, ``is_cpu`` and ``get_device`` agree with
    the device it was made on."""
    tensor = to_device(ctx, torch.ones(2))
    assert tensor.device == ctx.dev(0)
    assert not tensor.is_cpu
    assert tensor.get_device() == 0
    assert getattr(tensor, f"is_{ctx.device}") is True
