"""Chapter 11, distributed: a ``c10d`` backend for the device, found by
``torch.distributed`` as the device's default.

Each check starts two fresh interpreters, rank 0 and rank 1, each on
device ``rank % device_count``. They meet through a ``file://`` store in a
temporary directory (no port to race for) and call
``init_process_group()`` with no backend, which takes the backend
registered for the device. Every rank compares its results with values it
computes on the CPU and prints ``OK``; a check fails with the first rank's
error. The group's timeout and the check's bound are minutes, so a loaded
machine is slow, never wrong; only a hang reaches them.
"""

import os
import tempfile
import textwrap

from .._api import Section
from .._helpers import COPIES, DEVICE, OPERATORS, import_line, last_line, run_children

SECTION = Section(
    chapter="11", title="Distributed: a c10d backend", requires=(DEVICE, COPIES, OPERATORS),
    missing="no c10d backend registered for the device: init_process_group() and collectives "
            "of device tensors fail")

WORLD = 2

_PRELUDE = """
import datetime, os, sys
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
{imports}
import torch.distributed as dist
RANK, WORLD, STORE, NAME = {rank}, {world}, {store!r}, {name!r}
DEVICE = torch.device(NAME, RANK % torch.accelerator.device_count())
torch.accelerator.set_device_index(DEVICE.index)
dist.init_process_group(init_method="file://" + STORE, rank=RANK, world_size=WORLD,
                        timeout=datetime.timedelta(minutes=5))
def rank_tensor(rank, dtype=torch.float32):
    return (torch.arange(12, dtype=torch.float64).reshape(3, 4) + 100 * (rank + 1)).to(dtype)
"""

_EPILOGUE = """
dist.barrier()
dist.destroy_process_group()
print("DONE")
"""

#: The parts the ranks run, in order, each a check of its own: one pair of
#: processes runs them all (starting a group costs seconds), and each part
#: reports ``PART name OK`` or ``PART name FAIL error`` on its own line.
_PARTS = {}

#: The ranks' results, per (device, package): run once, read by each check.
_RESULTS = {}


def _part(body):
    """Registers ``body`` (the source of a part) under the check's name and
    returns the check, which reads that part's line from both ranks."""

    def register(function):
        _PARTS[function.__name__] = textwrap.dedent(body)

        def check(ctx):
            _read(ctx, function.__name__)

        check.__name__ = function.__name__
        check.__doc__ = function.__doc__
        return check

    return register


def _wrapped(name, body):
    return (f"try:\n" + textwrap.indent(body, "    ") +
            f"\n    print('PART {name} OK', flush=True)\n"
            f"except Exception as error:\n"
            f"    print('PART {name} FAIL', type(error).__name__, str(error).splitlines()[0] "
            f"if str(error) else '', flush=True)\n")


def _ranks(ctx):
    key = (ctx.device, ctx.package)
    if key not in _RESULTS:
        with tempfile.TemporaryDirectory() as directory:
            store = os.path.join(directory, "store")
            codes = [
                _PRELUDE.format(imports=import_line(ctx), rank=rank, world=WORLD, store=store,
                                name=ctx.device)
                + "".join(_wrapped(name, body) for name, body in _PARTS.items()) + _EPILOGUE
                for rank in range(WORLD)
            ]
            _RESULTS[key] = run_children(ctx, codes, timeout=600)
    return _RESULTS[key]


def _read(ctx, name):
    for rank, (code, out, err) in enumerate(_ranks(ctx)):
        lines = [line for line in out.splitlines() if line.startswith(f"PART {name} ")]
        if not lines:
            raise AssertionError(f"rank {rank} exited {code} before {name}: {last_line(err)}")
        assert lines[0] == f"PART {name} OK", f"rank {rank}: {lines[0][len(name) + 6:]}"
    for rank, (code, out, err) in enumerate(_ranks(ctx)):
        assert code == 0 and "DONE" in out.split(), \
            f"rank {rank} exited {code} after its checks: {last_line(err)}"


