"""Chapter 12, the profiler: the device's activities in ``torch.profiler``.

A profile with ``ProfilerActivity.PrivateUse1`` holds, as one with
``ProfilerActivity.CUDA`` does, the device's kernels linked to the
operators that launched them (so ``key_averages()`` has device time per
operator) and its copies in the Chrome trace as ``gpu_memcpy`` events.
Without an activity profiler for the device, a profile has CPU events only.
"""

import json
import os
import tempfile

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from .._api import Section
from .._helpers import ACCELERATOR, COPIES, DEVICE, OPERATORS

SECTION = Section(
    chapter="12", title="Profiler", requires=(DEVICE, COPIES, OPERATORS, ACCELERATOR),
    missing="no activity profiler for the device: torch.profiler records no device kernels or copies")

_ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _device_events(prof):
    return [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]


@SECTION.check
def kernels_are_device_events(ctx):
    a = torch.ones(64, 64, device=ctx.dev())
    b = torch.full((64, 64), 0.5, device=ctx.dev())
    torch.accelerator.synchronize()
    with profile(activities=_ACTIVITIES) as prof:
        c = a
        for _ in range(3):
            c = torch.mm(c, b) / 32
        (c + 1).cpu()
        torch.accelerator.synchronize()
    events = _device_events(prof)
    assert events, "a profile with ProfilerActivity.PrivateUse1 has no device events"
    averages = {e.key: e for e in prof.key_averages()}
    assert "aten::mm" in averages, "no aten::mm in the profile"
    assert averages["aten::mm"].self_device_time_total > 0, \
        "aten::mm has no device time: its kernels are not linked to the operator"
    assert averages["aten::mm"].count == 3, f"aten::mm counted {averages['aten::mm'].count} times, not 3"


@SECTION.check
def copies_in_the_trace(ctx):
    host = torch.arange(1024, dtype=torch.float32)
    with profile(activities=_ACTIVITIES) as prof:
        back = host.to(ctx.dev()).cpu()
        torch.accelerator.synchronize()
    torch.testing.assert_close(back, host, rtol=0, atol=0)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as trace:
            events = json.load(trace)["traceEvents"]
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
    names = " ".join(e.get("name", "") for e in copies)
    assert "HtoD" in names and "DtoH" in names, \
        f"the Chrome trace has no host-to-device and device-to-host copies (gpu_memcpy: {names!r})"
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert not kernels or all("dur" in e for e in kernels)


@SECTION.check
def nothing_outside_a_profile(ctx):
    x = torch.ones(128, device=ctx.dev())
    (x * 2).cpu()  # work before the profile
    torch.accelerator.synchronize()
    with profile(activities=_ACTIVITIES) as prof:
        (x + 3).cpu()
        torch.accelerator.synchronize()
    events = _device_events(prof)
    assert events, "a profile with ProfilerActivity.PrivateUse1 has no device events"
    assert not [e for e in events if "mul" in e.name], \
        "work done before the profile started appears in it"
