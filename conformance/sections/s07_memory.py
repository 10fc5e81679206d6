"""Chapter 07: the caching allocator, its statistics, pinned host memory,
and memory in stream order. Expected behaviour is CUDA's caching
allocator's, as ``torch.cuda``'s memory management documentation describes
it."""

import torch

from .._api import Section
from .._helpers import ACCELERATOR, COPIES, DEVICE, PARITY_MEMORY, STREAMS, assert_same, to_device

# NB: the allocator is read through torch.accelerator.memory (which reaches
# the backend's c10::DeviceAllocator), never through torch.NAME's helpers:
# the parity section checks those.
SECTION = Section(
    chapter="07", title="Memory", requires=(DEVICE, COPIES, ACCELERATOR),
    missing="no caching allocator with statistics (memory_allocated, memory_stats, "
            "empty_cache) or no pinned host allocator on the device's hooks")

_MIB = 1 << 20

#: ``torch.accelerator.memory``: the device's allocator, whatever its module has.
memory = torch.accelerator.memory


# LITERALINCLUDE START: KIT_CACHING
@SECTION.check
def freed_memory_is_cached_and_reused(ctx):
    """A freed block stays reserved (cached) and the next allocation of its
    size on the same stream gets it back; ``empty_cache`` returns it."""
    torch.accelerator.synchronize()
    memory.empty_cache()
    allocated, reserved = memory.memory_allocated(), memory.memory_reserved()
    tensor = torch.empty(_MIB, device=ctx.dev(0))  # 4 MiB of float32
    pointer = tensor.data_ptr()
    assert memory.memory_allocated() - allocated >= 4 * _MIB
    assert memory.memory_reserved() >= memory.memory_allocated()
    del tensor
    assert memory.memory_allocated() == allocated, "freeing did not lower memory_allocated"
    assert memory.memory_reserved() - reserved >= 4 * _MIB, "the freed block was not cached"
    again = torch.empty(_MIB, device=ctx.dev(0))
    assert again.data_ptr() == pointer, "the cached block was not reused"
    del again
    memory.empty_cache()
    assert memory.memory_reserved() == reserved, "empty_cache kept the freed block"
# LITERALINCLUDE END: KIT_CACHING


# NB: chapter 01's: torch.accelerator.memory reads any c10::DeviceAllocator's
# statistics, and a backend's first allocator keeps them (the caching is
# chapter 07's, checked above).
@SECTION.check(chapter="01")
def statistics_and_peaks(ctx):
    """``memory_stats`` has CUDA's keys and agrees with ``memory_allocated``;
    ``max_memory_allocated`` holds the peak until ``reset_peak_memory_stats``."""
    memory.reset_peak_memory_stats()
    base = memory.memory_allocated()
    tensor = torch.empty(2 * _MIB, device=ctx.dev(0))
    peak = memory.max_memory_allocated()
    assert peak >= base + 8 * _MIB
    del tensor
    stats = memory.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak",
                "reserved_bytes.all.current", "active_bytes.all.current",
                "num_alloc_retries", "num_ooms"):
        assert key in stats, f"memory_stats() has no {key!r}"
    assert stats["allocated_bytes.all.current"] == memory.memory_allocated()
    assert stats["allocated_bytes.all.peak"] == peak
    assert memory.max_memory_allocated() == peak, "the peak fell when the tensor was freed"
    memory.reset_peak_memory_stats()
    assert memory.max_memory_allocated() == memory.memory_allocated()


@SECTION.check
def out_of_memory_is_counted_and_recoverable(ctx):
    """An allocation larger than the device raises ``torch.OutOfMemoryError``,
    counted in ``num_ooms``, and the device allocates normally after it."""
    free, total = memory.get_memory_info(0)
    assert 0 <= free <= total
    before = memory.memory_stats()["num_ooms"]
    try:
        torch.empty(total // 2 + total, dtype=torch.uint8, device=ctx.dev(0))
    except torch.OutOfMemoryError:
        pass
    else:
        raise AssertionError("an allocation of 1.5x the device's memory succeeded")
    assert memory.memory_stats()["num_ooms"] == before + 1
    assert_same(to_device(ctx, torch.arange(4)), torch.arange(4), "an allocation after an OOM",
                exact=True)


@SECTION.check
def pinned_host_memory(ctx):
    """``pin_memory()`` and ``empty(pin_memory=True)`` give pinned host
    memory (``is_pinned``); a non-blocking copy to pinned memory holds the
    values after a synchronize; pinning a device tensor is an error."""
    source = torch.arange(1 << 14, dtype=torch.float32)
    pinned = source.pin_memory()
    assert pinned.is_pinned() and pinned.device.type == "cpu"
    assert torch.equal(pinned, source)
    assert torch.empty(16, pin_memory=True).is_pinned()
    on_device = pinned.to(ctx.dev(0), non_blocking=True)
    back = torch.empty_like(source).pin_memory()
    back.copy_(on_device, non_blocking=True)
    torch.accelerator.synchronize()
    assert torch.equal(back, source)
    assert on_device.to("cpu", non_blocking=True).is_pinned(), (
        "to('cpu', non_blocking=True) did not give pinned memory")
    torch.accelerator.synchronize()
    try:
        on_device.pin_memory()
    except RuntimeError:
        pass
    else:
        raise AssertionError("pin_memory() of a device tensor succeeded")


@SECTION.check(requires=(STREAMS,))
def record_stream_returns_the_block_after_the_stream(ctx):
    """A tensor used on a side stream and marked with ``record_stream``
    leaves ``memory_allocated`` when freed, and its block is cached again
    once the side stream's work is done; ``record_stream`` on the tensor's
    own stream changes nothing (the block is reused at once)."""
    tensor = torch.empty(_MIB, device=ctx.dev(0))
    pointer = tensor.data_ptr()
    tensor.record_stream(torch.accelerator.current_stream())
    del tensor
    again = torch.empty(_MIB, device=ctx.dev(0))
    assert again.data_ptr() == pointer, "record_stream on its own stream held the block"
    values = torch.arange(float(_MIB))
    side = torch.Stream(device=ctx.device)
    again.copy_(values)
    side.wait_stream(torch.accelerator.current_stream())
    with side:
        result = again * 2
    again.record_stream(side)
    allocated = memory.memory_allocated()
    del again
    assert allocated - memory.memory_allocated() == 4 * _MIB
    side.synchronize()
    assert memory.memory_reserved() - memory.memory_allocated() >= 4 * _MIB, (
        "the block recorded on a side stream was not cached once that stream finished")
    assert_same(result, values * 2, "a product computed on a side stream")
    # NB: the side stream is done: the next allocation of that size takes the
    # block back (the allocator looks at its recorded events first).
    third = torch.empty(_MIB, device=ctx.dev(0))
    assert third.data_ptr() == pointer, (
        "the block recorded on a side stream was not reused after that stream finished")


@SECTION.check(requires=(PARITY_MEMORY,))
def memory_pools(ctx):
    """``use_mem_pool(MemPool())`` routes allocations into the pool; its
    ``snapshot`` lists them, the default pool's does not grow. NB: PyTorch
    2.13 has no device-generic memory pool: the check uses the device
    module's ``MemPool``, so without it, it is blocked by the parity check."""
    module = ctx.module
    pool = module.MemPool()
    with module.use_mem_pool(pool):
        tensor = torch.empty(_MIB, device=ctx.dev(0))
    assert any(segment["total_size"] >= 4 * _MIB for segment in pool.snapshot()), (
        "the pool's snapshot does not hold the allocation made in it")
    del tensor
