"""Chapter 07: freed blocks are reused in stream order.

Each test holds a stream with the testing gate, so that work enqueued on it
really is still pending when the host frees and reallocates memory. An
allocator that ignored stream order would hand the pending work's memory to
another stream, whose writes land first: the checked results would be wrong.
Only kernels that run asynchronously on the current stream are used while a
gate is closed (neg, abs, copies, accinte::scaled_add); the CPU fallback
would wait for the held stream.
"""

import threading
import time

import pytest
import torch
import torch_accinte  # noqa: F401
from torch_accinte import _C

N = 4096


def _host_values():
    return torch.arange(N, dtype=torch.float32) - N / 2


def test_a_block_freed_on_a_busy_stream_goes_only_to_that_stream():
    values = _host_values()
    source = values.to("accinte")
    side = torch.accinte.Stream()
    with torch.accinte.stream(side):
        gate = _C._testing.StreamGate(0, 30.0)
        scratch = torch.empty(N, device="accinte")  # allocated on side
        scratch.copy_(source)
        result = torch.neg(scratch)
        pointer = scratch.data_ptr()
        del scratch  # side still has to read it
        # The same stream may take the block at once: its work is ordered.
        again = torch.empty(N, device="accinte")
        same_block = again.data_ptr() == pointer
        again.copy_(source)
        del again
    try:
        assert same_block
        # The default stream runs now; the block must not be its memory.
        other = torch.empty(N, device="accinte")
        assert other.data_ptr() != pointer
        other.copy_(torch.full((N,), 99.0))
    finally:
        gate.open()
    side.synchronize()
    torch.testing.assert_close(result.cpu(), -values)


def test_record_stream_holds_a_block_until_the_other_stream_is_done():
    values = _host_values()
    tensor = values.to("accinte")  # allocated on the default stream
    side = torch.accinte.Stream()
    side.wait_stream(torch.accinte.current_stream())
    with torch.accinte.stream(side):
        gate = _C._testing.StreamGate(0, 30.0)
        result = torch.neg(tensor)
    try:
        tensor.record_stream(side)
        pointer = tensor.data_ptr()
        before = torch.accinte.memory_stats()
        del tensor
        after = torch.accinte.memory_stats()
        # No longer allocated, but still active: it waits for side.
        assert (before["allocated_bytes.all.current"]
                - after["allocated_bytes.all.current"] == N * 4)
        assert after["active_bytes.all.current"] == before["active_bytes.all.current"]
        other = torch.empty(N, device="accinte")
        assert other.data_ptr() != pointer
        other.copy_(torch.full((N,), 99.0))
    finally:
        gate.open()
    side.synchronize()
    torch.testing.assert_close(result.cpu(), -values)
    # Once side is done the block is cached again (at the next allocation).
    del other
    torch.empty(1, device="accinte")
    final = torch.accinte.memory_stats()
    assert final["active_bytes.all.current"] < after["active_bytes.all.current"]


def test_the_allocators_polling_leaves_a_failure_to_the_user():
    # The allocator polls an event on `side` to learn when the block may be
    # reused; the work before that event failed. The poll must neither
    # raise nor take the failure away from the user's own synchronize.
    side = torch.accinte.Stream()
    tensor = torch.empty(N, device="accinte")
    with torch.accinte.stream(side):
        _C._testing.launch_failing_kernel(0, "failed on the side stream")
    tensor.record_stream(side)
    before = torch.accinte.memory_stats()["active_bytes.all.current"]
    del tensor  # held by an event on side
    # NB: each allocation polls the allocator's events; the block leaves the
    # active bytes once the poll has seen the event complete. The deadline
    # only keeps a broken allocator from hanging the test.
    deadline = time.monotonic() + 30
    while (torch.accinte.memory_stats()["active_bytes.all.current"] == before
           and time.monotonic() < deadline):
        torch.empty(1, device="accinte")
        time.sleep(0.001)
    assert torch.accinte.memory_stats()["active_bytes.all.current"] < before
    with pytest.raises(RuntimeError, match="failed on the side stream"):
        side.synchronize()
    side.synchronize()


def test_record_stream_on_the_allocation_stream_changes_nothing():
    tensor = torch.empty(N, device="accinte")
    pointer = tensor.data_ptr()
    tensor.record_stream(torch.accinte.current_stream())
    del tensor
    assert torch.empty(N, device="accinte").data_ptr() == pointer


def test_many_streams_against_cpu():
    # Chains of kernels on three streams, one of them held while the host
    # allocates and frees on all of them; every intermediate is freed while
    # its stream may still be working.
    streams = [torch.accinte.Stream() for _ in range(3)]
    generator = torch.Generator().manual_seed(7)
    inputs = [torch.randn(size, generator=generator)
              for size in (17, 1000, 4096, 70_000, 300_000)]
    on_device = [x.to("accinte") for x in inputs]
    results = []
    with torch.accinte.stream(streams[0]):
        gate = _C._testing.StreamGate(0, 30.0)
    try:
        for step in range(60):
            stream = streams[step % len(streams)]
            index = step % len(inputs)
            with torch.accinte.stream(stream):
                x = on_device[index]
                scaled = torch.ops.accinte.scaled_add(x, x, 0.5 + step)
                negated = torch.neg(scaled)
                del scaled
                out = torch.abs(negated)
                del negated
                copy = torch.empty_like(out)
                copy.copy_(out)
                del out
            results.append((copy, (inputs[index] * (1.5 + step)).abs()))
    finally:
        gate.open()
    torch.accinte.synchronize()
    for actual, expected in results:
        torch.testing.assert_close(actual.cpu(), expected)


def test_timed_events_around_memory_work():
    start = torch.Event(device="accinte:0", enable_timing=True)
    end = torch.Event(device="accinte:0", enable_timing=True)
    side = torch.accinte.Stream()
    with torch.accinte.stream(side):
        assert torch.accelerator.current_stream() == side
        gate = _C._testing.StreamGate(0, 30.0)
        start.record()
        tensor = torch.empty(N, device="accinte")
        tensor.copy_(torch.ones(N).pin_memory(), non_blocking=True)
        end.record()
        assert not end.query()
    gate.open()
    torch.accinte.current_stream().wait_event(end)
    doubled = torch.ops.accinte.scaled_add(tensor, tensor, 1.0)
    end.synchronize()
    assert end.query()
    assert start.elapsed_time(end) >= 0
    torch.testing.assert_close(doubled.cpu(), torch.full((N,), 2.0))


def test_threads_on_their_own_streams_against_cpu():
    # The allocator is called from several host threads at once, each with
    # its own current stream; every thread's results must be its own.
    errors = []

    def work(seed: int) -> None:
        try:
            generator = torch.Generator().manual_seed(seed)
            stream = torch.accinte.Stream()
            with torch.accinte.stream(stream):
                for size in (100, 5000, 70_000, 300, 1_000_000, 64) * 3:
                    values = torch.randn(size, generator=generator)
                    x = values.to("accinte")
                    y = torch.abs(torch.neg(x))
                    del x
                    torch.testing.assert_close(y.cpu(), values.abs())
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
