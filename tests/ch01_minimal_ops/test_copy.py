"""Chapter 01: tensors on accinte, and every copy direction, against CPU."""

import pytest
import torch
import torch_accinte  # noqa: F401
from conftest import only_before
from torch_accinte import _C

DTYPES = [
    torch.float32, torch.float64, torch.float16, torch.bfloat16,
    torch.int8, torch.int16, torch.int32, torch.int64,
    torch.uint8, torch.bool, torch.complex64,
]
SHAPES = [(), (0,), (3, 0, 2), (7,), (4, 5), (2, 3, 4, 5)]


def sample(shape, dtype, seed=0):
    """Deterministic values of any dtype, made on the CPU."""
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn(shape, generator=generator, dtype=torch.float64) * 50
    if dtype == torch.bool:
        return values > 0
    if dtype == torch.complex64:
        return torch.complex(values, -values).to(dtype)
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        return values.clamp(info.min, info.max).to(dtype)
    return values.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_round_trip(dtype, shape):
    cpu = sample(shape, dtype)
    on_device = cpu.to("accinte")
    assert on_device.device == torch.device("accinte:0")
    assert on_device.dtype == dtype and on_device.shape == cpu.shape
    torch.testing.assert_close(on_device.cpu(), cpu)


def test_large_tensor_round_trip():
    cpu = sample((4096, 1024), torch.float32)
    torch.testing.assert_close(cpu.to("accinte").cpu(), cpu)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_item(dtype):
    cpu = sample((), dtype, seed=3)
    assert cpu.to("accinte").item() == cpu.item()
    assert cpu.reshape(1, 1).to("accinte").item() == cpu.item()


@pytest.mark.parametrize(
    "make_view",
    [lambda t: t.t(), lambda t: t[::2, 1::3], lambda t: t[1], lambda t: t[:, 2],
     lambda t: t.as_strided((3, 3), (1, 6), 2), lambda t: t.unsqueeze(0).expand(3, 6, 8)],
    ids=["transpose", "step-slice", "select-row", "select-column", "as_strided", "expand"],
)
def test_strided_views_copy_both_ways(make_view):
    cpu = sample((6, 8), torch.float32)
    on_device = cpu.to("accinte")
    # A view taken on the device reads the right elements ...
    torch.testing.assert_close(make_view(on_device).cpu(), make_view(cpu))
    # ... a non-contiguous CPU view copies to the device ...
    torch.testing.assert_close(make_view(cpu).to("accinte").cpu(), make_view(cpu))


def test_writing_into_device_views_keeps_the_gaps():
    cpu = sample((6, 8), torch.float64)
    on_device = cpu.to("accinte")
    patch = torch.full((3, 3), 7.0, dtype=torch.float64)
    on_device[::2, 1::3].copy_(patch)
    cpu[::2, 1::3].copy_(patch)
    torch.testing.assert_close(on_device.cpu(), cpu)
    on_device.t()[2].copy_(torch.arange(6.0, dtype=torch.float64))
    cpu.t()[2].copy_(torch.arange(6.0, dtype=torch.float64))
    torch.testing.assert_close(on_device.cpu(), cpu)


def test_copy_converts_dtypes_and_broadcasts():
    target = torch.empty(3, 4, dtype=torch.float32, device="accinte")
    target.copy_(torch.arange(4, dtype=torch.int64))
    torch.testing.assert_close(target.cpu(), torch.arange(4.0).expand(3, 4))
    as_int = torch.empty(5, dtype=torch.int32, device="accinte")
    as_int.copy_(torch.tensor([1.9, -2.5, 3.0, 0.1, 7.7], dtype=torch.float64).to("accinte"))
    torch.testing.assert_close(as_int.cpu(), torch.tensor([1, -2, 3, 0, 7], dtype=torch.int32))
    back = torch.empty(5, dtype=torch.float16)
    back.copy_(as_int)
    torch.testing.assert_close(back, torch.tensor([1, -2, 3, 0, 7], dtype=torch.float16))


