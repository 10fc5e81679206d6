"""Chapter 07's private memory pools: ``torch.accinte.MemPool`` and
``use_mem_pool``, held to what ``torch.cuda`` documents for its own (and
does, where the documentation is silent)."""

import threading

import pytest
import torch

from ch07_memory import allocator_library

MiB = 1 << 20


def segments_of(pool_id, device=None):
    return [segment for segment in torch.accinte.memory_snapshot()
            if segment["segment_pool_id"] == tuple(pool_id)
            and (device is None or segment["device"] == device)]


def segment_holding(ptr):
    """The snapshot's segment that contains the address ``ptr``."""
    for segment in torch.accinte.memory_snapshot():
        if segment["address"] <= ptr < segment["address"] + segment["total_size"]:
            return segment
    return None


def block_state(ptr):
    for segment in torch.accinte.memory_snapshot():
        for block in segment["blocks"]:
            if block["address"] == ptr:
                return block["state"]
    return None


@pytest.fixture
def clean_cache():
    torch.accinte.empty_cache()
    yield
    torch.accinte.empty_cache()


def test_ids_use_counts_and_names():
    first, second = torch.accinte.MemPool(), torch.accinte.MemPool()
    # As CUDA's pools made by users: (0, n), n new for each pool.
    assert first.id[0] == 0 and second.id[0] == 0
    assert first.id[1] != second.id[1] and first.id[1] > 0
    assert first.allocator is None
    assert first.use_count() == 1
    with torch.accinte.use_mem_pool(first):
        assert first.use_count() == 2
        assert second.use_count() == 1
    assert first.use_count() == 1
    assert torch.accinte.memory.MemPool is torch.accinte.MemPool
    assert torch.accinte.memory.use_mem_pool is torch.accinte.use_mem_pool


def test_allocations_in_the_block_take_the_pools_own_segments(clean_cache):
    pool = torch.accinte.MemPool()
    reserved = torch.accinte.memory_reserved()
    assert pool.snapshot() == []
    with torch.accinte.use_mem_pool(pool):
        inside = torch.full((1000,), 3.0, device="accinte")
    outside = torch.full((1000,), 4.0, device="accinte")
    segments = pool.snapshot()
    assert len(segments) == 1
    (segment,) = segments
    assert segment["segment_pool_id"] == pool.id
    assert segment["segment_type"] == "small"
    assert segment_holding(inside.data_ptr()) == segment
    assert segment_holding(outside.data_ptr())["segment_pool_id"] == (0, 0)
    assert [b["requested_size"] for b in segment["blocks"]
            if b["state"] == "active_allocated"] == [4000]
    # Memory of the pool counts as the allocator's memory.
    assert torch.accinte.memory_reserved() - reserved == 2 * 2 * MiB
    assert torch.accinte.memory_allocated() >= 2 * 4096
    assert inside.sum().item() == 3000.0 and outside.sum().item() == 4000.0
    del inside, outside, pool


def test_a_block_freed_in_the_pool_serves_only_the_pool(clean_cache):
    pool = torch.accinte.MemPool()
    with torch.accinte.use_mem_pool(pool):
        x = torch.empty(4096, dtype=torch.uint8, device="accinte")
    in_pool = x.data_ptr()
    del x
    assert block_state(in_pool) == "inactive"
    y = torch.empty(4096, dtype=torch.uint8, device="accinte")
    assert y.data_ptr() != in_pool
    assert segment_holding(y.data_ptr())["segment_pool_id"] == (0, 0)
    with torch.accinte.use_mem_pool(pool):
        z = torch.empty(4096, dtype=torch.uint8, device="accinte")
    assert z.data_ptr() == in_pool  # the pool's own cache serves it again
    del y, z, pool


def test_a_block_freed_outside_never_serves_the_pool(clean_cache):
    general = torch.empty(4096, dtype=torch.uint8, device="accinte")
    general_ptr = general.data_ptr()
    del general
    pool = torch.accinte.MemPool()
    with torch.accinte.use_mem_pool(pool):
        x = torch.empty(4096, dtype=torch.uint8, device="accinte")
    assert x.data_ptr() != general_ptr
    assert segment_holding(x.data_ptr())["segment_pool_id"] == pool.id
    again = torch.empty(4096, dtype=torch.uint8, device="accinte")
    assert again.data_ptr() == general_ptr
    del x, again, pool


