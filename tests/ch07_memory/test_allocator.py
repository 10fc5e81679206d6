"""Chapter 07: the caching device allocator and its statistics."""

import json

import pytest
import torch
import torch_accinte  # noqa: F401
from conftest import run_python, stage_has
from torch_accinte import _C

MiB = 1 << 20


def test_exact_statistics_for_known_sizes():
    # A fresh process: every number below is absolute, so nothing may have
    # been allocated before.
    result = run_python("""
        import json, torch, torch_accinte
        acc = torch.accinte
        snapshots = {}
        def snap(name):
            snapshots[name] = dict(acc.memory_stats(0))
        x = torch.empty(1000, dtype=torch.float32, device="accinte")
        snap("small")
        y = torch.empty(3 * 2**20, dtype=torch.uint8, device="accinte")
        snap("large")
        x_ptr = x.data_ptr()
        del x
        snap("freed_small")
        x2 = torch.empty(1000, dtype=torch.float32, device="accinte")
        snapshots["reused"] = x2.data_ptr() == x_ptr
        del x2, y
        acc.empty_cache()
        snap("emptied")
        z = torch.empty(12 * 2**20, dtype=torch.uint8, device="accinte")
        snap("oversized")
        acc.reset_peak_memory_stats(0)
        snap("peak_reset")
        acc.reset_accumulated_memory_stats(0)
        snap("accumulated_reset")
        print(json.dumps(snapshots))
    """)
    assert result.returncode == 0, result.stderr
    s = json.loads(result.stdout)
    # 4000 bytes round to a 4096-byte block in a 2 MiB small-pool segment;
    # the rest of the segment is a free block of a split segment.
    small = s["small"]
    assert small["allocated_bytes.all.current"] == 4096
    assert small["requested_bytes.all.current"] == 4000
    assert small["reserved_bytes.all.current"] == 2 * MiB
    assert small["reserved_bytes.small_pool.current"] == 2 * MiB
    assert small["segment.small_pool.current"] == 1
    assert small["allocation.all.current"] == 1
    assert small["inactive_split.small_pool.current"] == 1
    assert small["inactive_split_bytes.small_pool.current"] == 2 * MiB - 4096
    assert small["num_device_alloc"] == 1
    # 3 MiB is a large-pool request: a 20 MiB segment, split.
    large = s["large"]
    assert large["allocated_bytes.large_pool.current"] == 3 * MiB
    assert large["reserved_bytes.large_pool.current"] == 20 * MiB
    assert large["reserved_bytes.all.current"] == 22 * MiB
    assert large["inactive_split_bytes.large_pool.current"] == 17 * MiB
    # Freeing caches: allocated drops, reserved does not, and the freed block
    # merges with its neighbour into one whole (unsplit) segment again.
    freed = s["freed_small"]
    assert freed["allocated_bytes.all.current"] == 3 * MiB
    assert freed["reserved_bytes.all.current"] == 22 * MiB
    assert freed["inactive_split.small_pool.current"] == 0
    assert s["reused"] is True
    emptied = s["emptied"]
    assert emptied["reserved_bytes.all.current"] == 0
    assert emptied["segment.all.current"] == 0
    assert emptied["num_device_free"] == 2
    assert emptied["reserved_bytes.all.peak"] == 22 * MiB
    assert emptied["allocated_bytes.all.peak"] == 4096 + 3 * MiB
    # 12 MiB gets a segment of its own, rounded to 2 MiB.
    oversized = s["oversized"]
    assert oversized["reserved_bytes.large_pool.current"] == 12 * MiB
    assert oversized["inactive_split.all.current"] == 0
    assert s["peak_reset"]["reserved_bytes.all.peak"] == 12 * MiB
    assert s["peak_reset"]["allocated_bytes.all.allocated"] == 4096 * 2 + 15 * MiB
    reset = s["accumulated_reset"]
    assert reset["allocated_bytes.all.allocated"] == 0
    assert reset["num_device_alloc"] == 0
    assert reset["allocated_bytes.all.current"] == 12 * MiB


def test_accinte_and_accelerator_agree():
    keep = [torch.empty(n, device="accinte:1") for n in (10, 300_000, 3_000_000)]
    del keep[1]
    for device in (0, 1):
        ours = torch.accinte.memory_stats(device)
        theirs = torch.accelerator.memory_stats(device)
        assert ours == theirs
        assert list(ours) == list(theirs)
        for name in ("memory_allocated", "max_memory_allocated",
                     "memory_reserved", "max_memory_reserved"):
            assert getattr(torch.accinte, name)(device) == getattr(
                torch.accelerator, name)(device)
        assert torch.accinte.mem_get_info(device) == (
            torch.accelerator.get_memory_info(device))
    assert "num_alloc_retries" in ours and "reserved_bytes.all.peak" in ours


def test_reserved_memory_is_what_the_device_lost():
    # The allocator is the only user of device memory: the emulator's free
    # bytes and the allocator's reserved bytes must add up to the capacity.
    keep = [torch.empty(n, device="accinte") for n in (1, 70_000, 5 * MiB)]
    free, total = torch.accinte.mem_get_info()
    assert free + torch.accinte.memory_reserved() == total
    assert total == torch.accinte.get_device_properties().total_memory
    del keep


