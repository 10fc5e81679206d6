"""What the child processes of chapter 14's tests run.

A child is started with ``spawn`` (or ``forkserver``) from the hermetic
interpreter, imports torch, which loads the stage on ``PYTHONPATH``, and
imports this module by name (``spawn`` gives the child the parent's
``sys.path``).
"""

import sys
from multiprocessing.reduction import ForkingPickler

import torch
import torch_accinte  # noqa: F401  (before stage 06, nothing autoloads it)
from torch_accinte import _C

#: Tensors a "hold" request keeps until its "release".
_held = {}
#: Gates of "make", kept closed after it returns (each opens by itself).
_gates = []


def describe(tensor):
    """What the parent compares: the values (on the CPU) and the layout."""
    return {
        "values": tensor.detach().cpu(),
        "device": str(tensor.device),
        "dtype": tensor.dtype,
        "size": tuple(tensor.size()),
        "stride": tensor.stride(),
        "storage_offset": tensor.storage_offset(),
        "storage_nbytes": tensor.untyped_storage().nbytes(),
        "type": type(tensor).__name__,
        "requires_grad": tensor.requires_grad,
    }


def read(tensor):
    return describe(tensor)


def read_many(tensors):
    """Several tensors of one message, and whether they share a storage."""
    pointers = {t.untyped_storage().data_ptr() for t in tensors}
    return [describe(t) for t in tensors], len(pointers)


def add_one(tensor):
    """Writes through the received tensor; the parent reads the same memory."""
    tensor.add_(1)
    torch.accinte.synchronize()


def write_late_then_drop(box, value):
    """Enqueues a write behind a closed gate, then drops the tensor: the
    release must wait for the write before the producer may reuse it."""
    tensor = box.pop()
    gate = _C._testing.StreamGate(tensor.device.index, 0.5)
    tensor.fill_(value)
    del tensor
    gate.open()


def resend(tensor):
    """Tries to send a received tensor on."""
    ForkingPickler.dumps(tensor)


def make(values, device):
    """A tensor made here and sent back to the parent while the kernel that
    computes it still waits behind a closed gate (which opens by itself
    after half a second): the parent must not read it before."""
    on_device = values.to(device)
    _gates.append(_C._testing.StreamGate(on_device.device.index, 0.5))
    return on_device * 2


def hold(key, tensor):
    _held[key] = tensor


def release(key):
    del _held[key]


def read_held(key):
    """What a tensor of an earlier "hold" holds now."""
    return describe(_held[key])


CASES = {name: globals()[name] for name in (
    "read", "read_many", "add_one", "write_late_then_drop", "resend", "make",
    "hold", "release", "read_held")}


def serve(requests, replies):
    """A consumer: runs each request ``(name, args)`` and replies
    ``(True, result)`` or ``(False, "Type: message")``, until ``None``."""
    while True:
        request = requests.get()
        if request is None:
            return
        name, args = request
        del request
        try:
            reply = (True, CASES[name](*args))
        except Exception as error:  # noqa: BLE001  (reported to the parent)
            reply = (False, f"{type(error).__name__}: {error}")
        # NB: the request's tensors are released before the reply, so that
        # the parent, once answered, finds nothing of it still held.
        del args
        replies.put(reply)


def check_argument(tensor, expected, results):
    """A ``Process`` target: its argument arrived with the right values."""
    results.put(bool(torch.equal(tensor.cpu(), expected)) and str(tensor.device))


def receive_from_pipe(receiver, results):
    """A ``Process`` target: a tensor arrives through a Pipe."""
    tensor, expected = receiver.recv()
    check_argument(tensor, expected, results)


def send_and_exit(queue):
    """A producer that exits with its tensor still in the queue."""
    queue.put(torch.arange(1000.0, device="accinte"))
    sys.exit(0)


def receive_or_report(queue, results):
    """A ``Process`` target: what receiving from ``queue`` raises, if
    anything."""
    try:
        tensor = queue.get(timeout=60)
        results.put(f"received {tensor.device}")
    except Exception as error:  # noqa: BLE001  (reported to the parent)
        results.put(f"{type(error).__name__}: {error}")


def hogwild_train(rank, model, inputs, targets, steps):
    """``torch.multiprocessing.spawn``'s target: trains the parent's model,
    whose parameters it received, in place (PyTorch's Hogwild example)."""
    device = next(model.parameters()).device
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs.to(device)), targets.to(device))
        loss.backward()
        optimizer.step()
    torch.accinte.synchronize()


def _limit_open_files(limit):
    """Lowers this process's limit of open files to ``limit`` (the soft
    limit only, as ``ulimit -n`` does), after torch and the device are up."""
    import resource

    torch.accinte.init()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))


def send_many(queue, results, held, done, count, limit):
    """A ``Process`` target: sends ``count`` tensors, ``i`` filled with
    ``i``, under a limit of ``limit`` open files; once the consumer holds
    them all, reports whether this process can still open a file, and the
    memory files it holds open."""
    _limit_open_files(limit)
    tensors = [torch.full((4,), float(i), device="accinte") for i in range(count)]
    for tensor in tensors:
        queue.put(tensor)
    held.wait(120)
    try:
        with open(__file__, "rb"):
            opens = "opens files"
    except OSError as error:
        opens = f"{type(error).__name__}: {error}"
    results.put(("producer", opens, _open_memfds()))
    done.wait(120)


def _open_memfds():
    """How many descriptors this process has open on each kind of memfd
    (its name without the random part)."""
    import collections
    import os
    import re

    kinds = collections.Counter()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/memfd:"):
            kinds[re.sub(r"[0-9a-f]{16}( \(deleted\))?$", "", target[7:])] += 1
    return dict(kinds)


def hold_many(queue, results, held, done, count, limit):
    """A ``Process`` target: receives ``count`` tensors from ``send_many``
    under the same limit and keeps them all alive; reports how many arrived
    and which held the wrong values."""
    _limit_open_files(limit)
    received = []
    try:
        for _ in range(count):
            received.append(queue.get(timeout=20))
    except Exception:  # noqa: BLE001  (a missing tensor times out: reported)
        pass
    wrong = [i for i, tensor in enumerate(received)
             if tensor.cpu().tolist() != [float(i)] * 4]
    results.put(("consumer", len(received), wrong))
    held.set()
    done.wait(120)