def test_deleting_the_pool_returns_its_segments(clean_cache):
    pool = torch.accinte.MemPool()
    with torch.accinte.use_mem_pool(pool):
        x = torch.empty(3 * MiB, dtype=torch.uint8, device="accinte")
    pool_id = pool.id
    del x
    reserved = torch.accinte.memory_reserved()
    frees = torch.accinte.memory_stats()["num_device_free"]
    assert len(segments_of(pool_id)) == 1
    del pool
    assert segments_of(pool_id) == []
    assert torch.accinte.memory_reserved() == reserved - 20 * MiB
    assert torch.accinte.memory_stats()["num_device_free"] == frees + 1


def test_a_pool_deleted_with_live_tensors_keeps_them_until_freed(clean_cache):
    pool = torch.accinte.MemPool()
    pool_id = pool.id
    with torch.accinte.use_mem_pool(pool):
        x = torch.arange(1000, dtype=torch.float32, device="accinte")
    del pool
    # The tensor's segment stays, and so do its values.
    assert len(segments_of(pool_id)) == 1
    assert torch.equal(x.cpu(), torch.arange(1000, dtype=torch.float32))
    # Freed, a block of a pool nothing references serves nobody; the next
    # empty_cache returns it (on CUDA too).
    ptr = x.data_ptr()
    del x
    y = torch.empty(4000, dtype=torch.uint8, device="accinte")
    assert y.data_ptr() != ptr
    del y
    assert len(segments_of(pool_id)) == 1
    torch.accinte.empty_cache()
    assert segments_of(pool_id) == []


def test_empty_cache_keeps_a_live_pools_segments(clean_cache):
    pool = torch.accinte.MemPool()
    with torch.accinte.use_mem_pool(pool):
        kept = torch.empty(4096, dtype=torch.uint8, device="accinte")
        cached = torch.empty(3 * MiB, dtype=torch.uint8, device="accinte")
    cached_ptr = cached.data_ptr()
    del cached
    torch.accinte.empty_cache()
    # Both segments stay: one in use, one cached for the pool, which
    # still exists.
    states = sorted(b["state"] for s in pool.snapshot() for b in s["blocks"])
    assert len(pool.snapshot()) == 2
    assert states == ["active_allocated", "inactive", "inactive"]
    with torch.accinte.use_mem_pool(pool):
        again = torch.empty(3 * MiB, dtype=torch.uint8, device="accinte")
    assert again.data_ptr() == cached_ptr
    del kept, again, pool
    assert all(s["segment_pool_id"] == (0, 0) for s in torch.accinte.memory_snapshot())


def test_only_the_threads_allocations_are_routed(clean_cache):
    pool = torch.accinte.MemPool()
    seen = {}

    def other_thread():
        seen["tensor"] = torch.empty(4096, dtype=torch.uint8, device="accinte")

    with torch.accinte.use_mem_pool(pool):
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        mine = torch.empty(4096, dtype=torch.uint8, device="accinte")
    assert segment_holding(seen["tensor"].data_ptr())["segment_pool_id"] == (0, 0)
    assert segment_holding(mine.data_ptr())["segment_pool_id"] == pool.id
    del seen, mine, pool


def test_the_pool_serves_the_device_of_the_block(clean_cache):
    pool = torch.accinte.MemPool()  # made on device 0
    with torch.accinte.use_mem_pool(pool, device="accinte:1"):
        on_1 = torch.empty(4096, dtype=torch.uint8, device="accinte:1")
        on_0 = torch.empty(4096, dtype=torch.uint8, device="accinte:0")
        assert pool.use_count() == 1  # its device's count
    assert [s["device"] for s in segments_of(pool.id)] == [1]
    assert segment_holding(on_1.data_ptr())["segment_pool_id"] == pool.id
    assert segment_holding(on_0.data_ptr())["segment_pool_id"] == (0, 0)
    del on_1, on_0
    # On device 1 nothing references the pool any more.
    torch.accinte.empty_cache()
    assert segments_of(pool.id, device=1) == []
    del pool


