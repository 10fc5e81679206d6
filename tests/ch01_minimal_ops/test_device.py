"""Chapter 01: the device module, the guard, torch.accelerator, errors."""

import gc
import os
import threading
import time

import pytest
import torch
import torch_accinte  # noqa: F401
from conftest import only_before, run_python
from torch_accinte import _C


def test_device_module_is_registered():
    assert torch.accinte.is_available()
    assert torch.accinte.device_count() == 2
    assert torch.device("accinte").type == "accinte"
    assert torch._C._get_privateuse1_backend_name() == "accinte"


def test_current_and_set_device():
    assert torch.accinte.current_device() == 0
    torch.accinte.set_device(1)
    try:
        assert torch.accinte.current_device() == 1
        assert torch.empty(3, device="accinte").device == torch.device("accinte:1")
    finally:
        torch.accinte.set_device(0)
    assert torch.empty(3, device="accinte").device == torch.device("accinte:0")


def test_device_context_manager_restores():
    with torch.accinte.device(1):
        assert torch.accinte.current_device() == 1
        with torch.accinte.device("accinte:0"):
            assert torch.accinte.current_device() == 0
        assert torch.accinte.current_device() == 1
    assert torch.accinte.current_device() == 0


def test_device_context_manager_restores_after_set_device_inside():
    # The body moving to the very device the block selected must not stop
    # the exit from restoring the device of entry.
    with torch.accinte.device(1):
        torch.accinte.set_device(1)
    assert torch.accinte.current_device() == 0
    with torch.accinte.device(1):
        torch.accinte.set_device(0)
    assert torch.accinte.current_device() == 0


def test_stream_context_manager_restores_device_and_stream():
    on_one = torch.accinte.Stream(device=1)
    with torch.accinte.stream(on_one) as entered:
        assert entered is on_one
        assert torch.accinte.current_device() == 1   # as torch.cuda.stream
        assert torch.accinte.current_stream(1) == on_one
        assert torch.accinte.current_stream(0).stream_id == 0
    assert torch.accinte.current_device() == 0
    assert torch.accinte.current_stream(1).stream_id == 0
    on_zero = torch.accinte.Stream(device=0)
    with torch.accinte.stream(on_zero):
        torch.accinte.set_device(1)
    assert torch.accinte.current_device() == 0
    assert torch.accinte.current_stream(0).stream_id == 0
    with torch.accinte.stream(None) as nothing:
        assert nothing is None
    assert torch.accinte.current_device() == 0


def test_device_properties():
    properties = torch.accinte.get_device_properties(1)
    assert "AccInte" in properties.name
    assert properties.total_memory == 8 * 1024**3
    assert torch.accinte.get_device_name(0) == torch.accinte.get_device_properties(0).name
    assert torch.accinte.get_device_capability() == (properties.major, properties.minor)


def test_generated_methods():
    cpu = torch.arange(6.0).reshape(2, 3)
    on_device = cpu.accinte()
    assert on_device.is_accinte and not cpu.is_accinte
    assert on_device.device == torch.device("accinte:0")
    assert cpu.accinte(1).device == torch.device("accinte:1")
    module = torch.nn.Linear(3, 2).accinte()
    assert module.weight.device.type == "accinte"
    storage = cpu.untyped_storage().accinte()
    assert storage.is_accinte and storage.device.type == "accinte"
    # The storage holds the tensor's bytes, on the device and back.
    on_storage = torch.empty(0, device="accinte").set_(storage).view(2, 3)
    torch.testing.assert_close(on_storage.cpu(), cpu)
    torch.testing.assert_close(torch.empty(0).set_(storage.cpu()).view(2, 3), cpu)


def test_accelerator_api():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("accinte")
    assert torch.accelerator.device_count() == 2
    assert torch.accelerator.current_device_index() == 0
    torch.accelerator.set_device_index(1)
    try:
        assert torch.accelerator.current_device_index() == 1
        assert torch.accinte.current_device() == 1
    finally:
        torch.accelerator.set_device_index(0)
    with torch.accelerator.device_index(1):
        assert torch.accinte.current_device() == 1
    assert torch.accinte.current_device() == 0
    torch.accelerator.synchronize()
    torch.accelerator.synchronize(1)


def test_streams_and_current_stream():
    default = torch.accelerator.current_stream()
    assert default.device == torch.device("accinte:0")
    assert default.stream_id == 0
    assert torch.accinte.default_stream(0) == default
    stream = torch.Stream(device="accinte:1", priority=-1)
    assert stream.device == torch.device("accinte:1") and stream.stream_id != 0
    with stream:
        assert torch.accelerator.current_stream(1) == stream
        moved = torch.arange(100.0).to("accinte:1", non_blocking=True)
    assert torch.accelerator.current_stream(1).stream_id == 0
    stream.synchronize()
    assert stream.query()
    torch.testing.assert_close(moved.cpu(), torch.arange(100.0))
    with torch.accinte.stream(torch.accinte.Stream(0)) as s:
        assert isinstance(s, torch.Stream)
        assert torch.accinte.current_stream() == s
    event = torch.accinte.Event(enable_timing=True)
    event.record()
    event.synchronize()
    assert isinstance(event, torch.Event) and event.device == torch.device("accinte:0")


