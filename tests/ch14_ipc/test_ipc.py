"""Chapter 14: accinte tensors through ``torch.multiprocessing``.

A consumer process (``ipc_worker.serve``, started with ``spawn`` from the
hermetic interpreter) receives tensors on a Queue and answers with what it
sees. What is covered: values, dtypes, views (offset and strides),
Parameters and devices arrive intact; both processes use the same memory;
the consumer's reads wait for the producer's pending writes; the producer
keeps a sent block from the caching allocator until the consumer releases
it, and the release waits for the consumer's own pending work; a received
tensor cannot be sent on; storages do not travel alone; ``Process``
arguments, Pipes and ``forkserver``; and a producer that exits with a tensor
still in the queue.
"""

import gc
import multiprocessing
import multiprocessing.spawn
from multiprocessing.reduction import ForkingPickler

import ipc_worker
import pytest
import torch
import torch.multiprocessing as mp
from conftest import hermetic_python
from torch_accinte import _C

#: Longer than any request needs; a hang fails instead of blocking pytest.
TIMEOUT = 60


@pytest.fixture(scope="module")
def hermetic_children():
    """Children start from the hermetic interpreter (an installed copy of
    the package must not change what they load)."""
    previous = multiprocessing.spawn.get_executable()
    multiprocessing.spawn.set_executable(hermetic_python())
    yield
    multiprocessing.spawn.set_executable(previous)


class Consumer:
    """The consumer process, one per module, and its two queues."""

    def __init__(self, context):
        self.requests = context.Queue()
        self.replies = context.Queue()
        self.process = context.Process(
            target=ipc_worker.serve, args=(self.requests, self.replies))
        self.process.start()

    def call(self, name, *args):
        """Runs ``name`` in the consumer; its result, or raises its error."""
        self.requests.put((name, args))
        ok, value = self.replies.get(timeout=TIMEOUT)
        if not ok:
            raise RuntimeError(value)
        return value

    def stop(self):
        self.requests.put(None)
        self.process.join(TIMEOUT)
        assert self.process.exitcode == 0


@pytest.fixture(scope="module")
def consumer(hermetic_children):
    server = Consumer(mp.get_context("spawn"))
    yield server
    server.stop()


def sample(shape, dtype=torch.float32):
    values = torch.arange(int(torch.tensor(shape).prod()), dtype=torch.float64)
    return (values.reshape(shape) * 0.5 - 3).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64,
                                   torch.bool, torch.complex64, torch.bfloat16])
def test_values_arrive(consumer, dtype):
    cpu = sample((5, 7), dtype)
    seen = consumer.call("read", cpu.to("accinte"))
    torch.testing.assert_close(seen["values"], cpu)
    assert seen["dtype"] == dtype and seen["device"] == "accinte:0"


def test_views_keep_their_offset_and_strides(consumer):
    base = sample((6, 10)).to("accinte")
    view = base[1::2, 3::3]
    seen = consumer.call("read", view)
    torch.testing.assert_close(seen["values"], view.cpu())
    assert (seen["size"], seen["stride"], seen["storage_offset"]) == (
        tuple(view.size()), view.stride(), view.storage_offset())
    # The whole storage travels, not just the view's elements, as on CUDA.
    assert seen["storage_nbytes"] == base.untyped_storage().nbytes()


def test_views_of_one_storage_share_it_on_arrival(consumer):
    base = sample((4, 4)).to("accinte")
    seen, storages = consumer.call("read_many", [base, base[1], base.t()])
    assert storages == 1
    torch.testing.assert_close(seen[2]["values"], base.t().cpu())


def test_tensors_of_one_segment_arrive_as_their_own_storages(consumer):
    # Two small tensors share a segment of the caching allocator: one handle,
    # two offsets.
    a, b = sample((8,)).to("accinte"), (sample((8,)) + 100).to("accinte")
    seen, storages = consumer.call("read_many", [a, b])
    assert storages == 2
    torch.testing.assert_close(seen[0]["values"], a.cpu())
    torch.testing.assert_close(seen[1]["values"], b.cpu())


