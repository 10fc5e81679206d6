"""Helpers shared by the later sections (08 onwards): private to the kit.

Nothing here knows the backend's name; everything goes through the
:class:`conformance._api.Context` a check is given.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

import torch

from conformance._api import Skip


@contextlib.contextmanager
def preserved_rng(ctx):
    """Restores the CPU generator, and the device's generators when the
    device module has ``get_rng_state_all``, whatever the check does, so a
    check that seeds leaves no trace for the next one."""
    cpu = torch.get_rng_state()
    module = ctx.module
    device_states = None
    try:
        device_states = module.get_rng_state_all()
    except Exception:  # no generator yet: nothing to restore
        device_states = None
    try:
        yield
    finally:
        torch.set_rng_state(cpu)
        if device_states is not None:
            module.set_rng_state_all(device_states)


def device_count(ctx) -> int:
    """The number of devices, through ``torch.accelerator`` (0 when the
    device module cannot say)."""
    try:
        return torch.accelerator.device_count()
    except Exception:
        return 0


def run_children(ctx, codes, timeout=600.0, cwd=None, argv=None):
    """Runs one fresh interpreter per source in ``codes`` at once (or, with
    ``argv``, that command line once per entry of ``codes``); returns
    their ``(returncode, stdout, stderr)``. The bound is generous: a
    child still running after ``timeout`` seconds (a hang, never a slow
    machine) is killed and reported, and no child outlives the call."""
    processes = [
        subprocess.Popen(argv or ctx.child_argv(code), env=ctx.child_env(), cwd=cwd,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
        for code in codes
    ]
    results = []
    try:
        for process in processes:
            try:
                out, err = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                # NB: the whole session: a child's own children (a spawned
                # consumer) hold its pipes open and would outlive it.
                _kill_session(process)
                out, err = process.communicate()
                err += f"\n(killed after {timeout:.0f} s)"
            results.append((process.returncode, out, err))
    finally:
        for process in processes:
            _kill_session(process)
    return results


def _kill_session(process):
    """Kills the session ``run_children`` started ``process`` in: the child
    and whatever it started."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def import_line(ctx) -> str:
    """The line a child runs first: imports torch, and the backend's
    package when the backend does not load with ``import torch``."""
    line = "import torch\n"
    if ctx.package:
        line += f"import {ctx.package}\n"
    return line


def last_line(text: str) -> str:
    """The last non-empty line of a child's stderr: its error."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def need_devices(ctx, count):
    if device_count(ctx) < count:
        raise Skip(f"needs {count} devices, {device_count(ctx)} here")
