"""Chapter 05: autocast and the gradient scaler. The expected policy of each
operator is CUDA's, as PyTorch documents it (the "CUDA Ops that can
autocast" lists of the Automatic Mixed Precision page); the expected
values are the CPU's, computed from inputs cast as the policy says."""

import torch
import torch.nn.functional as F

from .._api import Section
from .._helpers import COPIES, DEVICE, OPERATORS, assert_same

SECTION = Section(
    chapter="05", title="Autocast", requires=(DEVICE, COPIES, OPERATORS),
    missing="autocast does nothing on the device: no AutocastPrivateUse1 kernels, "
            "or no get_amp_supported_dtype on the device module")

_A = torch.linspace(-1, 1, 16).reshape(4, 4)
_B = torch.linspace(0.5, 2, 16).reshape(4, 4)

# LITERALINCLUDE START: KIT_AUTOCAST_LISTS
#: Operators CUDA's autocast runs in the region's lower-precision dtype.
LOWER_PRECISION = {
    "mm": lambda a, b: torch.mm(a, b),
    "matmul": lambda a, b: a @ b,
    "addmm": lambda a, b: torch.addmm(b, a, b),
    "bmm": lambda a, b: torch.bmm(a[None], b[None]),
    "baddbmm": lambda a, b: torch.baddbmm(b[None], a[None], b[None]),
    "linear": lambda a, b: F.linear(a, b, b[0]),
    "conv2d": lambda a, b: F.conv2d(a[None, None], b[None, None, :3, :3]),
    "addmv": lambda a, b: torch.addmv(b[0], a, b[1]),
}
#: Operators CUDA's autocast runs in float32 whatever their inputs' dtype.
FLOAT32 = {
    "exp": lambda a: torch.exp(a),
    "log1p": lambda a: torch.log1p(a.abs()),
    "pow": lambda a: torch.pow(a, 2),
    "softmax": lambda a: torch.softmax(a, 1),
    "log_softmax": lambda a: torch.log_softmax(a, 1),
    "sum": lambda a: a.sum(),
    "cumsum": lambda a: a.cumsum(0),
    "layer_norm": lambda a: F.layer_norm(a, (4,)),
    "mse_loss": lambda a: F.mse_loss(a, a.flip(0)),
    "norm": lambda a: torch.norm(a),
}
#: Operators CUDA's autocast runs in the widest dtype of their inputs.
PROMOTE = {
    "addcmul": lambda low, high: torch.addcmul(high, low, low),
    "cat": lambda low, high: torch.cat([low, high]),
    "stack": lambda low, high: torch.stack([low, high]),
    "atan2": lambda low, high: torch.atan2(low, high),
}
# LITERALINCLUDE END: KIT_AUTOCAST_LISTS


def _dtypes(ctx):
    """The lower-precision dtypes the device's autocast accepts."""
    supported = ctx.module.get_amp_supported_dtype()
    dtypes = [d for d in (torch.float16, torch.bfloat16) if d in supported]
    assert dtypes, f"get_amp_supported_dtype() is {supported}"
    return dtypes


@SECTION.check
def autocast_is_available(ctx):
    """``torch.amp.is_autocast_available`` and the device module's
    ``get_amp_supported_dtype`` (which ``torch.autocast`` looks up by name:
    no device-generic API replaces it)."""
    assert torch.amp.is_autocast_available(ctx.device)
    _dtypes(ctx)


@SECTION.check
def lower_precision_operators(ctx):
    """Matrix products and convolutions compute in the region's dtype, with
    the CPU's values for inputs cast to it; float64 inputs are left alone."""
    for dtype in _dtypes(ctx):
        for name, function in LOWER_PRECISION.items():
            a, b = _A.to(ctx.dev(0)), _B.to(ctx.dev(0))
            with torch.autocast(ctx.device, dtype=dtype):
                result = function(a, b)
            expected = function(_A.to(dtype), _B.to(dtype))
            assert result.dtype == dtype, f"{name} under {dtype} autocast gave {result.dtype}"
            assert_same(result, expected, f"{name} under {dtype} autocast")
        with torch.autocast(ctx.device, dtype=dtype):
            result = torch.mm(_A.double().to(ctx.dev(0)), _B.double().to(ctx.dev(0)))
        assert result.dtype == torch.float64, f"mm of float64 under autocast gave {result.dtype}"