def test_parameters_and_requires_grad(consumer):
    parameter = torch.nn.Parameter(sample((3,)).to("accinte"))
    seen = consumer.call("read", parameter)
    assert seen["type"] == "Parameter" and seen["requires_grad"]
    leaf = sample((3,)).to("accinte").requires_grad_()
    assert consumer.call("read", leaf)["requires_grad"]
    with pytest.raises(RuntimeError, match="non-leaf tensor which requires_grad"):
        ForkingPickler.dumps(leaf * 2)


def test_device_and_empty_tensors(consumer):
    on_one = sample((3, 3)).to("accinte:1")
    seen = consumer.call("read", on_one)
    assert seen["device"] == "accinte:1"
    torch.testing.assert_close(seen["values"], on_one.cpu())
    empty = consumer.call("read", torch.empty(0, 4, device="accinte"))
    assert empty["size"] == (0, 4) and empty["device"] == "accinte:0"


def test_both_processes_use_the_same_memory(consumer):
    tensor = torch.zeros(16, device="accinte")
    consumer.call("add_one", tensor[4:])
    expected = torch.zeros(16)
    expected[4:] = 1
    torch.testing.assert_close(tensor.cpu(), expected)


def test_consumer_waits_for_the_producers_pending_writes(consumer):
    # The write is still queued behind a closed gate when the tensor is
    # sent: without the event the consumer would read zeros.
    tensor = torch.zeros(1 << 16, device="accinte")
    gate = _C._testing.StreamGate(0, 1.0)
    tensor.fill_(7)
    seen = consumer.call("read", tensor)
    gate.open()
    torch.testing.assert_close(seen["values"], torch.full((1 << 16,), 7.0))


def test_release_waits_for_the_consumers_pending_work(consumer):
    tensor = torch.zeros(1 << 16, device="accinte")
    consumer.call("write_late_then_drop", [tensor], 5.0)
    torch.testing.assert_close(tensor.cpu(), torch.full((1 << 16,), 5.0))


def test_producer_keeps_sent_memory_until_the_consumer_releases_it(consumer):
    gc.collect()
    torch.accinte.ipc_collect()
    torch.accinte.empty_cache()
    before = torch.accinte.memory_allocated()
    tensor = torch.ones(1 << 18, device="accinte")  # 1 MiB, its own block
    address = tensor.data_ptr()
    consumer.call("hold", "kept", tensor)
    del tensor
    # Still held for the consumer: the block is not free, and a new tensor
    # of the same size gets other memory.
    torch.accinte.ipc_collect()
    held = torch.accinte.memory_allocated()
    assert held > before
    other = torch.full((1 << 18,), 3.0, device="accinte")
    assert other.data_ptr() != address
    del other
    consumer.call("release", "kept")
    torch.accinte.ipc_collect()
    # NB: relative to `held`: a small tensor of an earlier test that the
    # consumer released late may be collected here too, and only lowers it.
    assert torch.accinte.memory_allocated() <= held - (1 << 20)


#: What may replace the memory of a sent tensor's storage while the tensor
#: lives on: how FSDP frees a parameter between uses, a resize that grows the
#: storage, and a C++ extension's set_data_ptr.
STORAGE_CHANGES = {
    "resize_(0)": lambda tensor: tensor.untyped_storage().resize_(0),
    "growing resize_": lambda tensor: tensor.untyped_storage().resize_(2 << 20),
    "set_data_ptr": lambda tensor: _C._testing.replace_storage_bytes(tensor),
}


@pytest.mark.parametrize("change", list(STORAGE_CHANGES))
def test_sent_memory_outlives_the_storage_that_lets_it_go(consumer, change):
    # The memory a consumer maps is the producer's until the consumer
    # releases it, whatever the producer's storage holds by then (CUDA ties
    # the send to the memory, not to the storage; on the CPU the consumer
    # keeps the shared file).
    gc.collect()
    torch.accinte.ipc_collect()
    tensor = torch.full((1 << 18,), 1.0, device="accinte")  # 1 MiB
    address = tensor.data_ptr()
    consumer.call("hold", "kept", tensor)
    allocated = torch.accinte.memory_allocated()
    STORAGE_CHANGES[change](tensor)
    now = tensor.untyped_storage().nbytes()
    # The sent block stays allocated beside the storage's new bytes...
    assert torch.accinte.memory_allocated() == allocated + now
    # ... so the producer's next tensors get other memory, and the consumer
    # still reads what was sent.
    others = [torch.full((1 << 18,), 99.0, device="accinte") for _ in range(3)]
    assert address not in [other.data_ptr() for other in others]
    seen = consumer.call("read_held", "kept")
    torch.testing.assert_close(seen["values"], torch.full((1 << 18,), 1.0))
    if now > 0:
        # The storage's new memory travels too.
        seen = consumer.call("read", tensor)
        torch.testing.assert_close(seen["values"], torch.full((1 << 18,), 1.0))
    del others
    consumer.call("release", "kept")
    torch.accinte.ipc_collect()
    # Released, the block goes back to the allocator. NB: at most, as in
    # test_producer_keeps_sent_memory_until_the_consumer_releases_it.
    assert torch.accinte.memory_allocated() <= allocated - (1 << 20) + now


