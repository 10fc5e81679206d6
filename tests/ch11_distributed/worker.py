"""One rank of a multi-process test of chapter 11.

Run as ``python worker.py CASE RANK WORLD STORE_FILE``; the tests start one
process per rank (see ``test_collectives.py``), or let ``torchrun`` start
them as ``worker.py CASE``. Each rank uses the accinte
device of its rank, joins the group through a file store (no network
address is needed to meet), and gloo talks over loopback. A case checks its
own results against values computed on the CPU and raises on a mismatch; a
clean exit with ``OK CASE`` printed is success.
"""

import datetime
import os
import sys
import time

# NB: before torch_accinte loads the emulator, which reads it once.
os.environ.setdefault("ACCINTE_DEVICE_COUNT", "2")
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch_accinte  # noqa: E402, F401

#: Every collective of a case must end in this time, or the rank fails.
TIMEOUT = datetime.timedelta(seconds=20)
#: The group's timeout in the cases where a rank fails or stalls.
STALL_TIMEOUT = datetime.timedelta(seconds=4)

CASES = {}


def case(function):
    CASES[function.__name__] = function
    return function


def expected_sum(make, world):
    """The sum over ranks of ``make(rank)``, computed on the CPU."""
    return sum(make(rank) for rank in range(world))


def rank_tensor(rank, dtype=torch.float32, shape=(3, 4)):
    """A tensor whose values tell the rank and the element apart."""
    values = torch.arange(torch.Size(shape).numel(), dtype=torch.float64)
    return (values.reshape(shape) + 100 * (rank + 1)).to(dtype)


@case
def all_reduce(rank, world, device):
    for dtype in (torch.float32, torch.float64, torch.int64):
        for op, reference in [
            (dist.ReduceOp.SUM, lambda ts: sum(ts)),
            (dist.ReduceOp.PRODUCT, lambda ts: torch.stack(ts).prod(0)),
            (dist.ReduceOp.MIN, lambda ts: torch.stack(ts).min(0).values),
            (dist.ReduceOp.MAX, lambda ts: torch.stack(ts).max(0).values),
        ]:
            tensor = rank_tensor(rank, dtype).to(device)
            dist.all_reduce(tensor, op=op)
            want = reference([rank_tensor(r, dtype) for r in range(world)])
            torch.testing.assert_close(tensor.cpu(), want.to(dtype))
    tensor = rank_tensor(rank).to(device)
    dist.all_reduce(tensor, op=dist.ReduceOp.AVG)
    torch.testing.assert_close(tensor.cpu(), expected_sum(rank_tensor, world) / world)


@case
def broadcast_and_reduce(rank, world, device):
    for root in range(world):
        tensor = rank_tensor(rank).to(device)
        dist.broadcast(tensor, src=root)
        torch.testing.assert_close(tensor.cpu(), rank_tensor(root))
    tensor = rank_tensor(rank).to(device)
    dist.reduce(tensor, dst=0, op=dist.ReduceOp.SUM)
    if rank == 0:
        torch.testing.assert_close(tensor.cpu(), expected_sum(rank_tensor, world))


