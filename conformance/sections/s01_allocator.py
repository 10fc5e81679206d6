"""Chapter 01: the allocator and copies between the host and the device."""

import torch

from .._api import Section
from .._helpers import ACCELERATOR, COPIES, DEVICE, assert_same, need_devices, to_device

# NB: every check but the round trip needs the round trip: a device that
# cannot hold a tensor's values can show nothing else.
SECTION = Section(
    chapter="01", title="Allocator and copies", requires=(DEVICE, COPIES),
    missing="the device's allocator or its copy kernel (aten::_copy_from, "
            "empty.memory_format, empty_strided) is missing or wrong")

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
          torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool,
          torch.complex64)


def _values(dtype):
    values = torch.linspace(-40, 40, 37).reshape(37)
    if dtype == torch.bool:
        return values > 0
    if dtype.is_complex:
        return torch.complex(values, -values).to(dtype)
    if dtype == torch.uint8:
        return values.abs().to(dtype)
    return values.to(dtype)


@SECTION.check
def round_trips_of_every_dtype(ctx):
    """CPU -> device -> CPU gives back the same bits, for every dtype."""
    for dtype in DTYPES:
        source = _values(dtype)
        on_device = to_device(ctx, source)
        assert on_device.device == ctx.dev(0) and on_device.dtype == dtype
        assert_same(on_device, source, f"a {dtype} round trip", exact=True)


@SECTION.check
def non_contiguous_copies(ctx):
    """Copies of transposed, sliced and strided views, both ways."""
    source = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    on_device = to_device(ctx, source)
    for name, view in (("transpose", lambda t: t.transpose(0, 2)),
                       ("slice", lambda t: t[:, 1:3, ::2]),
                       ("expand", lambda t: t[:, :1, :].expand(3, 4, 5)),
                       ("as_strided", lambda t: t.as_strided((4, 3), (5, 7), 2))):
        assert_same(view(on_device), view(source), f"a device {name} view", exact=True)
        assert_same(to_device(ctx, view(source)), view(source),
                    f"a CPU {name} view copied over", exact=True)


@SECTION.check
def copy_into_a_view_writes_only_the_view(ctx):
    """``copy_`` from the CPU into a device view changes that view only."""
    target = to_device(ctx, torch.zeros(4, 6))
    expected = torch.zeros(4, 6)
    patch = torch.arange(8, dtype=torch.float32).reshape(4, 2) + 1
    target[:, 2:4].copy_(patch)
    expected[:, 2:4] = patch
    assert_same(target, expected, "a copy into a column slice", exact=True)


@SECTION.check
def copy_converts_dtype(ctx):
    """A copy that also changes the dtype converts as the CPU does."""
    source = torch.linspace(-3.7, 3.7, 11)
    assert_same(source.to(ctx.dev(0), torch.int32), source.to(torch.int32),
                "float32 -> int32 on the way to the device", exact=True)
    assert_same(to_device(ctx, source).to(torch.float16).cpu().to(torch.float32),
                source.to(torch.float16).to(torch.float32), "float32 -> float16 on the device",
                exact=True)


@SECTION.check(requires=(ACCELERATOR,))
def non_blocking_copies(ctx):
    """A ``non_blocking=True`` copy to the device is complete after a
    synchronize (back to the host, non-blocking needs pinned memory: the
    memory section checks that)."""
    source = torch.randn(1 << 16)
    on_device = source.to(ctx.dev(0), non_blocking=True)
    torch.accelerator.synchronize()
    assert torch.equal(on_device.cpu(), source)


@SECTION.check
def copies_between_devices(ctx):
    """Device 0 -> device 1 keeps the values and lands on device 1."""
    need_devices(ctx, 2)
    source = torch.arange(100, dtype=torch.int64)
    on_1 = to_device(ctx, source).to(ctx.dev(1))
    assert on_1.device == ctx.dev(1)
    assert_same(on_1, source, "a device 0 -> device 1 copy", exact=True)
    on_0 = on_1[10:20].to(ctx.dev(0))
    assert_same(on_0, source[10:20], "a slice copied back to device 0", exact=True)


@SECTION.check
def empty_strided_and_storage_offset(ctx):
    """``empty``, ``empty_strided`` and views keep shape, strides, offset and
    storage size, as on the CPU."""
    device = ctx.dev(0)
    strided = torch.empty_strided((2, 3), (1, 2), device=device)
    assert strided.stride() == (1, 2) and strided.shape == (2, 3)
    cpu = torch.empty_strided((2, 3), (1, 2))
    assert strided.untyped_storage().nbytes() == cpu.untyped_storage().nbytes()
    base = torch.empty(10, 10, device=device)
    view = base[2:, 3:]
    assert view.storage_offset() == 23 and view.stride() == (10, 1)
    assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert torch.empty(0, device=device).numel() == 0
    channels_last = torch.empty(2, 3, 4, 5, device=device, memory_format=torch.channels_last)
    assert channels_last.is_contiguous(memory_format=torch.channels_last)


@SECTION.check
def allocations_are_distinct(ctx):
    """Live tensors never share memory, and device pointers are not host
    memory the CPU copy could read by mistake."""
    tensors = [torch.empty(256, device=ctx.dev(0)) for _ in range(8)]
    spans = sorted((t.data_ptr(), t.data_ptr() + t.untyped_storage().nbytes())
                   for t in tensors)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end <= start, "two live device tensors overlap"


@SECTION.check
def module_to_device(ctx):
    """``Module.to(device)`` moves parameters and buffers and keeps them."""
    module = torch.nn.BatchNorm1d(3)
    module.running_mean.copy_(torch.tensor([1.0, 2.0, 3.0]))
    reference = {name: t.clone() for name, t in module.state_dict().items()}
    module.to(ctx.dev(0))
    for name, tensor in module.state_dict().items():
        assert tensor.device == ctx.dev(0), f"{name} stayed on {tensor.device}"
        assert_same(tensor, reference[name], f"the module's {name}", exact=True)
    assert isinstance(module.weight, torch.nn.Parameter)
