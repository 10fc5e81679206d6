"""Chapter 07: pinned host memory and asynchronous copies.

The gate holds the current stream, so a copy that returned while its bytes
have not moved yet is observably asynchronous, and its result is checked
once the stream has run.
"""

import pytest
import torch
import torch.utils.data
import torch_accinte  # noqa: F401
from torch_accinte import _C

N = 10_000


def test_pin_memory_and_empty_pin_memory_pin_for_accinte():
    values = torch.arange(N, dtype=torch.float32)
    pinned = values.pin_memory()
    assert pinned.is_pinned() and not values.is_pinned()
    torch.testing.assert_close(pinned, values)
    empty = torch.empty(N, pin_memory=True)
    assert empty.is_pinned()
    assert torch.empty(0, pin_memory=True).numel() == 0


def test_pinned_blocks_are_cached():
    block = torch.empty(N, pin_memory=True)
    pointer = block.data_ptr()
    del block
    # The size rounds up to a power of two; a same-class request reuses it.
    again = torch.empty(N - 10, pin_memory=True)
    assert again.data_ptr() == pointer
    del again
    torch.accelerator.empty_host_cache()


def test_non_blocking_device_to_pinned_copy_lands_after_the_stream_runs():
    values = torch.arange(N, dtype=torch.float32) + 1
    source = values.to("accinte")
    host = torch.zeros(N).pin_memory()
    gate = _C._testing.StreamGate(0, 30.0)
    try:
        host.copy_(source, non_blocking=True)
        assert bool((host == 0).all()), "the copy landed before the stream ran"
    finally:
        gate.open()
    torch.accinte.current_stream().synchronize()
    torch.testing.assert_close(host, values)


def test_an_event_after_a_failed_kernel_fails_before_a_pinned_result_is_read():
    # The idiom of an asynchronous read: copy into pinned memory, record an
    # event, synchronize the event, read the host buffer. If the work before
    # the copy failed, the buffer holds stale values, and the event must say
    # so instead of returning as if the result were there.
    source = torch.arange(N, dtype=torch.float32).to("accinte")
    host = torch.zeros(N).pin_memory()
    _C._testing.launch_failing_kernel(0, "the result was never written")
    host.copy_(source, non_blocking=True)
    copied = torch.accinte.Event()
    copied.record()
    with pytest.raises(RuntimeError, match="the result was never written"):
        copied.synchronize()
    # Reported once; the stream then works as before.
    torch.accinte.synchronize()
    host.copy_(source, non_blocking=True)
    copied.record()
    copied.synchronize()
    torch.testing.assert_close(host, torch.arange(N, dtype=torch.float32))


def test_to_cpu_non_blocking_gives_pinned_memory():
    values = torch.arange(N, dtype=torch.float32)
    moved = values.to("accinte").to("cpu", non_blocking=True)
    assert moved.is_pinned()
    torch.accinte.synchronize()
    torch.testing.assert_close(moved, values)


def test_non_blocking_pinned_to_device_copy_is_enqueued():
    values = torch.arange(N, dtype=torch.float32) * 3
    host = values.pin_memory()
    target = torch.empty(N, device="accinte")
    gate = _C._testing.StreamGate(0, 30.0)
    try:
        target.copy_(host, non_blocking=True)
        # A synchronous copy could only have returned once the stream ran.
        assert not torch.accinte.current_stream().query()
    finally:
        gate.open()
    torch.testing.assert_close(target.cpu(), values)


# NB: chapter 01's asynchronous copies tell the host allocator which
# streams used a pinned block (record_event through recordPinnedMemoryUse).
def test_pinned_block_is_not_reused_while_a_copy_may_use_it():
    values = torch.arange(N, dtype=torch.float32) + 1
    source = values.to("accinte")
    landing = torch.zeros(N).pin_memory()
    gate = _C._testing.StreamGate(0, 30.0)
    try:
        pending = torch.zeros(N).pin_memory()
        pending.copy_(source, non_blocking=True)
        pointer = pending.data_ptr()
        del pending  # the copy into it has not run yet
        fresh = torch.empty(N, pin_memory=True)
        assert fresh.data_ptr() != pointer
        fresh.fill_(-1.0)
        landing.copy_(source, non_blocking=True)
    finally:
        gate.open()
    torch.accinte.synchronize()
    assert bool((fresh == -1.0).all())
    torch.testing.assert_close(landing, values)


def test_dataloader_pins_batches_for_accinte():
    data = torch.arange(24, dtype=torch.float32).reshape(12, 2)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(data), batch_size=4, pin_memory=True)
    seen = []
    for (batch,) in loader:
        assert batch.is_pinned()
        seen.append(batch.to("accinte", non_blocking=True))
    torch.testing.assert_close(torch.cat([b.cpu() for b in seen]), data)


def test_pinning_a_device_tensor_is_an_error():
    with pytest.raises(RuntimeError, match="pin"):
        torch.ones(3, device="accinte").pin_memory()