@case
def gathers_and_scatters(rank, world, device):
    gathered = [torch.empty(3, 4, device=device) for _ in range(world)]
    dist.all_gather(gathered, rank_tensor(rank).to(device))
    for r, tensor in enumerate(gathered):
        torch.testing.assert_close(tensor.cpu(), rank_tensor(r))

    into = torch.empty(world * 3, 4, device=device)
    dist.all_gather_single(into, rank_tensor(rank).to(device))
    torch.testing.assert_close(into.cpu(), torch.cat([rank_tensor(r) for r in range(world)]))

    full = torch.cat([rank_tensor(rank + 10 * r) for r in range(world)]).to(device)
    chunk = torch.empty(3, 4, device=device)
    dist.reduce_scatter_single(chunk, full, op=dist.ReduceOp.SUM)
    torch.testing.assert_close(
        chunk.cpu(), sum(rank_tensor(r + 10 * rank) for r in range(world)))
    dist.reduce_scatter_single(chunk, full, op=dist.ReduceOp.AVG)
    torch.testing.assert_close(
        chunk.cpu(), sum(rank_tensor(r + 10 * rank) for r in range(world)) / world)
    # NB: MAX too: gloo's own reduce-scatter of one tensor always sums.
    dist.reduce_scatter_single(chunk, full, op=dist.ReduceOp.MAX)
    torch.testing.assert_close(
        chunk.cpu(), torch.stack([rank_tensor(r + 10 * rank) for r in range(world)]).max(0).values)

    # all_to_all_single: rank r sends block b of its input to rank b.
    sent = torch.stack([rank_tensor(rank * world + b, shape=(2,)) for b in range(world)])
    received = torch.empty_like(sent, device=device)
    dist.all_to_all_single(received, sent.to(device))
    want = torch.stack([rank_tensor(b * world + rank, shape=(2,)) for b in range(world)])
    torch.testing.assert_close(received.cpu(), want)
    # ...and with uneven split sizes: rank r sends r + 1 elements to each.
    input_splits = [rank + 1] * world
    output_splits = [r + 1 for r in range(world)]
    sent = torch.full((sum(input_splits),), float(rank), device=device)
    received = torch.empty(sum(output_splits), device=device)
    dist.all_to_all_single(received, sent, output_splits, input_splits)
    want = torch.cat([torch.full((r + 1,), float(r)) for r in range(world)])
    torch.testing.assert_close(received.cpu(), want)


def list_collectives_on(rank, world, where):
    """gather, scatter, reduce_scatter and all_to_all of tensors on
    ``where``; every result, moved to the CPU, by name."""
    results = {}
    for dtype in (torch.float32, torch.int64):
        for root in range(world):
            gathered = [torch.empty(3, 4, dtype=dtype, device=where) for _ in range(world)]
            dist.gather(rank_tensor(rank, dtype).to(where),
                        gathered if rank == root else None, dst=root)
            if rank == root:
                results[f"gather {dtype} to {root}"] = torch.stack(gathered).cpu()
            out = torch.empty(3, 4, dtype=dtype, device=where)
            pieces = [rank_tensor(10 * root + r, dtype).to(where) for r in range(world)]
            dist.scatter(out, pieces if rank == root else None, src=root)
            results[f"scatter {dtype} from {root}"] = out.cpu()
        for name in ("SUM", "MAX", "PRODUCT"):
            out = torch.empty(3, 4, dtype=dtype, device=where)
            dist.reduce_scatter(out, [rank_tensor(rank + 10 * r, dtype).to(where)
                                      for r in range(world)], op=getattr(dist.ReduceOp, name))
            results[f"reduce_scatter {dtype} {name}"] = out.cpu()
        outputs = [torch.empty(2, 3, dtype=dtype, device=where) for _ in range(world)]
        dist.all_to_all(outputs, [rank_tensor(10 * rank + b, dtype, (2, 3)).to(where)
                                  for b in range(world)])
        results[f"all_to_all {dtype}"] = torch.stack(outputs).cpu()
    out = torch.empty(3, 4, device=where)
    dist.reduce_scatter(out, [rank_tensor(rank + 10 * r).to(where) for r in range(world)],
                        op=dist.ReduceOp.AVG if where.type != "cpu" else dist.ReduceOp.SUM)
    results["reduce_scatter AVG"] = out.cpu() / (world if where.type == "cpu" else 1)
    return results


