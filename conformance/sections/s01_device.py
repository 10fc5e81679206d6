"""Chapter 01: the device module and the device guard."""

import torch

from .._api import Section
from .._helpers import assert_same, need_devices, to_device

SECTION = Section(
    chapter="01", title="Device module and guard",
    missing="the device is not registered as PrivateUse1 with a device module "
            "(rename_privateuse1_backend, _register_device_module) and a DeviceGuardImpl")

# LITERALINCLUDE START: KIT_CUDA_NAMES
#: The ``torch.cuda`` names a device module mirrors from chapter 01 on: the
#: device, its properties, streams and events. Each is checked on torch.cuda
#: too, so that the list stays one of CUDA's names.
DEVICE_MODULE_NAMES = (
    "Event", "Stream", "StreamContext", "current_device", "current_stream",
    "default_stream", "device", "device_count", "device_of", "get_device_capability",
    "get_device_name", "get_device_properties", "init", "is_available",
    "is_initialized", "set_device", "set_stream", "stream", "synchronize",
)


@SECTION.check
def module_mirrors_torch_cuda(ctx):
    """``torch.NAME`` has chapter 01's names of ``torch.cuda``."""
    module = ctx.module
    if module is None:
        raise AssertionError(f"torch.{ctx.device} does not exist")
    assert torch.get_device_module(ctx.device) is module
    absent = [name for name in DEVICE_MODULE_NAMES if not hasattr(module, name)]
    assert not absent, f"torch.{ctx.device} lacks {', '.join(absent)}"
    not_cuda = [name for name in DEVICE_MODULE_NAMES if not hasattr(torch.cuda, name)]
    assert not not_cuda, f"the kit's list names what torch.cuda lacks: {not_cuda}"
# LITERALINCLUDE END: KIT_CUDA_NAMES


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
    """``device_count``, ``is_available`` and ``torch.accelerator`` agree."""
    module = ctx.module
    count = module.device_count()
    assert isinstance(count, int) and count >= 1, f"device_count() is {count!r}"
    assert module.is_available() is True
    assert torch.accelerator.device_count() == count
    assert torch.accelerator.is_available()


@SECTION.check
def set_device_moves_new_tensors(ctx):
    """``set_device(1)`` makes new tensors (no index) land on device 1, as
    on CUDA; ``current_device`` and ``torch.accelerator`` follow."""
    need_devices(ctx, 2)
    module = ctx.module
    module.set_device(1)
    try:
        assert module.current_device() == 1
        assert torch.accelerator.current_device_index() == 1
        assert torch.empty(3, device=ctx.device).device == ctx.dev(1)
    finally:
        module.set_device(0)
    assert module.current_device() == 0
    assert torch.empty(3, device=ctx.device).device == ctx.dev(0)


@SECTION.check
def device_context_managers_restore(ctx):
    """``with torch.NAME.device(1)`` switches the current device and puts
    it back; so does a ``torch.device`` used as a context manager."""
    need_devices(ctx, 2)
    module = ctx.module
    with module.device(1):
        assert module.current_device() == 1
        assert torch.empty(2, device=ctx.device).device == ctx.dev(1)
    assert module.current_device() == 0
    with torch.device(ctx.dev(1)):
        assert torch.empty(2).device == ctx.dev(1)
    assert torch.empty(2).device == torch.device("cpu")
    tensor = torch.empty(2, device=ctx.dev(1))
    with module.device_of(tensor):
        assert module.current_device() == 1
    assert module.current_device() == 0


@SECTION.check
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
    count = ctx.module.device_count()
    for attempt in (lambda: torch.empty(1, device=f"{ctx.device}:{count}"),
                    lambda: ctx.module.set_device(count)):
        try:
            attempt()
        except (RuntimeError, ValueError, AssertionError):
            continue
        raise AssertionError(f"device index {count} (of {count}) was accepted")


@SECTION.check
def properties_name_the_device(ctx):
    """``get_device_properties`` has CUDA's fields (name, total_memory, major,
    minor) and ``get_device_name`` its name."""
    module = ctx.module
    for index in range(module.device_count()):
        properties = module.get_device_properties(index)
        for field in ("name", "total_memory", "major", "minor"):
            assert hasattr(properties, field), f"device properties lack {field}"
        assert module.get_device_name(index) == properties.name
        assert module.get_device_capability(index) == (properties.major, properties.minor)


@SECTION.check
def streams_and_events(ctx):
    """Streams and events of the device: ``torch.Stream``, the current and
    default streams, ``with stream``, an event's record, wait and query."""
    module = ctx.module
    default = module.default_stream()
    assert module.current_stream() == default
    side = torch.Stream(device=ctx.device)
    assert side.device == ctx.dev(0) and side != default
    with module.stream(side):
        assert module.current_stream() == side
        data = to_device(ctx, torch.arange(1000, dtype=torch.float32))
        event = torch.Event(device=ctx.device)
        event.record()
    assert module.current_stream() == default
    default.wait_event(event)
    event.synchronize()
    assert event.query()
    module.synchronize()
    assert_same(data, torch.arange(1000, dtype=torch.float32), "a copy on a side stream",
                exact=True)