def test_repeated_allocations_reuse_the_cache():
    torch.accinte.empty_cache()
    before = torch.accinte.memory_stats()
    for _ in range(20):
        tensor = torch.empty(5 * MiB // 4, device="accinte")
        del tensor
    after = torch.accinte.memory_stats()
    assert after["num_device_alloc"] - before["num_device_alloc"] == 1
    assert (after["reserved_bytes.all.current"]
            == before["reserved_bytes.all.current"] + 20 * MiB)
    assert (after["allocation.all.allocated"]
            - before["allocation.all.allocated"] == 20)
    assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]


def test_empty_cache_returns_unused_segments_only():
    torch.accinte.empty_cache()
    # Both over 10 MiB: each gets a segment of its own.
    held = torch.full((3 * MiB,), 3.0, device="accinte")
    cached = torch.empty(4 * MiB, device="accinte")
    del cached
    reserved = torch.accinte.memory_reserved()
    torch.accinte.empty_cache()
    assert torch.accinte.memory_reserved() == reserved - 16 * MiB
    # What a tensor still uses stays, with its data.
    torch.testing.assert_close(held.cpu(), torch.full((3 * MiB,), 3.0))
    assert torch.accinte.memory_allocated() >= 12 * MiB


def test_devices_have_separate_pools_and_statistics():
    torch.accinte.empty_cache()
    before = [torch.accinte.memory_stats(d) for d in (0, 1)]
    on_one = torch.ones(1000, device="accinte:1")
    after = [torch.accinte.memory_stats(d) for d in (0, 1)]
    assert after[0] == before[0]
    assert (after[1]["allocated_bytes.all.current"]
            - before[1]["allocated_bytes.all.current"] == 4096)
    # A block freed on device 1 is never handed out on device 0.
    pointer = on_one.data_ptr()
    del on_one
    on_zero = torch.ones(1000, device="accinte:0")
    assert on_zero.data_ptr() != pointer
    assert torch.accinte.memory_stats(0)["allocated_bytes.all.current"] == (
        before[0]["allocated_bytes.all.current"] + 4096)


def test_freeing_does_not_wait_for_the_device():
    # accinteFree waits for every stream of the device; the cache does not
    # call it, so a free returns while a stream is still held.
    tensor = torch.ones(1000, device="accinte")
    gate = _C._testing.StreamGate(0, 30.0)
    try:
        del tensor
        assert not torch.accinte.current_stream().query()
    finally:
        gate.open()
        torch.accinte.synchronize()


def test_out_of_memory_frees_the_cache_retries_then_raises():
    result = run_python("""
        import json, torch, torch_accinte
        acc = torch.accinte
        MiB = 2**20
        cached = torch.empty(40 * MiB, dtype=torch.uint8, device="accinte")
        del cached                      # 40 MiB stay reserved
        held = torch.empty(50 * MiB, dtype=torch.uint8, device="accinte")
        after_retry = dict(acc.memory_stats())
        try:
            torch.empty(30 * MiB, dtype=torch.uint8, device="accinte")
            error = None
        except torch.OutOfMemoryError as exc:
            error = str(exc)
        after_oom = dict(acc.memory_stats())
        del held
        x = torch.arange(8 * MiB // 4, dtype=torch.float32, device="accinte")
        y = torch.neg(x)
        ok = bool((y.cpu() == -torch.arange(8 * MiB // 4, dtype=torch.float32)).all())
        print(json.dumps(dict(after_retry=after_retry, after_oom=after_oom,
                              error=error, ok=ok)))
    """, env={"ACCINTE_DEVICE_MEMORY": "64M", "ACCINTE_DEVICE_COUNT": "1"})
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    retry = out["after_retry"]
    assert retry["num_alloc_retries"] == 1
    assert retry["num_ooms"] == 0
    assert retry["num_device_free"] == 1
    assert retry["reserved_bytes.all.current"] == 50 * MiB
    error = out["error"]
    assert error is not None
    assert "out of memory" in error
    assert str(30 * MiB) in error  # requested
    assert str(50 * MiB) in error  # allocated and reserved
    assert str(64 * MiB) in error  # capacity
    assert "ACCINTE_DEVICE_MEMORY" in error
    assert out["after_oom"]["num_ooms"] == 1
    assert out["after_oom"]["num_alloc_retries"] == 2
    assert out["ok"] is True


def test_free_memory_callbacks_are_what_later_chapters_register():
    # An extension point: chapter 07 calls them before it raises out of
    # memory; chapter 14 registers the collection of the memory of tensors
    # sent to other processes (its test shows an allocation that needs it).
    expected = ["14_ipc"] if stage_has("14_ipc") else []
    assert _C._free_memory_callbacks() == expected


def test_out_of_memory_is_a_runtime_error():
    assert issubclass(torch.OutOfMemoryError, RuntimeError)
    with pytest.raises(torch.OutOfMemoryError, match="out of memory"):
        torch.empty(1 << 62, dtype=torch.uint8, device="accinte")
    assert torch.ones(3, device="accinte").sum().item() == 3


def test_bad_devices_are_rejected():
    with pytest.raises(RuntimeError, match="invalid device index 7"):
        torch.accinte.memory_stats(7)
    with pytest.raises(RuntimeError, match="invalid device index 7"):
        torch.accinte.reset_peak_memory_stats(7)
    with pytest.raises(ValueError, match="Expected an accinte device"):
        torch.accinte.memory_allocated("cpu")


def test_memory_summary_shows_the_statistics():
    tensor = torch.empty(1000, device="accinte:1")
    summary = torch.accinte.memory_summary(1)
    assert "device 1" in summary
    assert "Reserved memory" in summary and "from small pool" in summary
    assert "from small pool" not in torch.accinte.memory_summary(1, abbreviated=True)
    del tensor