def test_device_to_device_same_device():
    cpu = sample((5, 6), torch.float32)
    on_device = cpu.to("accinte")
    clone = on_device.clone()
    assert clone.data_ptr() != on_device.data_ptr()
    torch.testing.assert_close(clone.cpu(), cpu)
    transposed = torch.empty(6, 5, device="accinte")
    transposed.copy_(on_device.t())
    torch.testing.assert_close(transposed.cpu(), cpu.t())
    strided_target = torch.empty(6, 5, device="accinte").t()
    strided_target.copy_(on_device)
    torch.testing.assert_close(strided_target.cpu(), cpu)


@pytest.mark.parametrize("contiguous", [True, False])
def test_across_devices(contiguous):
    cpu = sample((16, 9), torch.float64)
    source = cpu.to("accinte:0")
    source = source if contiguous else source[::3]
    expected = cpu if contiguous else cpu[::3]
    moved = source.to("accinte:1")
    assert moved.device == torch.device("accinte:1")
    torch.testing.assert_close(moved.cpu(), expected)
    back = torch.empty_like(moved, device="accinte:0")
    back.copy_(moved)
    torch.testing.assert_close(back.cpu(), expected)



@pytest.mark.parametrize("layout", ["dense", "strided", "float64"])
@pytest.mark.parametrize("ordered", ["source", "destination"])
def test_a_copy_across_devices_is_ordered_by_either_current_stream(layout, ordered):
    # Regression, found by chapter 07's stress test: a copy across devices
    # that goes through the host (a strided view, another dtype) read the
    # source on the source device's current stream without waiting for the
    # destination's. Code that ordered only the destination's stream after
    # the producer, which is enough for a dense copy, got the bytes from
    # before the producer ran.
    values = torch.arange(20.0) + 1
    x = values.to("accinte:0")
    # NaN until the producer runs: what an early read would copy.
    y = torch.full((20,), float("nan")).to("accinte:0")
    producer = torch.accinte.Stream(0)
    producer.wait_stream(torch.accinte.current_stream(0))
    with torch.accinte.stream(producer):
        # Holds the producer for a moment, then opens by itself; a copy
        # that does not wait for it reads the NaNs.
        gate = _C._testing.StreamGate(0, 0.3)
        y.copy_(x)
    ready = producer.record_event()
    source, destination = torch.accinte.Stream(0), torch.accinte.Stream(1)
    (source if ordered == "source" else destination).wait_event(ready)
    with torch.accinte.stream(source), torch.accinte.stream(destination):
        if layout == "dense":
            copied, expected = y.to("accinte:1"), values
        elif layout == "strided":
            copied, expected = y[::2].to("accinte:1"), values[::2]
        else:
            copied = y.to("accinte:1", torch.float64)
            expected = values.double()
        actual = copied.cpu()
    torch.testing.assert_close(actual, expected)
    del gate


GATE_TIMEOUT = 30.0


def pinned(cpu):
    """A copy of ``cpu`` in pinned host memory straight from the emulator
    (chapter 07 adds ``Tensor.pin_memory()``; these tests need it earlier)."""
    raw = _C._testing.pinned_bytes(cpu.numel() * cpu.element_size())
    result = raw.view(cpu.dtype).view(cpu.shape)
    result.copy_(cpu)
    return result


def test_pageable_non_blocking_copies_are_synchronous():
    # Pageable memory may be reused the moment copy_ returns, so a
    # non_blocking copy from or to it must have finished by then: with the
    # stream held by a gate that gives up after 0.5 s, the copies can only
    # return once the gate is gone and the bytes have moved.
    cpu = sample((1000,), torch.float32)
    on_device = torch.empty(1000, device="accinte")
    gate = _C._testing.StreamGate(0, timeout_seconds=0.5)
    on_device.copy_(cpu, non_blocking=True)
    result = torch.full_like(cpu, -1.0)
    result.copy_(on_device, non_blocking=True)
    torch.testing.assert_close(result, cpu)  # no synchronize needed
    gate.open()


