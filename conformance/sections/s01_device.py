"""Chapter 01: the device module and the device guard."""

import itertools
import warnings

import torch

from .._api import Section
from .._helpers import COPIES, DEVICE, assert_same, need_devices, to_device

# NB: through torch.accelerator, torch.Stream and torch.Event, which reach
# the backend's DeviceGuardImpl without its module's helpers; the parity
# section checks those helpers.
SECTION = Section(
    chapter="01", title="Device module and guard", requires=(DEVICE,),
    missing="the device is not registered as PrivateUse1 with a device module "
            "(rename_privateuse1_backend, _register_device_module) and a DeviceGuardImpl")


@SECTION.check
def privateuse1_is_renamed(ctx):
    """PrivateUse1 carries the device's name; ``torch.device`` parses it."""
    assert torch._C._get_privateuse1_backend_name() == ctx.device, (
        f"PrivateUse1 is named {torch._C._get_privateuse1_backend_name()!r}")
    device = torch.device(f"{ctx.device}:1")
    assert (device.type, device.index) == (ctx.device, 1)
    assert torch.accelerator.current_accelerator() == torch.device(ctx.device)


@SECTION.check
def device_count_and_availability(ctx):
    """``torch.accelerator`` counts the devices and agrees with the device
    module's ``device_count`` and ``is_available`` (which PyTorch itself
    looks up by name)."""
    count = torch.accelerator.device_count()
    assert isinstance(count, int) and count >= 1, f"device_count() is {count!r}"
    assert torch.accelerator.is_available()
    module = torch.get_device_module(ctx.device)
    assert module.device_count() == count
    assert module.is_available() is True


@SECTION.check(requires=(COPIES,))
def set_device_moves_new_tensors(ctx):
    """``torch.accelerator.set_device_index(1)`` makes new tensors (no
    index) land on device 1, as on CUDA; the current index follows."""
    need_devices(ctx, 2)
    torch.accelerator.set_device_index(1)
    try:
        assert torch.accelerator.current_device_index() == 1
        assert torch.empty(3, device=ctx.device).device == ctx.dev(1)
    finally:
        torch.accelerator.set_device_index(0)
    assert torch.accelerator.current_device_index() == 0
    assert torch.empty(3, device=ctx.device).device == ctx.dev(0)


@SECTION.check(requires=(COPIES,))
def device_context_managers_restore(ctx):
    """``with torch.accelerator.device_index(1)`` switches the current
    device and puts it back; so does a ``torch.device`` used as a context
    manager, and the device of a tensor (``Tensor.get_device``)."""
    need_devices(ctx, 2)
    with torch.accelerator.device_index(1):
        assert torch.accelerator.current_device_index() == 1
        assert torch.empty(2, device=ctx.device).device == ctx.dev(1)
    assert torch.accelerator.current_device_index() == 0
    with torch.device(ctx.dev(1)):
        assert torch.empty(2).device == ctx.dev(1)
    assert torch.empty(2).device == torch.device("cpu")
    tensor = torch.empty(2, device=ctx.dev(1))
    with torch.accelerator.device_index(tensor.get_device()):
        assert torch.accelerator.current_device_index() == 1
    assert torch.accelerator.current_device_index() == 0


@SECTION.check(requires=(COPIES,))
def tensors_on_the_second_device(ctx):
    """A tensor made on device 1 holds its values there."""
    need_devices(ctx, 2)
    source = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    on_1 = to_device(ctx, source, 1)
    assert on_1.device == ctx.dev(1)
    assert_same(on_1, source, "a round trip through device 1", exact=True)


@SECTION.check
def bad_device_index_is_an_error(ctx):
    """An index past ``device_count()`` raises, as CUDA's does, instead of
    using some device."""
    count = torch.accelerator.device_count()
    for attempt in (lambda: torch.empty(1, device=f"{ctx.device}:{count}"),
                    lambda: torch.accelerator.set_device_index(count)):
        try:
            attempt()
        except (RuntimeError, ValueError, AssertionError):
            continue
        raise AssertionError(f"device index {count} (of {count}) was accepted")


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """The bytes of a contiguous CPU tensor, for an exact comparison that
    holds for every dtype, NaN included."""
    return tensor.contiguous().view(torch.uint8)


@SECTION.check(requires=(COPIES,),
               missing="the DeviceGuardImpl does not report the device's dtypes "
                       "(getDeviceCapability), or reports one that does not work")
