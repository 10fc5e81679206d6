"""Chapter 02: every ATen operator runs on the device (a CPU fallback, or
kernels of its own), with the CPU's results."""

import torch

from .._api import Section
from .._helpers import COPIES, DEVICE, OPERATORS, assert_same, to_device

SECTION = Section(
    chapter="02", title="CPU fallback", requires=(DEVICE, COPIES, OPERATORS),
    missing="ATen operators without a device kernel do not run: no fallback "
            "(register_fallback for PrivateUse1) and no kernel of their own")


def _compare(ctx, name, function, *inputs, exact=False):
    """``function`` of device copies of ``inputs`` against the CPU's."""
    expected = function(*inputs)
    actual = function(*(to_device(ctx, t) if isinstance(t, torch.Tensor) else t
                        for t in inputs))
    if isinstance(expected, torch.Tensor):
        expected, actual = (expected,), (actual,)
    for position, (got, want) in enumerate(zip(actual, expected)):
        assert got.device == ctx.dev(0), f"{name}: output {position} is on {got.device}"
        assert_same(got, want, f"{name} (output {position})", exact=exact)


@SECTION.check
def pointwise_and_reductions(ctx):
    """Pointwise operators, reductions and a matrix product give the CPU's
    results, on the device."""
    a = torch.linspace(-2, 2, 24).reshape(4, 6)
    b = torch.linspace(0.5, 3, 24).reshape(4, 6)
    _compare(ctx, "sin", torch.sin, a)
    _compare(ctx, "add", lambda x, y: x + 2 * y, a, b)
    _compare(ctx, "where", lambda x, y: torch.where(x > 0, x, y), a, b)
    _compare(ctx, "sum", lambda x: x.sum(dim=1), a)
    _compare(ctx, "cumsum", lambda x: x.cumsum(0), a)
    _compare(ctx, "mm", lambda x, y: x @ y.t(), a, b)
    _compare(ctx, "max", lambda x: torch.max(x, dim=1), a, exact=True)
    _compare(ctx, "sort", lambda x: torch.sort(x, dim=1, descending=True), a, exact=True)


@SECTION.check
def integer_and_bool_operators(ctx):
    """Integer division, bit operations and comparisons, exactly."""
    a = torch.arange(-10, 10, dtype=torch.int64)
    _compare(ctx, "floor_divide", lambda x: torch.div(x, 3, rounding_mode="floor"), a,
             exact=True)
    _compare(ctx, "bitwise_and", lambda x: x & 6, a, exact=True)
    _compare(ctx, "eq", lambda x: (x % 4) == 1, a, exact=True)
    _compare(ctx, "nonzero", lambda x: torch.nonzero(x > 3), a, exact=True)


@SECTION.check
def in_place_and_out_arguments(ctx):
    """An in-place operator and an ``out=`` argument write into the device
    tensor they were given (its storage), not into a copy."""
    values = torch.linspace(-1, 1, 10)
    x = to_device(ctx, values)
    pointer = x.data_ptr()
    x.mul_(3).add_(1)
    assert x.data_ptr() == pointer
    assert_same(x, values * 3 + 1, "mul_ then add_")
    out = to_device(ctx, torch.empty(10))
    pointer = out.data_ptr()
    torch.exp(x, out=out)
    assert out.data_ptr() == pointer, "exp(out=) replaced its out tensor"
    assert_same(out, torch.exp(values * 3 + 1), "exp(out=)")
    view = x[2:6]
    view.zero_()
    expected = values * 3 + 1
    expected[2:6] = 0
    assert_same(x, expected, "zero_ of a view")


@SECTION.check
def indexing(ctx):
    """Advanced indexing reads and writes as on the CPU."""
    values = torch.arange(20, dtype=torch.float32).reshape(4, 5)
    index = torch.tensor([3, 0, 3])
    _compare(ctx, "index", lambda x, i: x[i], values, index, exact=True)

    def put(x, i):
        x = x.clone()
        x[i, 1] = -1.0
        return x

    _compare(ctx, "index_put_", put, values, index, exact=True)
    _compare(ctx, "masked_select", lambda x: x[x > 7], values, exact=True)


@SECTION.check
def factories_on_the_device(ctx):
    """Factory functions fill device tensors: zeros, ones, full, arange."""
    device = ctx.dev(0)
    assert_same(torch.zeros(3, device=device), torch.zeros(3), "zeros", exact=True)
    assert_same(torch.full((2, 2), 7, device=device), torch.full((2, 2), 7), "full",
                exact=True)
    assert_same(torch.arange(5, device=device), torch.arange(5), "arange", exact=True)
    assert_same(torch.ones(2, 3, device=device, dtype=torch.float16),
                torch.ones(2, 3, dtype=torch.float16), "ones", exact=True)


@SECTION.check
def errors_are_the_cpu_errors(ctx):
    """An operator given a bad argument raises the CPU's error (its type and
    message), not another one: here an index of a floating-point dtype, which
    the operator itself rejects on the host. (Shape errors of structured
    operators are found before any kernel is chosen, so they say nothing
    about the fallback; an error only a kernel can find, an index out of
    range, may surface at the next synchronize instead, as on CUDA.)"""
    values, index = torch.ones(2, 3), torch.tensor([1.0])
    for name, function in (("index_select", lambda x, i: torch.index_select(x, 0, i)),
                           ("take", lambda x, i: torch.take(x, i))):
        try:
            function(values, index)
        except RuntimeError as error:
            expected = (type(error), str(error).splitlines()[0])
        else:
            raise AssertionError(f"{name}: the CPU accepted a float index")
        try:
            function(to_device(ctx, values), to_device(ctx, index))
        except RuntimeError as error:
            got = (type(error), str(error).splitlines()[0])
            assert got == expected, f"{name}: the device raises {got}, the CPU {expected}"
        else:
            raise AssertionError(f"{name}: the device accepted a float index")


@SECTION.check
def mixing_devices_is_an_error(ctx):
    """An operator given a device tensor and a CPU tensor (not a scalar)
    raises, as CUDA's do, instead of computing somewhere."""
    device_a = to_device(ctx, torch.ones(3))
    try:
        device_a + torch.ones(3)
    except RuntimeError as error:
        assert "device" in str(error), f"unclear error: {error}"
    else:
        raise AssertionError("device tensor + CPU tensor did not raise")
    assert_same(device_a + torch.tensor(2.0), torch.full((3,), 3.0),
                "device tensor + CPU scalar tensor", exact=True)