def test_wait_event_orders_two_streams():
    first = torch.Stream(device="accinte:0")
    second = torch.Stream(device="accinte:0")
    host = torch.arange(1 << 16, dtype=torch.float32)
    source = host.to("accinte")
    middle = torch.zeros_like(host).to("accinte")
    final = torch.zeros_like(host).to("accinte")
    with first:
        gate = _C._testing.StreamGate(0, timeout_seconds=30.0)
        middle.copy_(source)   # queued on first, behind the gate
        written = torch.Event(device="accinte")
        written.record(first)
    second.wait_event(written)
    with second:
        final.copy_(middle)    # device to device: never waits on the host
    try:
        # Without the wait, second would already have copied the zeros.
        assert not first.query() and not second.query()
    finally:
        gate.open()
    second.synchronize()
    assert written.query()
    torch.testing.assert_close(final.cpu(), host)


def test_elapsed_time_covers_what_the_stream_waited_for():
    # The events are causally at least `pause` apart: start has completed
    # before the host begins to wait, and end cannot complete before the
    # gate between them opens.
    pause = 0.2
    stream = torch.Stream(device="accinte:0")
    start = torch.Event(device="accinte", enable_timing=True)
    end = torch.Event(device="accinte", enable_timing=True)
    with stream:
        start.record(stream)
        gate = _C._testing.StreamGate(0, timeout_seconds=30.0)
        end.record(stream)
    start.synchronize()
    time.sleep(pause)
    gate.open()
    end.synchronize()
    assert start.elapsed_time(end) >= pause * 1000 * 0.99
    assert end.elapsed_time(start) <= -pause * 1000 * 0.99


def test_events_need_timing_and_a_record():
    end = torch.Event(device="accinte", enable_timing=True)
    end.record()
    end.synchronize()
    untimed = torch.Event(device="accinte")
    untimed.record()
    untimed.synchronize()
    with pytest.raises(ValueError, match="enable_timing"):
        untimed.elapsed_time(end)


def test_memory_statistics_through_accelerator():
    # NB: tensors of earlier tests still held by reference cycles (an
    # exception's traceback) must not be freed in the middle of the counts.
    gc.collect()
    torch.accelerator.synchronize()
    before = torch.accelerator.memory_allocated(0)
    torch.accelerator.reset_peak_memory_stats(0)
    tensor = torch.empty(1024, dtype=torch.float64, device="accinte:0")
    assert torch.accelerator.memory_allocated(0) == before + 8192
    assert torch.accelerator.max_memory_allocated(0) >= before + 8192
    assert torch.accelerator.memory_reserved(0) >= torch.accelerator.memory_allocated(0)
    stats = torch.accelerator.memory_stats(0)
    assert stats["allocated_bytes.all.current"] == before + 8192
    del tensor
    assert torch.accelerator.memory_allocated(0) == before
    assert torch.accelerator.max_memory_allocated(0) >= before + 8192
    torch.accelerator.empty_cache()


@pytest.mark.parametrize("index", [2, 7, 100])
def test_invalid_device_index_is_a_clean_error(index):
    with pytest.raises(RuntimeError, match="invalid device index"):
        torch.empty(2, device=f"accinte:{index}")
    with pytest.raises(RuntimeError, match="invalid device index"):
        torch.accinte.set_device(index)
    with pytest.raises(RuntimeError, match="invalid device index"):
        torch.ones(2).to(f"accinte:{index}")
    with pytest.raises(RuntimeError, match="invalid device index"):
        torch.accelerator.set_device_index(index)
    # The process is still usable and nothing moved.
    assert torch.accinte.current_device() == 0
    torch.testing.assert_close(torch.ones(2).to("accinte").cpu(), torch.ones(2))


def test_each_thread_keeps_its_own_current_device():
    barrier = threading.Barrier(4)
    seen = {}

    def work(thread_index):
        device = thread_index % 2
        torch.accinte.set_device(device)
        barrier.wait()  # every thread has set its device before any checks
        values = torch.arange(1000.0) * thread_index
        moved = values.to("accinte")
        seen[thread_index] = (torch.accinte.current_device(), moved.device.index,
                              torch.equal(moved.cpu(), values))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {i: (i % 2, i % 2, True) for i in range(4)}
    assert torch.accinte.current_device() == 0


def test_out_of_memory_is_an_error_and_recoverable():
    result = run_python(
        """
        import torch, torch_accinte
        try:
            torch.empty(80 * 2**20, dtype=torch.uint8, device="accinte")
        except torch.OutOfMemoryError as error:
            print("OOM:", error)
        small = torch.ones(1000).to("accinte")
        assert torch.equal(small.cpu(), torch.ones(1000))
        big = torch.empty(40 * 2**20, dtype=torch.uint8, device="accinte")
        del big
        again = torch.empty(40 * 2**20, dtype=torch.uint8, device="accinte")
        print("RECOVERED")
        """,
        env={"ACCINTE_DEVICE_MEMORY": "64M"},
    )
    assert result.returncode == 0, result.stderr
    assert "OOM: accinte out of memory" in result.stdout
    assert "ACCINTE_DEVICE_MEMORY" in result.stdout
    assert "RECOVERED" in result.stdout