@SECTION.check
@_part("""
    backend = dist.get_default_backend_for_device(NAME)
    config = dist.get_backend_config()
    assert f"{NAME}:{backend}" in config, f"the group's backends are {config!r}, without {NAME}:{backend}"
""")
def default_backend_for_the_device(ctx):
    """init_process_group() uses the backend registered for the device."""


@SECTION.check
@_part("""
        for dtype in (torch.float32, torch.int64):
            t = rank_tensor(RANK, dtype).to(DEVICE)
            dist.all_reduce(t)
            want = sum(rank_tensor(r, dtype) for r in range(WORLD))
            assert t.device == DEVICE, f"all_reduce moved the tensor to {t.device}"
            torch.testing.assert_close(t.cpu(), want, rtol=0, atol=0, msg=f"all_reduce {dtype}")
        t = rank_tensor(RANK).to(DEVICE)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        torch.testing.assert_close(t.cpu(), rank_tensor(WORLD - 1), msg="all_reduce MAX")
        for root in range(WORLD):
            t = rank_tensor(RANK).to(DEVICE)
            dist.broadcast(t, src=root)
            torch.testing.assert_close(t.cpu(), rank_tensor(root), rtol=0, atol=0, msg="broadcast")
        gathered = [torch.empty(3, 4, device=DEVICE) for _ in range(WORLD)]
        dist.all_gather(gathered, rank_tensor(RANK).to(DEVICE))
        for r, g in enumerate(gathered):
            torch.testing.assert_close(g.cpu(), rank_tensor(r), rtol=0, atol=0, msg="all_gather")
        flat = torch.empty(WORLD * 3, 4, device=DEVICE)
        dist.all_gather_into_tensor(flat, rank_tensor(RANK).to(DEVICE))
        torch.testing.assert_close(flat.cpu(), torch.cat([rank_tensor(r) for r in range(WORLD)]),
                                   rtol=0, atol=0, msg="all_gather_into_tensor")
        work = dist.all_reduce(rank_tensor(RANK).to(DEVICE), async_op=True)
        work.wait()
""")
def collectives(ctx):
    """all_reduce, broadcast, all_gather of device tensors, as on the CPU."""


@SECTION.check(missing="DistributedDataParallel does not train on the device as on the CPU")
@_part("""
        from torch.nn.parallel import DistributedDataParallel
        torch.manual_seed(0)
        reference = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
        batches = [(torch.randn(8, 6), torch.randn(8, 2)) for _ in range(WORLD)]
        model = DistributedDataParallel(
            torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2)).to(DEVICE),
            device_ids=None)
        with torch.no_grad():
            for p, q in zip(model.parameters(), reference.parameters()):
                p.copy_(q.to(DEVICE))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = batches[RANK]
        torch.nn.functional.mse_loss(model(x.to(DEVICE)), y.to(DEVICE)).backward()
        # the CPU reference: the mean of the ranks' gradients
        grads = []
        for bx, by in batches:
            reference.zero_grad()
            torch.nn.functional.mse_loss(reference(bx), by).backward()
            grads.append([p.grad.clone() for p in reference.parameters()])
        for i, p in enumerate(model.parameters()):
            want = sum(g[i] for g in grads) / WORLD
            torch.testing.assert_close(p.grad.cpu(), want, msg=f"DDP gradient {i}")
        optimizer.step()
        with torch.no_grad():
            for i, (p, q) in enumerate(zip(model.parameters(), reference.parameters())):
                want = q - 0.1 * sum(g[i] for g in grads) / WORLD
                torch.testing.assert_close(p.cpu(), want, msg=f"parameter {i} after the step")
""")
def ddp_step_matches_the_cpu(ctx):
    """One DDP step on two ranks gives the CPU's averaged gradients."""
