"""Chapter 07's counterparts of ``torch.cuda``'s memory functions (issue
#30), each held to what ``torch.cuda`` documents for its own."""

import re

import pytest
import torch

MiB = 2**20


@pytest.fixture
def fraction_restored():
    """Puts back the memory cap of both devices, whatever the test does."""
    yield
    for device in range(2):
        torch.accinte.set_per_process_memory_fraction(1.0, device)


def test_memory_fraction_caps_what_the_allocator_reserves(fraction_restored):
    torch.accinte.empty_cache()
    total = torch.accinte.mem_get_info(1)[1]
    # NB: a small cap (32 MiB of the default 8 GiB), so that the test
    # reserves little memory.
    fraction = 2.0**-8
    cap = total * fraction
    assert torch.accinte.get_per_process_memory_fraction(1) == 1.0
    torch.accinte.set_per_process_memory_fraction(fraction, "accinte:1")
    assert torch.accinte.get_per_process_memory_fraction(1) == fraction
    assert torch.accinte.get_per_process_memory_fraction(0) == 1.0
    # The device has room for it; the cap has not, so the allocator raises
    # the out-of-memory error and names the cap.
    with pytest.raises(torch.accinte.OutOfMemoryError,
                       match=re.escape(f"set_per_process_memory_fraction({fraction})")):
        torch.empty(int(cap * 1.5), dtype=torch.uint8, device="accinte:1")
    below = torch.empty(int(cap * 0.5), dtype=torch.uint8, device="accinte:1")
    assert torch.accinte.memory_reserved(1) <= cap
    del below
    # Device 0 has no cap.
    above = torch.empty(int(cap * 1.5), dtype=torch.uint8, device="accinte:0")
    del above
    torch.accinte.set_per_process_memory_fraction(1.0, 1)
    lifted = torch.empty(int(cap * 1.5), dtype=torch.uint8, device="accinte:1")
    del lifted
    torch.accinte.empty_cache()


def test_memory_fraction_rejects_bad_values(fraction_restored):
    with pytest.raises(ValueError, match="Allowed range: 0~1"):
        torch.accinte.set_per_process_memory_fraction(1.5)
    with pytest.raises(ValueError, match="Allowed range: 0~1"):
        torch.accinte.set_per_process_memory_fraction(-0.1)
    with pytest.raises(TypeError, match="must be `float`"):
        torch.accinte.set_per_process_memory_fraction(1)
    assert torch.accinte.get_per_process_memory_fraction() == 1.0


def test_deprecated_names_warn_and_answer_as_their_replacements():
    keep = torch.empty(3 * MiB, dtype=torch.uint8, device="accinte")
    with pytest.warns(FutureWarning, match="renamed to `torch.accinte.memory_reserved`"):
        assert torch.accinte.memory_cached() == torch.accinte.memory_reserved()
    with pytest.warns(FutureWarning, match="max_memory_reserved"):
        assert torch.accinte.max_memory_cached() == torch.accinte.max_memory_reserved()
    del keep
    for reset in (torch.accinte.reset_max_memory_allocated,
                  torch.accinte.reset_max_memory_cached):
        peak = torch.empty(5 * MiB, dtype=torch.uint8, device="accinte")
        del peak
        assert torch.accinte.max_memory_allocated() > torch.accinte.memory_allocated()
        with pytest.warns(FutureWarning, match="resets /all/ peak memory stats"):
            reset()
        assert torch.accinte.max_memory_allocated() == torch.accinte.memory_allocated()
        assert torch.accinte.max_memory_reserved() == torch.accinte.memory_reserved()


def _block_of(address):
    for segment in torch.accinte.memory_snapshot():
        for block in segment["blocks"]:
            if block["address"] == address:
                return segment, block
    return None, None