def test_record_stream_holds_a_sent_block_too(consumer):
    # Once sent, a storage holds its block through a DataPtr of chapter 14's;
    # the caching allocator must still find the block (by address, as
    # CUDA's does) and hold it for the other stream.
    n = 1 << 16
    tensor = torch.full((n,), 1.0, device="accinte")
    consumer.call("read", tensor)  # released by the consumer before it answers
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
        torch.accinte.ipc_collect()
        after = torch.accinte.memory_stats()
        # No longer allocated, but still active: it waits for side.
        assert (before["allocated_bytes.all.current"]
                - after["allocated_bytes.all.current"] == n * 4)
        assert after["active_bytes.all.current"] == before["active_bytes.all.current"]
        other = torch.empty(n, device="accinte")
        assert other.data_ptr() != pointer
        other.fill_(99.0)
    finally:
        gate.open()
    side.synchronize()
    torch.testing.assert_close(result.cpu(), torch.full((n,), -1.0))


def test_out_of_memory_collects_what_every_consumer_released(consumer):
    # A sent block that the consumer released waits for a collection; an
    # allocation that fits only in that block collects it (chapter 07's
    # free-memory callbacks, as CUDA's allocator calls its IPC collection)
    # instead of raising out of memory.
    gc.collect()
    torch.accinte.ipc_collect()
    tensor = torch.full((16 << 20,), 1.0, device="accinte")  # 64 MiB
    consumer.call("hold", "kept", tensor)
    del tensor
    consumer.call("release", "kept")  # released, not yet collected
    torch.accinte.empty_cache()
    reserved = torch.accinte.memory_reserved()
    total = torch.accinte.mem_get_info()[1]
    fraction = torch.accinte.get_per_process_memory_fraction(0)
    # Room for half the tensor more: a new 64 MiB segment does not fit.
    torch.accinte.set_per_process_memory_fraction((reserved + (32 << 20)) / total, 0)
    try:
        again = torch.full((16 << 20,), 2.0, device="accinte")
    finally:
        torch.accinte.set_per_process_memory_fraction(fraction, 0)
    assert torch.accinte.memory_reserved() == reserved
    torch.testing.assert_close(again.cpu(), torch.full((16 << 20,), 2.0))


def test_a_received_tensor_cannot_be_sent_on(consumer):
    with pytest.raises(RuntimeError, match="received from another process and "
                       "cannot be sent on"):
        consumer.call("resend", torch.ones(4, device="accinte"))


def test_a_tensor_made_by_the_consumer_comes_back(consumer):
    # The other direction: the child is the producer, and its result is
    # computed behind a gate when it is sent.
    values = sample((64,))
    result = consumer.call("make", values, "accinte:1")
    assert result.device == torch.device("accinte:1")
    torch.testing.assert_close(result.cpu(), values * 2)


def test_storages_travel_only_inside_tensors():
    with pytest.raises(RuntimeError, match="Cannot pickle accinte storage"):
        ForkingPickler.dumps(torch.ones(2, device="accinte").untyped_storage())


def test_a_tensor_sent_to_its_own_process_is_the_same_storage():
    tensor = sample((10,)).to("accinte")
    back = ForkingPickler.loads(ForkingPickler.dumps(tensor))
    assert back.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr()
    torch.accinte.synchronize()
    del tensor, back
    torch.accinte.ipc_collect()