def test_pinned_host_to_device_is_asynchronous_and_ordered():
    cpu = sample((4096,), torch.float32)
    source = pinned(cpu)
    target = torch.zeros(4096).to("accinte")
    stream = torch.accinte.current_stream()
    gate = _C._testing.StreamGate(0, timeout_seconds=GATE_TIMEOUT)
    try:
        target.copy_(source, non_blocking=True)  # returns at once ...
        assert not stream.query()                # ... with the copy queued
    finally:
        gate.open()
    stream.synchronize()
    torch.testing.assert_close(target.cpu(), cpu)


def test_pinned_device_to_host_is_asynchronous_and_ordered():
    cpu = sample((4096,), torch.float32)
    on_device = cpu.to("accinte")
    target = pinned(torch.full((4096,), -1.0))
    stream = torch.accinte.current_stream()
    gate = _C._testing.StreamGate(0, timeout_seconds=GATE_TIMEOUT)
    try:
        target.copy_(on_device, non_blocking=True)
        assert not stream.query()
        # Nothing has landed while the stream is held.
        torch.testing.assert_close(target, torch.full((4096,), -1.0))
    finally:
        gate.open()
    stream.synchronize()
    torch.testing.assert_close(target, cpu)


@pytest.mark.parametrize(
    "source_shape,target_shape",
    [((3,), (0,)), ((4,), (2, 3)), ((2, 3), (3,)), ((2, 1, 3), (1, 3))],
    ids=["into-empty", "not-broadcastable", "more-dims", "broadcast-grows-target"],
)
@pytest.mark.parametrize("direction", ["h2d", "d2h", "d2d"])
def test_copy_shape_mismatch_is_the_cpu_error_before_anything_runs(
        direction, source_shape, target_shape):
    source = torch.ones(source_shape)
    target = torch.zeros(target_shape)
    with pytest.raises(RuntimeError) as cpu_error:
        target.clone().copy_(source)
    if direction != "d2h":
        target = target.to("accinte")
    if direction != "h2d":
        source = source.to("accinte")
    with pytest.raises(RuntimeError) as accinte_error:
        target.copy_(source)
    assert str(accinte_error.value) == str(cpu_error.value)
    # Checked on the host: the stream is not poisoned, and nothing was written.
    torch.accinte.synchronize()
    torch.testing.assert_close(target.cpu(), torch.zeros(target_shape))


def test_copy_refuses_partial_overlap_as_the_cpu_does():
    cpu = torch.arange(8.0)
    with pytest.raises(RuntimeError) as cpu_error:
        cpu[1:].copy_(cpu[:-1])
    on_device = torch.arange(8.0).to("accinte")
    with pytest.raises(RuntimeError) as accinte_error:
        on_device[1:].copy_(on_device[:-1])
    assert str(accinte_error.value) == str(cpu_error.value)
    torch.testing.assert_close(on_device.cpu(), torch.arange(8.0))


COMPLEX = torch.complex(torch.linspace(-3, 3, 12), torch.linspace(2, -5, 12)).reshape(3, 4)

MATH_BIT_VIEWS = [
    ("conj", lambda t: t.conj()),
    ("neg", lambda t: t._neg_view()),
    ("conj-neg", lambda t: t.conj()._neg_view()),
    ("conj-transposed", lambda t: t.conj().t()),
    ("conj-strided", lambda t: t[:, ::2].conj()),
]