def test_memory_snapshot_lists_segments_and_their_blocks():
    tensor = torch.empty(1000, dtype=torch.uint8, device="accinte:1")
    segment, block = _block_of(tensor.data_ptr())
    assert block == {"address": tensor.data_ptr(), "size": 1024,
                     "requested_size": 1000, "state": "active_allocated",
                     "frames": []}
    assert segment["device"] == 1
    assert segment["segment_type"] == "small"
    assert segment["total_size"] == sum(b["size"] for b in segment["blocks"])
    assert segment["allocated_size"] >= 1024
    addresses = [b["address"] for b in segment["blocks"]]
    assert addresses == sorted(addresses)
    assert addresses[0] == segment["address"]
    snapshot = torch.accinte.memory_snapshot()
    assert sum(s["total_size"] for s in snapshot if s["device"] == 1) == \
        torch.accinte.memory_reserved(1)
    assert sum(s["allocated_size"] for s in snapshot if s["device"] == 1) == \
        torch.accinte.memory_allocated(1)
    address = tensor.data_ptr()
    del tensor
    _, block = _block_of(address)
    assert block is None or block["state"] == "inactive"


def test_memory_snapshot_shows_a_block_waiting_for_another_stream():
    """A block freed while a stream that used it is still busy is
    "active_pending_free" until that stream's work is over."""
    from torch_accinte import _C

    side = torch.accinte.Stream(device=0)
    tensor = torch.empty(1000, dtype=torch.uint8, device="accinte")
    address = tensor.data_ptr()
    with torch.accinte.stream(side):
        gate = _C._testing.StreamGate(0, 30.0)
    try:
        tensor.record_stream(side)
        del tensor
        segment, block = _block_of(address)
        assert block["state"] == "active_pending_free"
        # NB: active, but no longer allocated.
        assert segment["active_size"] - segment["allocated_size"] >= block["size"]
    finally:
        gate.open()
    side.synchronize()
    torch.accinte.empty_cache()  # NB: also returns the block to its pool
    _, block = _block_of(address)
    assert block is None or block["state"] == "inactive"


def test_host_memory_stats_count_pinned_blocks():
    torch.accinte.init()
    assert torch.accinte.host_memory_stats() == \
        dict(_flatten_like(torch.accinte.host_memory_stats_as_nested_dict()))
    # NB: pinned blocks that earlier tests freed while a copy still used
    # them return to the cache at the next allocation; let that happen now,
    # so that it does not change the counts below.
    torch.accinte.synchronize()
    torch.empty(1).pin_memory()
    before = torch.accinte.host_memory_stats()["active_requests.current"]
    pinned = torch.empty(1000).pin_memory()
    stats = torch.accinte.host_memory_stats()
    assert stats["active_requests.current"] == before + 1
    assert stats["allocations.current"] >= 1
    assert stats["allocated_bytes.current"] >= 4000
    del pinned
    assert torch.accinte.host_memory_stats()["active_requests.current"] == before
    torch.accinte.reset_accumulated_host_memory_stats()
    stats = torch.accinte.host_memory_stats()
    assert stats["active_requests.allocated"] == 0
    assert stats["active_requests.freed"] == 0
    torch.accinte.reset_peak_host_memory_stats()
    stats = torch.accinte.host_memory_stats()
    assert stats["active_requests.peak"] == stats["active_requests.current"]


def _flatten_like(nested, prefix=""):
    for key, value in nested.items():
        name = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            yield from _flatten_like(value, name)
        else:
            yield name, value


def test_caching_allocator_alloc_and_delete():
    before = torch.accinte.memory_allocated(1)
    address = torch.accinte.caching_allocator_alloc(1000, device=1)
    assert isinstance(address, int) and address != 0
    assert torch.accinte.memory_allocated(1) == before + 1024
    _, block = _block_of(address)
    assert block["state"] == "active_allocated"
    torch.accinte.caching_allocator_delete(address)
    assert torch.accinte.memory_allocated(1) == before
    with pytest.raises(RuntimeError, match="invalid device pointer"):
        torch.accinte.caching_allocator_delete(address)
    with pytest.raises(TypeError, match="stream"):
        torch.accinte.caching_allocator_alloc(8, stream=3)
    side = torch.accinte.Stream(device=1)
    address = torch.accinte.caching_allocator_alloc(8, device=1, stream=side)
    segment, _ = _block_of(address)
    assert segment["device"] == 1
    torch.accinte.caching_allocator_delete(address)


