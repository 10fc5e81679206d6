"""Fixtures and helpers of chapter 13's tests, imported by each test module.

NB: not a conftest.py: the test modules of every chapter import the
top-level tests/conftest.py as ``conftest``, and a second one would shadow
it.

Inductor compiles each kernel with the C++ compiler, a second or more each,
which would make this chapter's tests the slowest of all. They share one
Inductor cache per torch release, kept outside the clone (see
_inductor_cache()), so that the later runs with the same release (CI runs
the chapter against its stage and the sanitized build, and again from the
next clean clone) find the kernels compiled already.
"""

import contextlib
import hashlib
import os
import pathlib

import torch
from torch._inductor.runtime.cache_dir_utils import default_cache_dir

REPO = pathlib.Path(__file__).resolve().parents[2]



def _inductor_cache() -> pathlib.Path:
    """The tests' Inductor cache: one per torch release and per version of
    what generated code depends on, outside the clone, so a clean clone
    compiles again only the kernels that changed.

    NB: Inductor keys its caches by the generated source (and chapter 13's
    code generator, through its cache key pass), not by the headers that
    source is compiled against: the emulator's API headers and chapter 13's
    sources name the directory.
    """
    digest = hashlib.sha256()
    sources = [*(REPO / "common" / "include").rglob("*.h"),
               *(REPO / "chapters" / "13_compile").rglob("*.py"),
               *(REPO / "chapters" / "13_compile").rglob("*.cpp")]
    for source in sorted(sources):
        digest.update(source.relative_to(REPO).as_posix().encode())
        digest.update(source.read_bytes())
    root = pathlib.Path(os.environ.get("ACCINTE_INDUCTOR_CACHE") or pathlib.Path(
        os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
        / "torch_accinte" / "inductor")
    return root / f"{torch.__version__}-{digest.hexdigest()[:16]}"


# NB: set as this module is imported, while collecting: importing Dynamo
# sets the variable to Inductor's default (/tmp/torchinductor_<user>) when
# it is unset, so a value equal to the default is replaced as well.
if os.environ.get("TORCHINDUCTOR_CACHE_DIR") in (None, os.path.abspath(default_cache_dir())):
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(_inductor_cache())

import pytest  # noqa: E402
import torch._dynamo  # noqa: E402

#: Tolerances of a compiled result against the CPU's: Inductor fuses and
#: reorders float32 arithmetic, a wrong kernel is off by far more.
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}

# Long enough never to expire while a test runs; short enough that a broken
# test (one that waits for the held stream) fails instead of hanging.
GATE_TIMEOUT = 30.0


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Every test compiles from scratch (its code read from the cache, when
    there) and leaves no compiled code behind: modules' ``forward``, shared
    between tests, would otherwise count against Dynamo's recompile limit."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@contextlib.contextmanager
def seeded(seed: int):
    """Seeds the CPU and every accinte device, and restores their states
    after (the state check of tests/conftest.py compares the seeds)."""
    devices = list(range(torch.accinte.device_count()))
    with torch.random.fork_rng(devices=devices, device_type="accinte"):
        torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def uncached():
    """Inductor generates the code again instead of reading a graph's code
    from its caches (FX graph cache, AOTAutograd's cache).

    NB: kernels' binaries are still found by the hash of their source, which
    holds whatever generated it.
    """
    import torch._functorch.config
    import torch._inductor.config

    with torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        yield


def assert_three_way(compiled, eager, cpu, **tolerance):
    """The compiled accinte result and the eager accinte result both match
    the CPU's (nested tuples, lists and dicts of tensors)."""
    tolerance = tolerance or TOLERANCE
    torch.testing.assert_close(to_cpu(eager), cpu, **tolerance)
    torch.testing.assert_close(to_cpu(compiled), cpu, **tolerance)


def to_cpu(value):
    """``value`` with every tensor copied to the CPU."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {key: to_cpu(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_cpu(item) for item in value)
    return value


def graph_breaks(fn, *args) -> int:
    """How many times Dynamo breaks the graph of ``fn(*args)``."""
    torch._dynamo.reset()
    try:
        return torch._dynamo.explain(fn)(*args).graph_break_count
    finally:
        torch._dynamo.reset()
