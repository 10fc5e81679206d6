"""What several sections share: comparing with the CPU, finding the
backend's own operators through the dispatcher, keeping the random state,
and running fresh interpreters."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

import torch

from ._api import Skip

#: Operator namespaces PyTorch itself registers device kernels in (c10d
#: registers its collectives for every backend key, PrivateUse1 included).
TORCH_NAMESPACES = frozenset({
    "aten", "prims", "prim", "c10d", "_c10d_functional", "_c10d_functional_autograd",
    "_dtensor", "quantized", "_quantized", "inductor", "profiler", "mkldnn", "onednn",
    "higher_order", "debugprims", "rngprims", "_test",
    # NB: the kit's own operators (section 03) are not the backend's.
    "conformance_kit",
})


def to_device(ctx, tensor: torch.Tensor, index: int = 0) -> torch.Tensor:
    """``tensor`` copied to the device: a CPU tensor made first, since the
    device may not fill tensors itself (a stage without the fallback)."""
    return tensor.to(ctx.dev(index))


def assert_same(actual: torch.Tensor, expected: torch.Tensor, what: str,
                exact: bool = False) -> None:
    """``actual`` (on the device) against ``expected`` (on the CPU):
    dtype, shape and values, with the dtype's tolerances unless ``exact``."""
    if actual.dtype != expected.dtype:
        raise AssertionError(f"{what}: dtype {actual.dtype}, the CPU gives {expected.dtype}")
    if actual.shape != expected.shape:
        raise AssertionError(f"{what}: shape {tuple(actual.shape)}, the CPU gives "
                             f"{tuple(expected.shape)}")
    got = actual.detach().cpu()
    if exact:
        if not torch.equal(got, expected.detach()):
            raise AssertionError(f"{what}: values differ from the CPU's")
    else:
        torch.testing.assert_close(got, expected.detach(), msg=lambda m: f"{what}: {m}")


def need_devices(ctx, count: int) -> None:
    """Skips unless the backend has ``count`` devices."""
    have = torch.accelerator.device_count()
    if have < count:
        raise Skip(f"needs {count} devices, the backend has {have}")


def backend_operators(dispatch_key: str = "PrivateUse1") -> list:
    """The operators of the backend's own namespaces (not PyTorch's) that
    have a kernel for ``dispatch_key``, as ``torch.ops`` overload packets'
    qualified names, sorted."""
    names = torch._C._dispatch_get_registrations_for_dispatch_key(dispatch_key)
    return sorted(name for name in names
                  if name.split("::")[0] not in TORCH_NAMESPACES)


def overload(qualified: str):
    """``torch.ops.NS.NAME.OVERLOAD`` for ``"NS::NAME[.OVERLOAD]"``."""
    namespace, rest = qualified.split("::")
    name, _, overload_name = rest.partition(".")
    packet = getattr(getattr(torch.ops, namespace), name)
    return getattr(packet, overload_name or "default")


def tensor_arguments(op, make):
    """Arguments for ``op`` when every argument without a default is a
    Tensor (``make()`` makes each); None for any other schema."""
    args = []
    for argument in op._schema.arguments:
        if argument.kwarg_only or argument.has_default_value():
            continue
        if str(argument.type) != "Tensor":
            return None
        args.append(make())
    return args


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


# The checks others require (see ``_api.Check.requires``): what a check
# cannot work without, named once here.
#: PrivateUse1 carries the device's name and ``torch.device`` parses it.
DEVICE = "s01_device.privateuse1_is_renamed"
#: ``torch.NAME`` has chapter 01's names of ``torch.cuda``: a check that
#: can see its mechanism only through one of them requires it.
PARITY = "s00_parity.module_mirrors_torch_cuda"
#: ``torch.NAME`` has ``torch.cuda``'s memory functions.
PARITY_MEMORY = "s00_parity.module_mirrors_torch_cuda_memory"
#: Tensors of every dtype go to the device and back.
COPIES = "s01_allocator.round_trips_of_every_dtype"
#: ``torch.accelerator`` names the device and synchronizes it.
ACCELERATOR = "s01_hooks.accelerator_is_the_device"
#: ``torch.Stream``, ``torch.Event`` and the current stream work.
STREAMS = "s01_device.streams_and_events"
#: ATen's operators run on the device (the CPU fallback or kernels).
OPERATORS = "s02_fallback.pointwise_and_reductions"
#: Pinned host memory (``pin_memory()``, ``is_pinned``).
PINNED = "s07_memory.pinned_host_memory"
