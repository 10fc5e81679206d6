"""Chapter 07: the caching allocator, its statistics, pinned host memory,
and memory in stream order. Expected behaviour is CUDA's caching
allocator's, as ``torch.cuda``'s memory management documentation describes
it."""

import torch

from .._api import Section
from .._helpers import assert_same, to_device

SECTION = Section(
    chapter="07", title="Memory",
    missing="no caching allocator with statistics (memory_allocated, memory_stats, "
            "empty_cache) or no pinned host allocator on the device's hooks")

#: The ``torch.cuda`` memory functions a device module mirrors.
MEMORY_NAMES = (
    "empty_cache", "mem_get_info", "memory_allocated", "memory_reserved",
    "max_memory_allocated", "max_memory_reserved", "memory_stats",
    "memory_snapshot", "memory_summary", "reset_peak_memory_stats",
    "reset_accumulated_memory_stats", "set_per_process_memory_fraction",
    "get_per_process_memory_fraction", "MemPool", "use_mem_pool",
    "caching_allocator_alloc", "caching_allocator_delete", "host_memory_stats",
)

_MIB = 1 << 20


@SECTION.check
def module_mirrors_torch_cuda_memory(ctx):
    """``torch.NAME`` has ``torch.cuda``'s memory-management functions."""
    absent = [name for name in MEMORY_NAMES if not hasattr(ctx.module, name)]
    assert not absent, f"torch.{ctx.device} lacks {', '.join(absent)}"
    not_cuda = [name for name in MEMORY_NAMES if not hasattr(torch.cuda, name)]
    assert not not_cuda, f"the kit's list names what torch.cuda lacks: {not_cuda}"


# LITERALINCLUDE START: KIT_CACHING
@SECTION.check
def freed_memory_is_cached_and_reused(ctx):
    """A freed block stays reserved (cached) and the next allocation of its
    size on the same stream gets it back; ``empty_cache`` returns it."""
    module = ctx.module
    module.synchronize()
    module.empty_cache()
    allocated, reserved = module.memory_allocated(), module.memory_reserved()
    tensor = torch.empty(_MIB, device=ctx.dev(0))  # 4 MiB of float32
    pointer = tensor.data_ptr()
    assert module.memory_allocated() - allocated >= 4 * _MIB
    assert module.memory_reserved() >= module.memory_allocated()
    del tensor
    assert module.memory_allocated() == allocated, "freeing did not lower memory_allocated"
    assert module.memory_reserved() - reserved >= 4 * _MIB, "the freed block was not cached"
    again = torch.empty(_MIB, device=ctx.dev(0))
    assert again.data_ptr() == pointer, "the cached block was not reused"
    del again
    module.empty_cache()
    assert module.memory_reserved() == reserved, "empty_cache kept the freed block"
# LITERALINCLUDE END: KIT_CACHING


@SECTION.check
def statistics_and_peaks(ctx):
    """``memory_stats`` has CUDA's keys and agrees with ``memory_allocated``;
    ``max_memory_allocated`` holds the peak until ``reset_peak_memory_stats``."""
    module = ctx.module
    module.reset_peak_memory_stats()
    base = module.memory_allocated()
    tensor = torch.empty(2 * _MIB, device=ctx.dev(0))
    peak = module.max_memory_allocated()
    assert peak >= base + 8 * _MIB
    del tensor
    stats = module.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak",
                "reserved_bytes.all.current", "active_bytes.all.current",
                "num_alloc_retries", "num_ooms"):
        assert key in stats, f"memory_stats() has no {key!r}"
    assert stats["allocated_bytes.all.current"] == module.memory_allocated()
    assert stats["allocated_bytes.all.peak"] == peak
    assert module.max_memory_allocated() == peak, "the peak fell when the tensor was freed"
    module.reset_peak_memory_stats()
    assert module.max_memory_allocated() == module.memory_allocated()


@SECTION.check
def out_of_memory_is_counted_and_recoverable(ctx):
    """An allocation larger than the device raises ``torch.OutOfMemoryError``,
    counted in ``num_ooms``, and the device allocates normally after it."""
    module = ctx.module
    total = module.get_device_properties(0).total_memory
    free, reported_total = module.mem_get_info(0)
    assert reported_total == total and 0 <= free <= total
    before = module.memory_stats()["num_ooms"]
    try:
        torch.empty(total // 2 + total, dtype=torch.uint8, device=ctx.dev(0))
    except torch.OutOfMemoryError:
        pass
    else:
        raise AssertionError("an allocation of 1.5x the device's memory succeeded")
    assert module.memory_stats()["num_ooms"] == before + 1
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
    ctx.module.synchronize()
    assert torch.equal(back, source)
    assert on_device.to("cpu", non_blocking=True).is_pinned(), (
        "to('cpu', non_blocking=True) did not give pinned memory")
    ctx.module.synchronize()
    try:
        on_device.pin_memory()
    except RuntimeError:
        pass
    else:
        raise AssertionError("pin_memory() of a device tensor succeeded")


@SECTION.check
def record_stream_returns_the_block_after_the_stream(ctx):
    """A tensor used on a side stream and marked with ``record_stream``
    leaves ``memory_allocated`` when freed, and its block is cached again
    once the side stream's work is done; ``record_stream`` on the tensor's
    own stream changes nothing (the block is reused at once)."""
    module = ctx.module
    tensor = torch.empty(_MIB, device=ctx.dev(0))
    pointer = tensor.data_ptr()
    tensor.record_stream(module.current_stream())
    del tensor
    again = torch.empty(_MIB, device=ctx.dev(0))
    assert again.data_ptr() == pointer, "record_stream on its own stream held the block"
    values = torch.arange(float(_MIB))
    side = torch.Stream(device=ctx.device)
    again.copy_(values)
    side.wait_stream(module.current_stream())
    with module.stream(side):
        result = again * 2
    again.record_stream(side)
    allocated = module.memory_allocated()
    del again
    assert allocated - module.memory_allocated() == 4 * _MIB
    side.synchronize()
    assert_same(result, values * 2, "a product computed on a side stream")
    # NB: the side stream is done: the next allocation of that size takes the
    # block back (the allocator looks at its recorded events first).
    third = torch.empty(_MIB, device=ctx.dev(0))
    assert third.data_ptr() == pointer, (
        "the block recorded on a side stream was not reused after that stream finished")


@SECTION.check
def memory_pools(ctx):
    """``use_mem_pool(MemPool())`` routes allocations into the pool; its
    ``snapshot`` lists them, the default pool's does not grow."""
    module = ctx.module
    pool = module.MemPool()
    with module.use_mem_pool(pool):
        tensor = torch.empty(_MIB, device=ctx.dev(0))
    assert any(segment["total_size"] >= 4 * _MIB for segment in pool.snapshot()), (
        "the pool's snapshot does not hold the allocation made in it")
    del tensor