@pytest.mark.parametrize("view", [v[1] for v in MATH_BIT_VIEWS], ids=[v[0] for v in MATH_BIT_VIEWS])
def test_lazy_conjugate_and_negative_views_copy_resolved(view):
    # Until fixed, these recursed without end (the conjugate fallback on
    # _copy_from clones, the clone copies, the copy calls _copy_from) and
    # killed the process.
    on_device = COMPLEX.to("accinte")
    expected = view(COMPLEX).resolve_conj().resolve_neg()
    torch.testing.assert_close(view(on_device).cpu(), expected)
    torch.testing.assert_close(view(on_device).resolve_conj().resolve_neg().cpu(), expected)
    target = torch.zeros_like(expected).to("accinte")
    target.copy_(view(on_device))  # device to device
    torch.testing.assert_close(target.cpu(), expected)
    target.copy_(view(COMPLEX))    # host to device
    torch.testing.assert_close(target.cpu(), expected)
    host = torch.zeros_like(expected)
    host.copy_(view(on_device))    # device to host
    torch.testing.assert_close(host, expected)
    on_one = torch.zeros_like(expected).to("accinte:1")
    on_one.copy_(view(on_device))  # across devices
    torch.testing.assert_close(on_one.cpu(), expected)


def test_copy_into_a_conjugated_view_writes_conjugated_memory():
    on_device = torch.zeros(3, 4, dtype=torch.complex64).to("accinte")
    cpu = torch.zeros(3, 4, dtype=torch.complex64)
    on_device.conj().copy_(COMPLEX.to("accinte"))
    cpu.conj().copy_(COMPLEX)
    torch.testing.assert_close(on_device.cpu(), cpu)
    on_device._neg_view().copy_(COMPLEX)
    cpu._neg_view().copy_(COMPLEX)
    torch.testing.assert_close(on_device.cpu(), cpu)


def test_conjugated_item():
    value = torch.tensor(1.5 - 2j)
    assert value.to("accinte").conj().item() == value.conj().item()


@only_before("07_memory")
def test_non_blocking_to_cpu_needs_pinned_memory():
    # NB: PyTorch allocates the output of a non-blocking device-to-host
    # `.to()` in pinned memory, which chapter 07 adds.
    with pytest.raises(RuntimeError, match="07_memory"):
        torch.ones(4).to("accinte").to("cpu", non_blocking=True)


def test_resize_grows_keeps_prefix_and_shrinks():
    on_device = torch.arange(6.0).to("accinte")
    on_device.resize_(4, 5)
    assert on_device.shape == (4, 5)
    torch.testing.assert_close(on_device.flatten()[:6].cpu(), torch.arange(6.0))
    on_device.resize_(2)
    torch.testing.assert_close(on_device.cpu(), torch.arange(2.0))
    nhwc = torch.empty(2, 3, 4, 5, device="accinte").resize_(
        2, 3, 4, 5, memory_format=torch.channels_last)
    assert nhwc.is_contiguous(memory_format=torch.channels_last)
    strided = torch.arange(12.0).reshape(3, 4).to("accinte")[:, ::2]
    strided.resize_(3, 2)  # its own shape: a strided view stays that view
    assert strided.stride() == (4, 2)
    torch.testing.assert_close(strided.cpu(), torch.arange(12.0).reshape(3, 4)[:, ::2])
    storage = torch.arange(4.0).to("accinte").untyped_storage()
    storage.resize_(64)
    assert storage.nbytes() == 64


def test_set_with_all_three_sources():
    source = torch.arange(12.0).to("accinte")
    target = torch.empty(0, device="accinte")
    target.set_(source)  # set_.source_Tensor
    assert target.data_ptr() == source.data_ptr()
    torch.testing.assert_close(target.cpu(), torch.arange(12.0))

    from_storage = torch.empty(0, device="accinte")
    from_storage.set_(source.untyped_storage())  # set_.source_Storage
    torch.testing.assert_close(from_storage.cpu(), torch.arange(12.0))

    window = torch.empty(0, device="accinte")
    window.set_(source.untyped_storage(), 2, (3, 2), (1, 3))  # ..._storage_offset
    torch.testing.assert_close(window.cpu(),
                               torch.arange(12.0).as_strided((3, 2), (1, 3), 2))

    with pytest.raises(RuntimeError, match="devices must match"):
        torch.empty(0, device="accinte:1").set_(source.untyped_storage())