@pytest.mark.parametrize("variable,value", [("ACCINTE_DEVICE_COUNT", "99"),
                                            ("ACCINTE_DEVICE_COUNT", "two"),
                                            ("ACCINTE_DEVICE_MEMORY", "8X")])
def test_bad_configuration_is_reported(variable, value):
    result = run_python(
        """
        import torch, torch_accinte
        print("available:", torch.accinte.is_available())
        try:
            torch.empty(1, device="accinte")
        except RuntimeError as error:
            print("ERROR:", error)
        """,
        env={variable: value},
    )
    assert result.returncode == 0, result.stderr
    assert "available: False" in result.stdout
    assert "ERROR:" in result.stdout and variable in result.stdout


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_use_after_fork_is_refused():
    torch.ones(2).to("accinte")  # the device is initialized in this process
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_end)
        report = []
        report.append(str(torch.accinte._is_in_bad_fork()))
        for action in (lambda: torch.ones(2).to("accinte"),
                       lambda: torch.accinte._lazy_init()):
            try:
                action()
                report.append("no error")
            except RuntimeError as error:
                report.append("fork" in str(error))
        os.write(write_end, repr(report).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        report = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert report == "['True', True, True]"
    assert not torch.accinte._is_in_bad_fork()


def os_threads():
    return len(os.listdir("/proc/self/task"))


def test_streams_come_from_a_bounded_pool():
    # Each emulator stream owns a worker thread: a stream per request would
    # grow the process without bound (500 calls once left 502 threads).
    torch.accinte.Stream(0)
    torch.accinte.Stream(1, priority=-2)
    before = os_threads()
    created = set()
    for index in range(500):
        for stream in (torch.Stream(device="accinte"), torch.accinte.Stream(1, priority=-1),
                       torch.accinte.Stream(index % 2, priority=-2)):
            created.add((stream.device_index, stream.stream_id))
    # Three priority levels of 8 streams on each of two devices, at most.
    assert len(created) <= 3 * 8 * 2
    assert os_threads() - before <= 3 * 8 * 2


def test_stream_without_an_index_is_on_the_current_device():
    assert torch.Stream(device="accinte").device == torch.device("accinte:0")
    with torch.accinte.device(1):
        stream = torch.Stream(device="accinte")
        assert stream.device == torch.device("accinte:1")
        assert torch.accelerator.current_stream().device == torch.device("accinte:1")


def test_record_stream_reaches_the_allocator():
    x = torch.ones(3).to("accinte")
    x.record_stream(torch.accinte.Stream(0))  # accepted: no NotImplementedError
    x.record_stream(torch.accinte.current_stream())
    with pytest.raises(RuntimeError, match="record_stream: the tensor is on accinte:0"):
        x.record_stream(torch.accinte.Stream(1))
    with pytest.raises(RuntimeError, match="expected an accinte stream"):
        x.record_stream(torch.Stream(device="cpu"))


def test_a_failed_kernel_reports_its_own_message():
    _C._testing.launch_failing_kernel(0, "the kernel saw a bad descriptor")
    # A later, unrelated synchronize reports it: the message ties it back.
    with pytest.raises(RuntimeError,
                       match="accinteErrorLaunchFailure.*the kernel saw a bad descriptor"):
        torch.accinte.synchronize()
    # Reported once, then the device is usable again.
    torch.accinte.synchronize()
    torch.testing.assert_close(torch.ones(3).to("accinte").cpu(), torch.ones(3))


def test_lazy_clone_materializes_on_the_current_stream():
    # Materializing a lazy (copy-on-write) clone copies through the
    # allocator's copy_data, which must be ordered after the work queued on
    # the current stream, not only after the default stream.
    x = torch.arange(8.0).to("accinte")
    negated = (-torch.arange(8.0)).to("accinte")
    side = torch.accinte.Stream(0)
    with torch.accinte.stream(side):
        # A gate that gives up by itself, since the copy below waits for it.
        _C._testing.StreamGate(0, timeout_seconds=1.0)
        x.copy_(negated)                   # queued behind the gate
        y = torch._lazy_clone(x)
        y[0].copy_(torch.tensor(100.0))    # the write materializes y
    side.synchronize()
    expected = -torch.arange(8.0)
    torch.testing.assert_close(x.cpu(), expected)
    expected[0] = 100.0
    torch.testing.assert_close(y.cpu(), expected)


@only_before("02_fallback")
def test_operator_without_kernel_names_the_fallback_chapter():
    x = torch.ones(3).to("accinte")
    with pytest.raises(NotImplementedError, match=r"aten::add.*02_fallback"):
        x + 2


@only_before("07_memory")
def test_pinned_memory_names_chapter_07():
    with pytest.raises(RuntimeError, match="07_memory"):
        torch.ones(4).pin_memory()


@only_before("08_generator")
def test_generator_names_chapter_08():
    with pytest.raises(RuntimeError, match="08_generator"):
        torch.Generator(device="accinte")