@case
def list_collectives(rank, world, device):
    # The reference is gloo: the same calls on CPU tensors, in the same
    # "cpu:gloo,accinte:accl" group (gloo has no AVG: its reference is SUM
    # divided here). A few values are also checked against the CPU math,
    # so that a reference gone wrong shows too.
    want = list_collectives_on(rank, world, torch.device("cpu"))
    got = list_collectives_on(rank, world, device)
    assert got.keys() == want.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=0, atol=0, msg=name)
    if rank == 0:
        torch.testing.assert_close(got["gather torch.float32 to 0"],
                                   torch.stack([rank_tensor(r) for r in range(world)]))
    torch.testing.assert_close(got["scatter torch.int64 from 1"],
                               rank_tensor(10 + rank, torch.int64))
    torch.testing.assert_close(
        got["reduce_scatter torch.float32 MAX"],
        torch.stack([rank_tensor(r + 10 * rank) for r in range(world)]).max(0).values)
    torch.testing.assert_close(
        got["all_to_all torch.int64"],
        torch.stack([rank_tensor(10 * r + rank, torch.int64, (2, 3)) for r in range(world)]))
    # Uneven lists, which NCCL takes and gloo refuses (so the CPU math is
    # the reference): rank r sends r + b + 1 elements to rank b.
    outputs = [torch.empty(r + rank + 1, device=device) for r in range(world)]
    dist.all_to_all(outputs, [torch.full((rank + b + 1,), 10.0 * rank + b, device=device)
                              for b in range(world)])
    for r, output in enumerate(outputs):
        torch.testing.assert_close(output.cpu(), torch.full((r + rank + 1,), 10.0 * r + rank))
    # Bad input is refused on the caller's thread, naming the collective.
    # NB: rank 0 alone calls accl directly (the group's front end checks
    # less), so nothing is left waiting for a peer that never comes.
    if rank == 0:
        accl = dist.group.WORLD._get_backend(device)
        out, ones = torch.empty(2, device=device), torch.ones(2, device=device)
        for name, call, message in [
            ("scatter list", lambda: accl.scatter([out], [[ones]]),
             "scatter needs one tensor per rank"),
            ("gather size", lambda: accl.gather([[torch.empty(3, device=device)] * world], [ones]),
             "gather needs tensors of the dtype and size of its input"),
            ("all_to_all dtype", lambda: accl.alltoall(
                [out] * world, [ones.long()] + [ones] * (world - 1)),
             "all_to_all needs tensors of one dtype"),
            ("reduce_scatter size", lambda: accl.reduce_scatter([out], [[ones[:1]] * world]),
             "reduce_scatter needs tensors of the dtype and size of its input"),
        ]:
            try:
                call()
            except RuntimeError as error:
                assert message in str(error), (name, str(error))
            else:
                raise AssertionError(f"{name} was accepted")


