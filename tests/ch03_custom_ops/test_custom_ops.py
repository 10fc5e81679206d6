"""Chapter 03: accinte::custom_abs (C++) and accinte::scaled_add (Python).

Results are compared on the CPU (``.cpu()``) against ATen's own CPU
operators. Every tensor handed to the operators has ``requires_grad=False``:
autograd is chapter 04's subject.
"""

import time

import pytest
import torch
import torch._dynamo.testing
import torch_accinte  # noqa: F401
from torch._subclasses.fake_tensor import FakeTensorMode
from torch_accinte import _C, ops

REAL_DTYPES = [
    torch.float32, torch.float64, torch.float16, torch.bfloat16,
    torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
]
FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
SHAPES = [(), (0,), (3, 0, 2), (7,), (4, 5), (2, 3, 4, 5)]
VIEWS = {
    "transpose": lambda t: t.t(),
    "step-slice": lambda t: t[::2, 1::3],
    "column": lambda t: t[:, 2],
    "expand": lambda t: t[0].expand(3, 8),
}


def sample(shape, dtype, seed=0):
    """Deterministic values of either sign (where the dtype has them)."""
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn(shape, generator=generator, dtype=torch.float64) * 50
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        return values.clamp(info.min + 1, info.max).to(dtype)
    return values.to(dtype)


# --------------------------------------------------------------------------
# accinte::custom_abs
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", REAL_DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_custom_abs_matches_cpu(dtype, shape, accinte):
    cpu = sample(shape, dtype)
    result = ops.custom_abs(cpu.to(accinte))
    assert result.device == accinte
    assert result.dtype == dtype and result.shape == cpu.shape
    assert result.is_contiguous()
    torch.testing.assert_close(result.cpu(), cpu.abs())
    # The CPU kernel of the same operator.
    on_cpu = ops.custom_abs(cpu)
    assert on_cpu.device.type == "cpu"
    torch.testing.assert_close(on_cpu, cpu.abs())


@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
def test_custom_abs_of_non_contiguous_views(view, accinte):
    cpu = sample((6, 8), torch.float32)
    result = ops.custom_abs(view(cpu.to(accinte)))
    assert result.is_contiguous()
    torch.testing.assert_close(result.cpu(), view(cpu).abs())
    torch.testing.assert_close(ops.custom_abs(view(cpu)), view(cpu).abs())


def test_custom_abs_on_the_second_device():
    cpu = sample((5, 3), torch.float64)
    result = ops.custom_abs(cpu.to("accinte:1"))
    assert result.device == torch.device("accinte:1")
    torch.testing.assert_close(result.cpu(), cpu.abs())