@SECTION.check
def float32_operators(ctx):
    """Operators that lose too much in lower precision run in float32, even
    for lower-precision inputs."""
    for dtype in _dtypes(ctx):
        low = _A.to(dtype)
        for name, function in FLOAT32.items():
            with torch.autocast(ctx.device, dtype=dtype):
                result = function(low.to(ctx.dev(0)))
            assert result.dtype == torch.float32, (
                f"{name} of {dtype} under autocast gave {result.dtype}")
            assert_same(result, function(low.float()), f"{name} under {dtype} autocast")


@SECTION.check
def promote_operators(ctx):
    """Operators of several inputs run in the widest of their dtypes."""
    for dtype in _dtypes(ctx):
        low, high = _A.to(dtype).to(ctx.dev(0)), _B.to(ctx.dev(0))
        for name, function in PROMOTE.items():
            with torch.autocast(ctx.device, dtype=dtype):
                result = function(low, high)
            assert result.dtype == torch.float32, (
                f"{name} of {dtype} and float32 under autocast gave {result.dtype}")


@SECTION.check
def other_operators_and_outside_the_region(ctx):
    """An operator of no list keeps its inputs' dtype, and nothing is cast
    outside the region or with ``enabled=False``."""
    a = _A.to(ctx.dev(0))
    with torch.autocast(ctx.device, dtype=torch.float16):
        assert torch.relu(a).dtype == torch.float32
        with torch.autocast(ctx.device, enabled=False):
            assert torch.mm(a, a).dtype == torch.float32
        assert torch.mm(a, a).dtype != torch.float32
    assert torch.mm(a, a).dtype == torch.float32
    assert not torch.is_autocast_enabled(ctx.device)


@SECTION.check
def unsafe_operator_is_refused(ctx):
    """``binary_cross_entropy`` raises under autocast, as on CUDA (the
    logits variant is the safe one)."""
    p = torch.full((4,), 0.3, device=ctx.dev(0))
    with torch.autocast(ctx.device, dtype=_dtypes(ctx)[0]):
        try:
            F.binary_cross_entropy(p, p)
        except RuntimeError as error:
            assert "binary_cross_entropy_with_logits" in str(error) or "unsafe" in str(error)
        else:
            raise AssertionError("binary_cross_entropy ran under autocast")


@SECTION.check
def grad_scaler(ctx):
    """A mixed-precision step: the forward under autocast, then
    ``torch.amp.GradScaler(NAME)`` scales the loss, skips the step whose
    gradients are not finite and halves its scale, then steps normally."""
    weight = torch.nn.Parameter(torch.ones(3, device=ctx.dev(0)))
    optimizer = torch.optim.SGD([weight], lr=0.5)
    scaler = torch.amp.GradScaler(ctx.device, init_scale=1024.0)
    with torch.autocast(ctx.device, dtype=_dtypes(ctx)[0]):
        product = weight[None] @ torch.tensor([[1.0], [2.0], [3.0]], device=ctx.dev(0))
    assert product.dtype != torch.float32, "the forward did not run in lower precision"
    loss = product.float().sum()
    assert scaler.scale(loss).item() == 6.0 * 1024.0
    weight.grad = torch.tensor([1.0, float("inf"), 0.0], device=ctx.dev(0))
    scaler.step(optimizer)
    scaler.update()
    assert_same(weight, torch.ones(3), "the weight after a step with an inf gradient",
                exact=True)
    assert scaler.get_scale() == 512.0, f"the scale is {scaler.get_scale()}, not 512"
    weight.grad = torch.tensor([512.0, 1024.0, 0.0], device=ctx.dev(0))
    scaler.step(optimizer)
    scaler.update()
    assert_same(weight, torch.tensor([0.5, 0.0, 1.0]), "the weight after a finite step",
                exact=True)