def test_cpu_tensors_still_go_through_pytorchs_reduction():
    cpu = sample((3,))
    assert ForkingPickler.loads(ForkingPickler.dumps(cpu)).equal(cpu)


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_process_arguments(hermetic_children, method):
    context = mp.get_context(method)
    results = context.Queue()
    tensor = sample((3, 5)).to("accinte:1")
    process = context.Process(target=ipc_worker.check_argument,
                              args=(tensor, tensor.cpu(), results))
    process.start()
    assert results.get(timeout=TIMEOUT) == "accinte:1"
    process.join(TIMEOUT)
    assert process.exitcode == 0


def test_pipes(hermetic_children):
    context = mp.get_context("spawn")
    results = context.Queue()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=ipc_worker.receive_from_pipe,
                              args=(receiver, results))
    process.start()
    tensor = sample((7,)).to("accinte")
    sender.send((tensor, tensor.cpu()))
    assert results.get(timeout=TIMEOUT) == "accinte:0"
    process.join(TIMEOUT)
    assert process.exitcode == 0


def test_a_producer_that_exits_with_a_tensor_in_flight(hermetic_children, capfd):
    context = mp.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=ipc_worker.send_and_exit, args=(queue,))
    process.start()
    process.join(TIMEOUT)
    # It ends, cleanly, and says why the tensor it sent may not arrive.
    assert process.exitcode == 0
    assert "exiting before all shared accinte tensors were released" in capfd.readouterr().err
    # The consumer gets a clear error, not a hang or stale memory.
    with pytest.raises(RuntimeError, match="has exited, or freed the tensor"):
        queue.get(timeout=TIMEOUT)


def test_a_device_the_consumer_does_not_have(hermetic_children, monkeypatch):
    monkeypatch.setenv("ACCINTE_DEVICE_COUNT", "1")
    context = mp.get_context("spawn")
    queue, results = context.Queue(), context.Queue()
    process = context.Process(target=ipc_worker.receive_or_report, args=(queue, results))
    process.start()
    tensor = torch.ones(3, device="accinte:1")
    queue.put(tensor)
    reported = results.get(timeout=TIMEOUT)
    process.join(TIMEOUT)
    assert process.exitcode == 0
    assert "RuntimeError: accinte: invalid device index 1" in reported, reported


def test_a_child_trains_the_parents_model_in_place(hermetic_children):
    # PyTorch's Hogwild pattern, unmodified: share_memory(), then
    # torch.multiprocessing.spawn with the model as an argument.
    generator = torch.Generator().manual_seed(0)
    reference = torch.nn.Linear(4, 3)
    model = torch.nn.Linear(4, 3)
    model.load_state_dict(reference.state_dict())
    model.to("accinte").share_memory()
    inputs = torch.randn(8, 4, generator=generator)
    targets = torch.randn(8, 3, generator=generator)
    mp.spawn(ipc_worker.hogwild_train, args=(model, inputs, targets, 3), nprocs=1)
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(reference(inputs), targets).backward()
        optimizer.step()
    torch.testing.assert_close(model.weight.cpu(), reference.weight.detach())
    torch.testing.assert_close(model.bias.cpu(), reference.bias.detach())


def test_tensors_in_flight_cost_no_open_file_each(hermetic_children):
    # More tensors in flight than either process may open files (as a
    # consumer that keeps ~1000 tensors under the default `ulimit -n 1024`):
    # each arrives, and the producer can still open files. CUDA needs no
    # descriptor per tensor either.
    count, limit = 600, 256
    context = mp.get_context("spawn")
    queue, results = context.Queue(), context.Queue()
    held, done = context.Event(), context.Event()
    args = (queue, results, held, done, count, limit)
    producer = context.Process(target=ipc_worker.send_many, args=args)
    consumer = context.Process(target=ipc_worker.hold_many, args=args)
    producer.start()
    consumer.start()
    try:
        reports = dict((report[0], report[1:])
                       for report in (results.get(timeout=120) for _ in range(2)))
    finally:
        done.set()
        held.set()
        producer.join(TIMEOUT)
        consumer.join(TIMEOUT)
    assert reports["consumer"] == (count, [])
    opens, memfds = reports["producer"]
    assert opens == "opens files"
    # What the producer keeps open does not grow with the tensors in flight:
    # one file for its interprocess events, one for its reference counters,
    # one per exported caching allocator segment (one here).
    assert memfds == {"accinte-ipc-event-": 1, "accinte-ipc-counters-": 1,
                      "accinte-ipc-": 1}, memfds
    assert producer.exitcode == 0 and consumer.exitcode == 0