def test_custom_abs_is_the_dispatcher_operator(accinte):
    assert ops.custom_abs.__module__ == "torch_accinte.ops"
    schema = str(torch.ops.accinte.custom_abs.default._schema)
    assert schema == "accinte::custom_abs(Tensor self) -> Tensor"
    for key in ("PrivateUse1", "CPU", "Meta"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(
            "accinte::custom_abs", key), key
    cpu = sample((4,), torch.float32)
    torch.testing.assert_close(
        torch.ops.accinte.custom_abs(cpu.to(accinte)).cpu(), cpu.abs())


@pytest.mark.parametrize("device", ["accinte", "cpu"])
def test_custom_abs_computes_for_inputs_that_require_grad(device):
    """The kernels must not re-enter autograd through the ATen calls they
    make (no derivative yet: chapter 04 adds it)."""
    cpu = sample((3, 4), torch.float32)
    tensor = cpu.to(device).requires_grad_()
    torch.testing.assert_close(ops.custom_abs(tensor).detach().cpu(),
                               cpu.abs())


@pytest.mark.parametrize(
    "dtype, name", [(torch.bool, "Bool"), (torch.complex64, "ComplexFloat")],
    ids=["bool", "complex64"])
@pytest.mark.parametrize("device", ["accinte", "cpu", "meta"])
def test_custom_abs_rejects_bool_and_complex(dtype, name, device):
    tensor = torch.ones(3, dtype=dtype).to(device)
    with pytest.raises(RuntimeError, match="accinte::custom_abs: expected a "
                       f"floating-point or integer tensor, got {name}$"):
        ops.custom_abs(tensor)


# --------------------------------------------------------------------------
# accinte::scaled_add
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_scaled_add_matches_cpu(dtype, shape, accinte):
    x, y = sample(shape, dtype, seed=1), sample(shape, dtype, seed=2)
    expected = torch.add(x, y, alpha=-0.25)
    result = ops.scaled_add(x.to(accinte), y.to(accinte), alpha=-0.25)
    assert result.device == accinte
    assert result.dtype == dtype and result.shape == x.shape
    torch.testing.assert_close(result.cpu(), expected)
    torch.testing.assert_close(ops.scaled_add(x, y, alpha=-0.25), expected)


@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
def test_scaled_add_of_non_contiguous_views(view, accinte):
    x, y = sample((6, 8), torch.float32, 1), sample((8, 6), torch.float32, 2)
    x_view, y_view = view(x), view(y.t().contiguous())
    result = ops.scaled_add(view(x.to(accinte)),
                            view(y.t().contiguous().to(accinte)), 3.0)
    # The result is laid out like x (empty_like), on both devices.
    assert result.stride() == torch.empty_like(x_view).stride()
    torch.testing.assert_close(result.cpu(), x_view + 3.0 * y_view)
    torch.testing.assert_close(ops.scaled_add(x_view, y_view, 3.0),
                               x_view + 3.0 * y_view)


def test_scaled_add_default_alpha_and_second_device():
    x, y = sample((4, 4), torch.float32, 1), sample((4, 4), torch.float32, 2)
    result = ops.scaled_add(x.to("accinte:1"), y.to("accinte:1"))
    assert result.device == torch.device("accinte:1")
    torch.testing.assert_close(result.cpu(), x + y)


@pytest.mark.parametrize(
    "make_inputs, message",
    [
        (lambda: (torch.ones(3, dtype=torch.int32),) * 2,
         "expected x and y of one floating-point dtype, got torch.int32"),
        (lambda: (torch.ones(3), torch.ones(3, dtype=torch.float64)),
         "expected x and y of one floating-point dtype"),
        (lambda: (torch.ones(3), torch.ones(4)),
         r"expected x and y of one shape, got \(3,\) and \(4,\)"),
    ],
    ids=["integer", "mixed-dtypes", "shapes"],
)
@pytest.mark.parametrize("device", ["accinte", "cpu", "meta"])
def test_scaled_add_bad_inputs_are_clear_errors(make_inputs, message, device):
    x, y = (t.to(device) for t in make_inputs())
    with pytest.raises(RuntimeError, match=message):
        ops.scaled_add(x, y)


def test_scaled_add_across_devices_is_an_error():
    with pytest.raises(RuntimeError, match="expected x and y on one device"):
        ops.scaled_add(torch.ones(3, device="accinte"), torch.ones(3))
    with pytest.raises(RuntimeError, match="expected x and y on one device"):
        ops.scaled_add(torch.ones(3, device="accinte:0"),
                       torch.ones(3, device="accinte:1"))


# --------------------------------------------------------------------------
# Tracing: meta, FakeTensor, opcheck, torch.compile
# --------------------------------------------------------------------------


def test_meta_and_fake_tensors_give_shapes_without_data(accinte):
    meta = torch.empty(2, 5, dtype=torch.float16, device="meta").t()
    result = ops.custom_abs(meta)
    assert result.device.type == "meta" and result.shape == (5, 2)
    assert result.dtype == torch.float16 and result.is_contiguous()
    real = sample((2, 5), torch.float32).to(accinte).t()
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(real)
        absolute = ops.custom_abs(fake)
        summed = ops.scaled_add(fake, absolute, 2.0)
    for out in (absolute, summed):
        assert isinstance(out, torch._subclasses.FakeTensor)
        assert out.device == accinte and out.shape == (5, 2)
    assert absolute.stride() == (2, 1)
    assert summed.stride() == real.stride()


# NB: opcheck's test_aot_dispatch_* utilities run the operator inside
# torch.testing's freeze_rng_state(), which saves and restores the RNG state
# of the current accelerator through torch.accinte.get_rng_state(), on CPU
# inputs too. The device gets random number generators only in chapter 08;
# until then the AOT dispatch path is covered by the torch.compile tests
# below (backend="aot_eager", static and dynamic shapes).
OPCHECK_UTILS = ("test_schema", "test_autograd_registration",
                 "test_faketensor")
if hasattr(torch.accinte, "get_rng_state"):
    OPCHECK_UTILS += ("test_aot_dispatch_dynamic",)

OPCHECK_CASES = {
    "custom_abs": (torch.ops.accinte.custom_abs.default,
                   lambda: (sample((4, 6), torch.float32).t(),)),
    "custom_abs-int": (torch.ops.accinte.custom_abs.default,
                       lambda: (sample((5,), torch.int16),)),
    "scaled_add": (torch.ops.accinte.scaled_add.default,
                   lambda: (sample((3, 4), torch.float32, 1),
                            sample((3, 4), torch.float32, 2), 0.5)),
}


@pytest.mark.parametrize("device", ["accinte", "cpu"])
@pytest.mark.parametrize("case", OPCHECK_CASES.values(),
                         ids=OPCHECK_CASES.keys())
def test_opcheck(case, device):
    op, make_args = case
    args = tuple(a.to(device) if isinstance(a, torch.Tensor) else a
                 for a in make_args())
    # NB: no input requires grad (autograd is chapter 04), so opcheck's
    # test_autograd_registration has nothing to check and passes.
    results = torch.library.opcheck(op, args, test_utils=OPCHECK_UTILS)
    assert results == {name: "SUCCESS" for name in OPCHECK_UTILS}


def chained(x, y):
    return ops.scaled_add(ops.custom_abs(x), y, alpha=0.5) * 2


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_compile_aot_eager_fullgraph_equals_eager(dynamic, accinte):
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(chained, backend=counter, fullgraph=True,
                             dynamic=dynamic)
    for shape in [(4, 5), (6, 3)]:
        x = sample(shape, torch.float32, 1)
        y = sample(shape, torch.float32, 2)
        for device in (accinte, torch.device("cpu")):
            eager = chained(x.to(device), y.to(device))
            result = compiled(x.to(device), y.to(device))
            assert result.device == device
            torch.testing.assert_close(result.cpu(), eager.cpu())
    # Compiled through the counting backend; fullgraph=True already makes
    # any graph break an error.
    assert counter.frame_count >= 1
    torch._dynamo.reset()


# --------------------------------------------------------------------------
# Streams
# --------------------------------------------------------------------------

# NB: in these tests every device tensor stays alive until the gate is open:
# chapter 01's allocator waits for the device when it frees memory, which
# would wait for the closed gate.


def test_kernels_are_queued_on_the_current_stream(accinte):
    """With the current stream held by a gate (chapter 02's testing aid), the
    operators return at once, and their results follow the stream's order."""
    x_cpu = -1.0 - torch.rand(1 << 16)
    y_cpu = torch.rand(1 << 16)
    x, y = x_cpu.to(accinte), y_cpu.to(accinte)
    stream = torch.Stream(device=accinte)
    with stream:
        gate = _C._testing.StreamGate(accinte.index, 30.0)
        try:
            absolute = ops.custom_abs(x)
            summed = ops.scaled_add(absolute, y, 2.0)
            # Queued behind the gate: the stream is busy, the default stream
            # is not.
            assert not stream.query()
            assert torch.accinte.default_stream(accinte.index).query()
            # Overwrite x on the stream: in stream order, after custom_abs.
            x.copy_(y)
        finally:
            gate.open()
        stream.synchronize()
        torch.testing.assert_close(absolute.cpu(), x_cpu.abs())
        torch.testing.assert_close(summed.cpu(), x_cpu.abs() + 2.0 * y_cpu)


def test_kernels_do_not_wait_for_other_streams(accinte):
    """With the default stream held, work on another stream completes.

    A kernel wrongly queued on the default stream would not have run when
    its result is read, so this detects it deterministically."""
    x_cpu = -1.0 - torch.rand(1 << 16)
    x = x_cpu.to(accinte)
    stream = torch.Stream(device=accinte)
    start = time.monotonic()
    gate = _C._testing.StreamGate(accinte.index, 30.0)
    try:
        with stream:
            absolute = ops.custom_abs(x)
            summed = ops.scaled_add(x, absolute, 1.0)
            stream.synchronize()
            assert not torch.accinte.default_stream(accinte.index).query()
            absolute_cpu, summed_cpu = absolute.cpu(), summed.cpu()
    finally:
        gate.open()
    assert time.monotonic() - start < 20.0, "waited for the gate's timeout"
    torch.testing.assert_close(absolute_cpu, x_cpu.abs())
    torch.testing.assert_close(summed_cpu, torch.zeros_like(x_cpu))
