"""Chapter 02: abs (DispatchStub) and neg (plain kernel) run on the stream.

``torch_accinte._C._testing.StreamGate`` is a testing aid: a kernel that
holds the current stream of a device until ``open()``. Work queued behind it
cannot start, which makes "this operator is a kernel on the stream" visible
without any timing: the call returns while the stream is held, and its
result appears only once the gate opens. A fallback, which copies through
host memory, would have to wait for the stream instead.
"""

import pytest
import torch
import torch_accinte  # noqa: F401
from torch_accinte import _C

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
          torch.complex64]


def sample(shape, dtype, seed=0):
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn(shape, generator=generator, dtype=torch.float64) * 20
    if dtype == torch.complex64:
        return torch.complex(values, values.flip(-1) if values.dim() else values).to(dtype)
    if dtype == torch.uint8:
        return values.abs().to(dtype)
    return values.to(dtype)


# Long enough never to expire while a test runs; short enough that a broken
# test (one that waits for the held stream) fails instead of hanging.
GATE_TIMEOUT = 30.0

OPERATORS = {"abs": torch.abs, "neg": torch.neg}


@pytest.mark.parametrize("name", OPERATORS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5), (2, 3, 4)], ids=str)
def test_matches_cpu(name, dtype, shape):
    operator = OPERATORS[name]
    cpu = sample(shape, dtype)
    result = operator(cpu.to("accinte"))
    expected = operator(cpu)
    assert result.device == torch.device("accinte:0")
    assert result.dtype == expected.dtype  # abs of complex is real
    torch.testing.assert_close(result.cpu(), expected)


@pytest.mark.parametrize("name", OPERATORS)
@pytest.mark.parametrize(
    "make_view",
    [lambda t: t.t(), lambda t: t[::2, 1::3], lambda t: t[:, 2],
     lambda t: t.unsqueeze(0).expand(3, 6, 8)],
    ids=["transpose", "step-slice", "column", "expand"],
)
def test_non_contiguous_inputs(name, make_view):
    operator = OPERATORS[name]
    cpu = sample((6, 8), torch.float32)
    torch.testing.assert_close(operator(make_view(cpu.to("accinte"))).cpu(),
                               operator(make_view(cpu)))


@pytest.mark.parametrize("name", OPERATORS)
def test_in_place_and_out(name):
    cpu = sample((6, 8), torch.float32)
    # in place, on a strided view: the elements between stay untouched
    on_device = cpu.to("accinte")
    getattr(on_device[:, ::2], name + "_")()
    expected = cpu.clone()
    getattr(expected[:, ::2], name + "_")()
    torch.testing.assert_close(on_device.cpu(), expected)
    # out=, resized from empty
    out = torch.empty(0, device="accinte")
    assert OPERATORS[name](cpu.to("accinte"), out=out) is out
    torch.testing.assert_close(out.cpu(), OPERATORS[name](cpu))
    # out= into a non-contiguous view
    target = torch.zeros(8, 6, device="accinte")
    OPERATORS[name](cpu.to("accinte"), out=target.t())
    torch.testing.assert_close(target.t().cpu(), OPERATORS[name](cpu))


def test_partial_overlap_is_refused_on_the_host():
    x = torch.arange(8.0, device="accinte")
    for operator in OPERATORS.values():
        with pytest.raises(RuntimeError, match="unsupported operation"):
            operator(x[:6], out=x[2:])


@pytest.mark.parametrize("name", OPERATORS)
@pytest.mark.parametrize("device", [0, 1])
def test_kernel_runs_on_the_current_stream(name, device):
    operator = OPERATORS[name]
    values = torch.tensor([-1.0, 2.0, -3.0, 4.0])
    source = values.to(f"accinte:{device}")
    result = torch.full((4,), 99.0, device=f"accinte:{device}")
    torch.accinte.synchronize(device)
    stream = torch.Stream(device=f"accinte:{device}")
    with torch.accinte.stream(stream):
        gate = _C._testing.StreamGate(device, timeout_seconds=GATE_TIMEOUT)
        # Returns at once: the kernel is queued behind the gate. (A fallback
        # would copy through the host and wait for the stream here.)
        operator(source, out=result)
    try:
        assert not stream.query()
        # Read on the default stream, which the gate does not hold: the
        # kernel has not run yet.
        torch.testing.assert_close(result.cpu(), torch.full((4,), 99.0))
    finally:
        gate.open()
    stream.synchronize()
    assert stream.query()
    torch.testing.assert_close(result.cpu(), operator(values))


