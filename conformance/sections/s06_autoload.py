"""Chapter 06: backend autoload. PyTorch imports the entry points of the
``torch.backends`` group when it is imported; a backend that declares one
is usable after ``import torch`` alone. Checked in fresh interpreters."""

import json
import subprocess

from .._api import Section
from .._helpers import COPIES, DEVICE

SECTION = Section(
    chapter="06", title="Autoload", requires=(DEVICE, COPIES),
    missing="`import torch` alone does not bring up the device: no `torch.backends` "
            "entry point (or its function does not register the device)")

_PROBE = """
import importlib.metadata, json, os, sys
import torch
names = sorted(e.name for e in importlib.metadata.entry_points(group="torch.backends"))
registered = torch._C._get_privateuse1_backend_name() == {device!r}
result = {{"entry_points": names, "registered": registered}}
if registered:
    t = torch.arange(4.0).to({device!r})
    result["device"] = str(t.device)
    result["round_trip"] = t.cpu().tolist()
    result["module"] = hasattr(torch, {device!r})
{extra}
print("RESULT" + json.dumps(result))
"""


def _probe(ctx, env_update=None, extra=""):
    env = ctx.child_env()
    env.update(env_update or {})
    code = _PROBE.format(device=ctx.device, extra=extra)
    done = subprocess.run(ctx.child_argv(code), env=env, capture_output=True, text=True,
                          timeout=120)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise AssertionError(f"a fresh interpreter failed (status {done.returncode}): {tail}")
    return json.loads(lines[-1][len("RESULT"):])


# LITERALINCLUDE START: KIT_AUTOLOAD
@SECTION.check
def import_torch_alone_brings_up_the_device(ctx):
    """In a fresh interpreter, ``import torch`` alone renames PrivateUse1,
    registers ``torch.NAME`` and makes device tensors; importing the package
    after that (old code does both) breaks nothing; with
    ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` the device is not loaded."""
    extra = ""
    if ctx.package is not None:
        extra = (f"import {ctx.package}\n"
                 f"result['again'] = torch.ones(2).to({ctx.device!r}).cpu().tolist()")
    result = _probe(ctx, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"}, extra)
    assert result["registered"], (
        f"after `import torch` PrivateUse1 is not {ctx.device!r}; torch.backends "
        f"entry points: {', '.join(result['entry_points']) or 'none'}")
    assert result["module"], f"torch.{ctx.device} is not registered"
    assert result["device"] == f"{ctx.device}:0" and result["round_trip"] == [0, 1, 2, 3]
    if ctx.package is not None:
        assert result["again"] == [1.0, 1.0], "importing the package after autoload broke it"
    disabled = _probe(ctx, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert not disabled["registered"], "TORCH_DEVICE_BACKEND_AUTOLOAD=0 did not stop it"
# LITERALINCLUDE END: KIT_AUTOLOAD