def test_nested_blocks_route_to_the_pool_entered_first(clean_cache):
    outer, inner = torch.accinte.MemPool(), torch.accinte.MemPool()
    with torch.accinte.use_mem_pool(outer):
        with torch.accinte.use_mem_pool(inner):
            assert inner.use_count() == 2 and outer.use_count() == 2
            x = torch.empty(4096, dtype=torch.uint8, device="accinte")
        y = torch.empty(4096, dtype=torch.uint8, device="accinte")
    # As CUDA's allocator, which takes the first matching route.
    assert segment_holding(x.data_ptr())["segment_pool_id"] == outer.id
    assert segment_holding(y.data_ptr())["segment_pool_id"] == outer.id
    assert inner.snapshot() == []
    del x, y, outer, inner


def test_stream_order_holds_inside_a_pool(clean_cache):
    pool = torch.accinte.MemPool()
    side = torch.accinte.Stream()
    with torch.accinte.use_mem_pool(pool):
        with torch.accinte.stream(side):
            x = torch.empty(4096, dtype=torch.uint8, device="accinte")
        ptr = x.data_ptr()
        del x
        # A block of the side stream serves only that stream.
        y = torch.empty(4096, dtype=torch.uint8, device="accinte")
        assert y.data_ptr() != ptr
        with torch.accinte.stream(side):
            z = torch.empty(4096, dtype=torch.uint8, device="accinte")
        assert z.data_ptr() == ptr
    del y, z, pool


def test_bad_arguments_raise():
    pool = torch.accinte.MemPool()
    with pytest.raises(ValueError, match="Expected an accinte device, got cpu"):
        with torch.accinte.use_mem_pool(pool, device="cpu"):
            pass
    with pytest.raises(Exception, match="device"):
        with torch.accinte.use_mem_pool(pool, device=7):
            pass
    with pytest.raises(TypeError, match="torch.accinte.MemPool"):
        with torch.accinte.use_mem_pool(pool.id):
            pass
    with pytest.raises(NotImplementedError, match="use_on_oom"):
        torch.accinte.MemPool(use_on_oom=True)
    with pytest.raises(NotImplementedError, match="no_split"):
        torch.accinte.MemPool(no_split=True)
    assert pool.use_count() == 1
    assert torch.accinte.memory.MemPool is torch.accinte.MemPool


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return allocator_library.build(tmp_path_factory.mktemp("allocator"))


def test_a_pool_reserves_its_segments_from_its_allocator(library, clean_cache):
    counters = allocator_library.Counters(library)
    allocator = torch.accinte.memory.AccintePluggableAllocator(
        str(library), "test_alloc", "test_free")
    pool = torch.accinte.MemPool(allocator)
    assert pool.allocator is allocator.allocator()
    calls = counters.alloc_calls
    with torch.accinte.use_mem_pool(pool):
        x = torch.arange(1000, dtype=torch.float32, device="accinte")
        y = torch.ones(1000, device="accinte")
    assert counters.alloc_calls == calls + 1  # one 2 MiB segment for both
    assert counters.last_alloc_size == 2 * MiB
    assert torch.equal((x + y).cpu(), torch.arange(1000, dtype=torch.float32) + 1)
    # Outside the pool, the caching allocator's own segments.
    z = torch.ones(1000, device="accinte")
    assert counters.alloc_calls == calls + 1
    segment = pool.snapshot()[0]
    frees = counters.free_calls
    del x, y, pool
    assert counters.free_calls == frees + 1
    assert counters.last_freed == segment["address"]
    assert counters.last_free_size == 2 * MiB
    del z


def test_an_allocator_out_of_memory_raises(library, clean_cache):
    allocator = torch.accinte.memory.AccintePluggableAllocator(
        str(library), "test_alloc_none", "test_free")
    pool = torch.accinte.MemPool(allocator)
    with pytest.raises(torch.OutOfMemoryError, match="out of memory"):
        with torch.accinte.use_mem_pool(pool):
            torch.empty(10, device="accinte")
    assert pool.use_count() == 1


def test_a_switched_off_cache_bypasses_the_pool(clean_cache):
    pool = torch.accinte.MemPool()
    with torch.accinte.caching_allocator_disabled():
        with torch.accinte.use_mem_pool(pool):
            x = torch.ones(1000, device="accinte")
    assert pool.snapshot() == []
    assert segment_holding(x.data_ptr()) is None  # outside every segment
    assert x.sum().item() == 1000.0
    del x, pool