def test_functional_and_in_place_forms_are_queued_too():
    source = torch.tensor([-1.0, 2.0, -3.0]).to("accinte")
    torch.accinte.synchronize()
    stream = torch.Stream(device="accinte:0")
    with torch.accinte.stream(stream):
        gate = _C._testing.StreamGate(0, timeout_seconds=GATE_TIMEOUT)
        absolute = source.abs()
        negated = -source
        source.neg_()
        assert not stream.query()
        gate.open()
        torch.testing.assert_close(absolute.cpu(), torch.tensor([1.0, 2.0, 3.0]))
        torch.testing.assert_close(negated.cpu(), torch.tensor([1.0, -2.0, 3.0]))
        torch.testing.assert_close(source.cpu(), torch.tensor([1.0, -2.0, 3.0]))


def test_other_streams_are_not_held():
    source = torch.tensor([-5.0, 6.0]).to("accinte")
    torch.accinte.synchronize()
    held = torch.Stream(device="accinte:0")
    with torch.accinte.stream(held):
        gate = _C._testing.StreamGate(0, timeout_seconds=GATE_TIMEOUT)
    try:
        # On the default stream, abs runs while the other stream is held.
        # NB: the result is kept alive: freeing device memory waits for the
        # whole device, held stream included.
        absolute = source.abs()
        torch.testing.assert_close(absolute.cpu(), torch.tensor([5.0, 6.0]))
        assert not held.query()
    finally:
        gate.open()
    held.synchronize()


def test_fallback_waits_for_the_stream_where_native_kernels_do_not():
    # The contrast the chapter is about: a fallback operator on the held
    # stream copies its input to the host, which waits for the stream. The
    # gate is never opened: with a short timeout, cos() returns only after
    # the gate gave up, so the stream is already idle when it does.
    source = torch.tensor([1.0, 2.0]).to("accinte")
    torch.accinte.synchronize()
    stream = torch.Stream(device="accinte:0")
    with torch.accinte.stream(stream):
        gate = _C._testing.StreamGate(0, timeout_seconds=0.5)
        result = source.cos()  # the fallback: blocks until the gate expires
        assert stream.query()
    del gate
    torch.testing.assert_close(result.cpu(), torch.tensor([1.0, 2.0]).cos())


def test_copies_across_devices_are_ordered_by_streams_not_the_host():
    # Chapter 01's cross-device copy, observed with this chapter's gate: the
    # copy waits on the device for the source's stream and holds it in turn.
    source = torch.arange(64.0).to("accinte:0")
    target = torch.full((64,), -1.0).to("accinte:1")
    torch.accinte.synchronize(0)
    torch.accinte.synchronize(1)
    source_stream = torch.Stream(device="accinte:0")
    target_stream = torch.Stream(device="accinte:1")
    with torch.accinte.stream(source_stream), torch.accinte.stream(target_stream):
        gate = _C._testing.StreamGate(0, timeout_seconds=GATE_TIMEOUT)
        target.copy_(source)  # returns at once although the source is held
        source.neg_()  # queued on the source stream after the copy's read
    try:
        assert not target_stream.query()
        torch.testing.assert_close(target.cpu(), torch.full((64,), -1.0))
    finally:
        gate.open()
    target_stream.synchronize()
    source_stream.synchronize()
    torch.testing.assert_close(target.cpu(), torch.arange(64.0))
    torch.testing.assert_close(source.cpu(), -torch.arange(64.0))
