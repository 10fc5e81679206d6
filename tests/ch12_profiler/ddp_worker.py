"""One rank of chapter 12's DDP test: a DistributedDataParallel training
step profiled on each rank, as a user profiles a distributed job.

A case of chapter 11's rank worker (``tests/ch11_distributed/worker.py``),
which starts the rank, joins the group and reports ``OK ddp_step``; run as
``python ddp_worker.py ddp_step RANK WORLD STORE_FILE``.
"""

import json
import os
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "ch11_distributed"))

import torch  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402
from worker import case, main  # noqa: E402


@case
def ddp_step(rank, world, device):
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(32, 4).to(device))
    inputs = torch.randn(8, 32).to(device) * (rank + 1)
    model(inputs).sum().backward()  # warm: DDP's buckets are built
    model.zero_grad()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        model(inputs).sum().backward()
        torch.accinte.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as trace:
            events = json.load(trace)["traceEvents"]
    device_work = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy")]
    # Every activity is on this rank's device, and the gradient's all_reduce
    # is there, named after its c10d operator.
    assert device_work and {e["pid"] for e in device_work} == {device.index}, device_work
    names = {e["name"] for e in device_work}
    assert "c10d::allreduce_ kernel" in names, sorted(names)
    # The collective ran on accl's communication stream, a row of its own.
    comm = {e["tid"] for e in device_work if e["name"] == "c10d::allreduce_ kernel"}
    compute = {e["tid"] for e in device_work if e["name"] == "aten::mm kernel"}
    assert comm and compute and comm.isdisjoint(compute), (comm, compute)
    # And the averaged gradients are what the CPU gives: for sum(W x + b),
    # each row of W's gradient is the batch's sum of x, averaged over ranks.
    torch.manual_seed(0)
    torch.nn.Linear(32, 4)
    base = torch.randn(8, 32)
    want = sum((r + 1) * base.sum(0) for r in range(world)) / world
    torch.testing.assert_close(model.module.weight.grad.cpu(), want.expand(4, 32))


if __name__ == "__main__":
    main()