def test_device_memory_used_and_allocator_backend():
    free, total = torch.accinte.mem_get_info()
    keep = torch.empty(4 * MiB, dtype=torch.uint8, device="accinte")
    used = torch.accinte.device_memory_used()
    assert used == total - torch.accinte.mem_get_info()[0]
    assert used >= torch.accinte.memory_reserved()
    del keep
    assert torch.accinte.get_allocator_backend() == "native"


def test_memory_submodule():
    from torch.accinte.memory import memory_stats, set_per_process_memory_fraction

    assert memory_stats is torch.accinte.memory_stats
    assert set_per_process_memory_fraction is torch.accinte.set_per_process_memory_fraction
    # NB: CUDA's names, but for the pluggable allocator named after the device.
    theirs = set(torch.cuda.memory.__all__) - {"CUDAPluggableAllocator"}
    assert set(torch.accinte.memory.__all__) - {"AccintePluggableAllocator"} <= theirs
    assert "CUDAPluggableAllocator" in torch.cuda.memory.__all__


def test_caching_allocator_disabled_allocates_straight_from_the_device():
    torch.accinte.init()
    torch.accinte.empty_cache()
    reserved = torch.accinte.memory_reserved()
    device_allocs = torch.accinte.memory_stats()["num_device_alloc"]
    free_before = torch.accinte.mem_get_info()[0]
    with torch.accinte.caching_allocator_disabled():
        tensor = torch.empty(MiB, dtype=torch.uint8, device="accinte")
        # Not from a segment of the cache: the device lends exactly what
        # the tensor needs, and the allocator's statistics do not see it.
        assert torch.accinte.memory_reserved() == reserved
        assert torch.accinte.memory_stats()["num_device_alloc"] == device_allocs
        assert torch.accinte.mem_get_info()[0] < free_before
        assert _block_of(tensor.data_ptr()) == (None, None)
        del tensor
        assert torch.accinte.mem_get_info()[0] == free_before
        address = torch.accinte.caching_allocator_alloc(64)
        torch.accinte.caching_allocator_delete(address)
    cached = torch.empty(MiB, dtype=torch.uint8, device="accinte")
    assert torch.accinte.memory_reserved() > reserved
    del cached
    torch.accinte.empty_cache()


def test_caching_allocator_enable_switches_the_cache():
    torch.accinte.init()
    try:
        torch.accinte.caching_allocator_enable(False)
        reserved = torch.accinte.memory_reserved()
        tensor = torch.empty(MiB, dtype=torch.uint8, device="accinte")
        assert torch.accinte.memory_reserved() == reserved
        del tensor
    finally:
        torch.accinte.caching_allocator_enable()
    tensor = torch.empty(MiB, dtype=torch.uint8, device="accinte")
    assert _block_of(tensor.data_ptr())[1]["state"] == "active_allocated"


def test_list_gpu_processes_names_this_process():
    import os
    import re

    keep = torch.empty(4 * MiB, dtype=torch.uint8, device="accinte:1")
    report = torch.accinte.list_gpu_processes(1)
    lines = report.splitlines()
    assert lines[0] == "GPU:1"
    match = re.fullmatch(r"process +(\d+) uses +([\d.]+) MB GPU memory", lines[1])
    assert match and int(match[1]) == os.getpid()
    assert float(match[2]) == pytest.approx(
        torch.accinte.device_memory_used(1) / MiB, abs=1e-3)
    assert len(lines) == 2
    del keep


def test_list_gpu_processes_does_not_initialize_the_device():
    from conftest import run_python

    result = run_python(
        """
        import torch, torch_accinte
        print(torch.accinte.list_gpu_processes())
        print(torch.accinte.is_initialized())
        """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["GPU:0", "no processes are running", "False"]