def coalesced_collectives_on(rank, world, where):
    """The coalesced collectives of tensors on ``where``; their results on
    the CPU, by name."""
    import warnings

    results = {}
    tensors = [rank_tensor(rank).to(where), rank_tensor(rank + 3, shape=(5,)).to(where)]
    with warnings.catch_warnings():  # both are deprecated, and still called
        warnings.simplefilter("ignore")
        dist.all_reduce_coalesced(tensors, op=dist.ReduceOp.MAX)
        results["all_reduce_coalesced"] = [t.cpu() for t in tensors]
        # outputs[r][i] receives rank r's tensors[i].
        outputs = [[torch.empty_like(t) for t in tensors] for _ in range(world)]
        dist.all_gather_coalesced(outputs, tensors)
        results["all_gather_coalesced"] = [t.cpu() for ts in outputs for t in ts]
    # What FSDP and users' code batch: the coalescing manager's fast path.
    from torch.distributed.distributed_c10d import _coalescing_manager

    tensors = [rank_tensor(rank).to(where), rank_tensor(rank + 1, shape=(7,)).to(where)]
    with _coalescing_manager(async_ops=True) as manager:
        for tensor in tensors:
            dist.all_reduce(tensor)
    manager.wait()
    results["all_reduce under the manager"] = [t.cpu() for t in tensors]
    inputs = [rank_tensor(rank).to(where), rank_tensor(rank + 5, shape=(2,)).to(where)]
    # NB: gloo wants the outputs shaped as the inputs stacked along dim 0.
    outputs = [torch.empty(world * t.shape[0], *t.shape[1:], device=where) for t in inputs]
    with _coalescing_manager():
        for output, tensor in zip(outputs, inputs):
            dist.all_gather_single(output, tensor)
    results["all_gather_single under the manager"] = [t.cpu() for t in outputs]
    inputs = [torch.cat([rank_tensor(rank + 10 * r) for r in range(world)]).to(where),
              torch.arange(4 * world, dtype=torch.float32, device=where) * (rank + 1)]
    outputs = [torch.empty(t.shape[0] // world, *t.shape[1:], device=where) for t in inputs]
    with _coalescing_manager():
        for output, tensor in zip(outputs, inputs):
            dist.reduce_scatter_single(output, tensor)
    results["reduce_scatter_single under the manager"] = [t.cpu() for t in outputs]
    return results


@case
def coalesced_collectives(rank, world, device):
    # As list_collectives: gloo on CPU tensors is the reference, and a few
    # values are checked against the CPU math.
    want = coalesced_collectives_on(rank, world, torch.device("cpu"))
    got = coalesced_collectives_on(rank, world, device)
    for name in want:
        assert len(got[name]) == len(want[name]), name
        for mine, theirs in zip(got[name], want[name]):
            torch.testing.assert_close(mine, theirs, rtol=0, atol=0, msg=name)
    torch.testing.assert_close(got["all_reduce_coalesced"][0], rank_tensor(world - 1))
    torch.testing.assert_close(got["all_reduce under the manager"][0],
                               expected_sum(rank_tensor, world))
    torch.testing.assert_close(got["reduce_scatter_single under the manager"][0],
                               sum(rank_tensor(r + 10 * rank) for r in range(world)))


@case
def object_collectives(rank, world, device):
    # Pickled objects travel as byte tensors through the group's backend:
    # gloo in a "cpu:gloo,accinte:accl" group, accl in a group of accl alone.
    objects = [None] * world
    dist.all_gather_object(objects, {"rank": rank})
    assert objects == [{"rank": r} for r in range(world)], objects
    for root in range(world):
        gathered = [None] * world if rank == root else None
        dist.gather_object(("from", rank, "x" * (100 * rank)), gathered, dst=root)
        if rank == root:
            assert gathered == [("from", r, "x" * (100 * r)) for r in range(world)], gathered
        received = [None]
        dist.scatter_object_list(received, [{"to": r, "by": root} for r in range(world)]
                                 if rank == root else None, src=root)
        assert received == [{"to": rank, "by": root}], received
        broadcast = [None, None] if rank != root else [root, list(range(root + 3))]
        dist.broadcast_object_list(broadcast, src=root)
        assert broadcast == [root, list(range(root + 3))], broadcast


@case
def recv_from_any_source(rank, world, device):
    # Rank 0 receives from whichever rank sends; recv() returns its rank,
    # which the Work only knows once the receive ran.
    if rank == 0:
        for _ in range(world - 1):
            tensor = torch.empty(3, 4, device=device)
            source = dist.recv(tensor)
            torch.testing.assert_close(tensor.cpu(), rank_tensor(source))
    else:
        dist.send(rank_tensor(rank).to(device), dst=0)


@case
def point_to_point_and_barrier(rank, world, device):
    if rank == 0:
        dist.send(rank_tensor(7).to(device), dst=1)
        received = torch.empty(3, 4, device=device)
        dist.recv(received, src=1)
        torch.testing.assert_close(received.cpu(), rank_tensor(8))
    elif rank == 1:
        received = torch.empty(3, 4, device=device)
        dist.recv(received, src=0)
        torch.testing.assert_close(received.cpu(), rank_tensor(7))
        dist.send(rank_tensor(8).to(device), dst=0)
    dist.barrier()


@case
def ordering_with_streams(rank, world, device):
    # The collective must read what the current stream wrote before it, even
    # while that stream is held: a device-to-device copy queued behind the
    # testing gate fills the tensor, and the collective may only start once
    # the gate opens. Reading too early would reduce zeros.
    source = torch.full((1024,), float(rank + 1), device=device)
    tensor = torch.zeros(1024, device=device)
    torch.accinte.synchronize()
    gate = torch_accinte._C._testing.StreamGate(device.index, timeout_seconds=30.0)
    try:
        tensor.copy_(source)  # queued behind the gate
        work = dist.all_reduce(tensor, async_op=True)
        assert not work.is_completed()
    finally:
        gate.open()
    work.wait()
    # wait() orders the current stream after the collective: a native kernel
    # queued now reads the reduced values.
    torch.testing.assert_close((-tensor).cpu(), torch.full((1024,), -float(sum(range(1, world + 1)))))
    # A collective launched under a side stream reads that stream's writes.
    side = torch.accinte.Stream()
    with torch.accinte.stream(side):
        other = torch.full((64,), float(rank), device=device)
        dist.all_reduce(other)
        result = other.cpu()
    torch.testing.assert_close(result, torch.full((64,), float(sum(range(world)))))
    # The Work's future completes with the outputs, ordered the same way.
    tensor = rank_tensor(rank).to(device)
    future = dist.all_reduce(tensor, async_op=True).get_future()
    value = future.wait()[0]
    torch.testing.assert_close(value.cpu(), expected_sum(rank_tensor, world))


@case
def collectives_on_two_devices(rank, world, device):
    # One process may call collectives on two devices, and the ranks must
    # pair them in the program's order whatever each device's stream still
    # has queued: x on device 0 with x, then y on device 1 with y, as NCCL
    # (one communicator per device) gives. Earlier work holds device 0 of
    # rank 0 and device 1 of rank 1, so the collective queued on the other
    # device is ready first on each rank: paired by readiness, rank 0's y
    # would meet rank 1's x (both become 101), or the two would deadlock.
    held = torch.device("accinte", rank % 2)
    x = torch.zeros(16, device="accinte:0")
    y = torch.zeros(16, device="accinte:1")
    ones = torch.ones(16, device="accinte:0")
    hundreds = torch.full((16,), 100.0, device="accinte:1")
    torch.accinte.synchronize(0)
    torch.accinte.synchronize(1)
    gate = torch_accinte._C._testing.StreamGate(held.index, timeout_seconds=30.0)
    try:
        # The inputs' values: the copy on the held device is queued behind
        # the gate, the other runs at once.
        x.copy_(ones)
        y.copy_(hundreds)
        work_x = dist.all_reduce(x, async_op=True)
        work_y = dist.all_reduce(y, async_op=True)
        # NB: gives the collective of the free device the time to run first
        # if it can (it can only where collectives are paired by readiness,
        # as they were before the fix); otherwise it waits for its turn.
        free_work = work_y if held.index == 0 else work_x
        deadline = time.monotonic() + 3.0
        while not free_work.is_completed() and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        gate.open()
    work_x.wait()
    work_y.wait()
    torch.testing.assert_close(x.cpu(), torch.full((16,), 1.0 * world))
    torch.testing.assert_close(y.cpu(), torch.full((16,), 100.0 * world))


@case
def bad_input(rank, world, device):
    # NB: the group sends CPU tensors to gloo, so the accl backend is called
    # directly to see what it says of them.
    accl = dist.group.WORLD._get_backend(device)
    cases = {
        "CPU tensor": (lambda: accl.allreduce([torch.ones(2)]).wait(),
                       "collectives take accinte tensors"),
        "non-contiguous": (lambda: dist.all_reduce(torch.ones(4, 4, device=device).t()),
                           "tensors must be dense and contiguous"),
        "two devices": (lambda: dist.all_gather_single(
                            torch.empty(2 * world, device="accinte:0"),
                            torch.ones(2, device="accinte:1")),
                        "the tensors of one collective must be on one device"),
        "wrong output count": (lambda: dist.all_gather([torch.empty(2, device=device)],
                                                       torch.ones(2, device=device)),
                               "allgather needs one output per rank"),
        "wrong output size": (lambda: dist.all_gather_single(
                                  torch.empty(3, device=device), torch.ones(2, device=device)),
                              "all_gather_into_tensor needs an output of"),
        "AVG of integers": (lambda: dist.all_reduce(torch.ones(2, dtype=torch.int64, device=device),
                                                    op=dist.ReduceOp.AVG),
                            "ReduceOp.AVG needs floating-point or complex tensors"),
    }
    for name, (call, message) in cases.items():
        try:
            call()
        except (RuntimeError, ValueError) as error:
            assert message in str(error), (name, str(error))
        else:
            raise AssertionError(f"{name} was accepted")
    # The group is still usable afterwards.
    tensor = torch.ones(2, device=device)
    dist.all_reduce(tensor)
    torch.testing.assert_close(tensor.cpu(), torch.full((2,), float(world)))


@case
def all_reduce_after_a_user_error(rank, world, device):
    # Rank 0 makes a mistake only a kernel can see (a class index out of
    # range). The next read of a result on that stream reports it, once;
    # the collective's stream, which waited for the failed work and which
    # nobody synchronizes, must not hand it to every later collective.
    def user_error():
        scores = torch.zeros(2, 3, device=device).log_softmax(1)
        torch.nn.functional.nll_loss(scores, torch.tensor([0, 7], device=device))

    def expect_error(read, message):
        try:
            read()
        except RuntimeError as error:
            assert message in str(error), str(error)
        else:
            raise AssertionError(f"no error: expected {message!r}")

    if rank == 0:
        user_error()
    tensor = torch.ones(2, device=device)
    dist.all_reduce(tensor)
    # Rank 0's inputs may never have been written: its peers must not read a
    # sum of them as a result, but fail too, naming the rank.
    expect_error(tensor.cpu, "Target 7 is out of bounds" if rank == 0
                 else "ALLREDUCE not run: the inputs of rank(s) 0 may come from failed work")
    for step in range(3):
        tensor = torch.full((2,), float(step + rank), device=device)
        dist.all_reduce(tensor)
        want = sum(float(step + r) for r in range(world))
        torch.testing.assert_close(tensor.cpu(), torch.full((2,), want))
    tensor = torch.ones(2, device=device)
    dist.all_reduce(tensor, async_op=True).wait()
    dist.barrier()
    torch.testing.assert_close(tensor.cpu(), torch.full((2,), float(world)))
    # The same between two ranks: the receiver of stale data fails.
    for stale in (True, False):
        if rank == 0:
            if stale:
                user_error()
            dist.send(torch.full((2,), 5.0, device=device), dst=1)
            if stale:
                expect_error(torch.accinte.synchronize, "Target 7 is out of bounds")
        elif rank == 1:
            received = torch.empty(2, device=device)
            dist.recv(received, src=0)
            if stale:
                expect_error(received.cpu, "recv from rank 0 failed: the data sent may come from "
                             "failed work")
            else:
                torch.testing.assert_close(received.cpu(), torch.full((2,), 5.0))


def train(model, batches, lr):
    """SGD on ``batches`` of (inputs, targets); the model's parameters after."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
    return [p.detach().cpu() for p in model.parameters()]


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 4))


@case
def ddp_matches_one_process(rank, world, device):
    from torch.nn.parallel import DistributedDataParallel

    generator = torch.Generator().manual_seed(1)
    batches = [(torch.randn(8 * world, 8, generator=generator),
                torch.randn(8 * world, 4, generator=generator)) for _ in range(5)]
    # The reference: one process, the whole batch, on the CPU.
    want = train(make_model(), batches, lr=0.1)
    # DDP: each rank takes its share of every batch; small buckets make the
    # reducer run several allreduces per step, overlapped with backward.
    model = DistributedDataParallel(make_model().to(device), device_ids=[device.index],
                                    bucket_cap_mb=0.001)
    share = [(x[rank::world].to(device), y[rank::world].to(device)) for x, y in batches]
    got = train(model, share, lr=0.1)
    for mine, theirs in zip(got, want):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)
    # Every rank ends with the same parameters.
    for parameter in model.parameters():
        copies = [torch.empty_like(parameter) for _ in range(world)]
        dist.all_gather(copies, parameter.detach())
        for copy in copies:
            torch.testing.assert_close(copy.cpu(), parameter.detach().cpu(), rtol=0, atol=0)


@case
def ddp_without_the_default_backend_fix(rank, world, device):
    # Run with the fix of chapter 11 undone (see main()): DDP on a group made
    # with no backend fails exactly on the releases the chapter lists.
    import importlib

    chapter = importlib.import_module("torch_accinte._chapters.11_distributed")
    try:
        ddp_matches_one_process(rank, world, device)
    except RuntimeError as error:
        assert chapter.NEEDS_DEFAULT_BACKEND_FIX, f"torch {torch.__version__}: {error}"
        assert "Could not find backend type" in str(error), str(error)
    else:
        assert not chapter.NEEDS_DEFAULT_BACKEND_FIX, (
            f"torch {torch.__version__} needs no fix, but chapter 11 applies one")


@case
def rank_fails(rank, world, device):
    # Rank 1 leaves before the collective. Rank 0's collective ends with the
    # host backend's error within the group's timeout, never a hang, and the
    # first read of its result reports it instead of returning stale values.
    # NB: rank 1 leaves once rank 0's group is up: leaving earlier could
    # break rank 0's init_process_group, still connecting the backends.
    store = dist.distributed_c10d._get_default_store()
    if rank == 1:
        store.wait(["rank 0 is up"])
        os._exit(3)
    store.set("rank 0 is up", "1")
    tensor = torch.ones(2, device=device)
    dist.all_reduce(tensor)
    try:
        tensor.cpu()
    except RuntimeError as error:
        print("FAILED AS EXPECTED:", str(error).splitlines()[0], flush=True)
        store.set("rank 0 has failed", "1")
        os._exit(4)
    raise AssertionError("the result of a failed collective was read without an error")


@case
def rank_stalls(rank, world, device):
    # Rank 1 stays in the group but never joins the collective: rank 0's
    # ends when the group's timeout expires.
    if rank == 1:
        # NB: rank 1 leaves once rank 0 has reported its failure, or after
        # the worker's own timeout if it never does: it must outlive rank
        # 0's collective, not sleep out a fixed time after it. On a loaded
        # machine rank 0 can take more than twice the group's timeout to
        # fail, and leaving then would change its error from a timeout to
        # a lost peer.
        store = dist.distributed_c10d._get_default_store()
        try:
            store.wait(["rank 0 has failed"], TIMEOUT)
        # NB: a file store's wait times out with a plain RuntimeError
        # ("Wait timeout"), a TCP store's with DistStoreError, a subclass.
        except RuntimeError:
            pass  # rank 0 is gone without saying: it has failed all the same
        os._exit(0)
    rank_fails(rank, world, device)


def main():
    # NB: several cases, comma-separated, run one after the other in one
    # group (the ranks start once: an interpreter per rank costs more than
    # most cases); each prints its own OK. A case that fails ends the run.
    names = sys.argv[1].split(",")
    name = names[0]
    if len(sys.argv) == 2:  # started by torchrun, which says who is who
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        init_method = "env://"
    else:
        rank, world, store = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
        init_method = f"file://{store}"
    # "default": no backend named, so torch.distributed picks the one
    # registered for the accelerator, accinte.
    backend = os.environ.get("ACCL_TEST_BACKEND", "cpu:gloo,accinte:accl")
    if name == "ddp_without_the_default_backend_fix":
        helper = dist.distributed_c10d._new_process_group_helper
        dist.distributed_c10d._new_process_group_helper = getattr(helper, "__wrapped__", helper)
    device = torch.device("accinte", rank % torch.accinte.device_count())
    torch.accinte.set_device(device)
    dist.init_process_group(
        None if backend == "default" else backend,
        init_method=init_method, rank=rank, world_size=world,
        timeout=STALL_TIMEOUT if name in ("rank_fails", "rank_stalls") else TIMEOUT,
        device_id=device if os.environ.get("ACCL_TEST_BIND_DEVICE") else None)
    try:
        for name in names:
            CASES[name](rank, world, device)
            torch.accinte.synchronize()
            # NB: one write: under torchrun the ranks share an unbuffered
            # stdout, where print()'s separate writes interleave.
            sys.stdout.write(f"OK {name}\n")
            sys.stdout.flush()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