def device_capability_lists_working_dtypes(ctx):
    """``torch.accelerator.get_device_capability`` names the dtypes of each
    device, and each works: CPU -> device -> CPU gives the same bytes, and a
    conversion on the device to any other reported dtype gives the CPU's; a
    quantized dtype, made by quantizing, keeps its integers both ways and
    quantizes on the device as on the CPU. A bad index raises."""
    count = torch.accelerator.device_count()
    reported = None
    for index in range(count):
        capability = torch.accelerator.get_device_capability(ctx.dev(index))
        assert isinstance(capability, dict) and "supported_dtypes" in capability, (
            f"get_device_capability({index}) gives {capability!r}")
        dtypes = set(capability["supported_dtypes"])
        assert dtypes and all(isinstance(d, torch.dtype) for d in dtypes), (
            f"device {index} reports {capability['supported_dtypes']!r}")
        assert reported is None or dtypes == reported, "the devices report other dtypes"
        reported = dtypes
    assert torch.accelerator.get_device_capability()["supported_dtypes"] == reported
    assert torch.float32 in reported, "float32 is not reported"
    dtypes = sorted(reported - _QUANTIZED, key=str)
    with warnings.catch_warnings():
        # NB: PyTorch warns on every complex32 tensor it makes, and on each
        # complex to real conversion, which the capability promises too.
        warnings.filterwarnings("ignore", "ComplexHalf support is experimental")
        warnings.filterwarnings("ignore", "Casting complex values to real")
        _round_trips_and_conversions(ctx, dtypes)
        # NB: 2.13 warns that quantized tensor creation is deprecated.
        warnings.filterwarnings("ignore", "torch.quantize_per_tensor")
        _quantized_round_trips(ctx, sorted(reported & _QUANTIZED, key=str))
    try:
        torch.accelerator.get_device_capability(count)
    except (RuntimeError, ValueError, AssertionError):
        return
    raise AssertionError(f"get_device_capability({count}) (of {count}) did not raise")


#: The quantized dtypes: a tensor of one is made by quantizing, with a
#: scale and a zero point, never by a conversion (chapter 16's layouts).
_QUANTIZED = frozenset({torch.qint8, torch.quint8, torch.qint32, torch.quint4x2,
                        torch.quint2x4})


def _quantized_round_trips(ctx, dtypes):
    """Each quantized dtype of ``dtypes``: a CPU tensor quantized to it goes
    to the device and back with the same integers and parameters, and
    quantizing on the device gives the CPU's integers."""
    values = torch.tensor([0.0, 0.5, 1.0, 2.0, 3.25, 7.0, 16.0, 100.0])
    for dtype in dtypes:
        expected = torch.quantize_per_tensor(values, 0.5, 1, dtype)
        moved = to_device(ctx, expected)
        assert moved.is_quantized and moved.dtype == dtype, f"a {dtype} tensor arrives as {moved.dtype}"
        back = moved.cpu()
        assert torch.equal(back.int_repr(), expected.int_repr()), (
            f"a {dtype} round trip changes the integers")
        assert (back.q_scale(), back.q_zero_point()) == (0.5, 1), (
            f"a {dtype} round trip changes the scale or zero point")
        quantized = torch.quantize_per_tensor(to_device(ctx, values), 0.5, 1, dtype)
        assert torch.equal(quantized.cpu().int_repr(), expected.int_repr()), (
            f"quantizing to {dtype} on the device differs from the CPU")


def _round_trips_and_conversions(ctx, dtypes):
    """Each of ``dtypes`` to the device and back, and converted on the
    device to each of them, against the CPU, byte for byte."""
    # NB: non-negative values in every integer dtype's range: out of range,
    # a float converts to whatever the C++ cast gives.
    values = torch.tensor([0.0, 0.5, 1.0, 2.0, 3.25, 7.0, 16.0, 100.0])
    for dtype in dtypes:
        source = values.to(dtype)
        on_device = to_device(ctx, source)
        assert on_device.dtype == dtype, f"{dtype} arrives as {on_device.dtype}"
        assert torch.equal(_bits(on_device.cpu()), _bits(source)), (
            f"a {dtype} round trip changes the values")
    for source_dtype, target_dtype in itertools.product(dtypes, dtypes):
        source = values.to(source_dtype)
        converted = to_device(ctx, source).to(target_dtype)
        assert converted.dtype == target_dtype
        assert torch.equal(_bits(converted.cpu()), _bits(source.to(target_dtype))), (
            f"{source_dtype} to {target_dtype} on the device differs from the CPU's")


@SECTION.check(requires=(COPIES,))
def streams_and_events(ctx):
    """Streams and events of the device: ``torch.Stream``, the current
    stream, ``with stream``, an event's record, wait and query."""
    default = torch.accelerator.current_stream()
    assert default.device == ctx.dev(0), f"the current stream is on {default.device}"
    side = torch.Stream(device=ctx.device)
    assert side.device == ctx.dev(0) and side != default
    with side:
        assert torch.accelerator.current_stream() == side
        data = to_device(ctx, torch.arange(1000, dtype=torch.float32))
        event = torch.Event(device=ctx.device)
        event.record()
    assert torch.accelerator.current_stream() == default
    default.wait_event(event)
    event.synchronize()
    assert event.query()
    torch.accelerator.set_stream(side)
    try:
        assert torch.accelerator.current_stream() == side
    finally:
        torch.accelerator.set_stream(default)
    torch.accelerator.synchronize()
    assert_same(data, torch.arange(1000, dtype=torch.float32), "a copy on a side stream",
                exact=True)
