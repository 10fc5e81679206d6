"""Shared test helpers.

Every pytest process tests exactly one stage: ``PYTHONPATH`` points at
``build/stageNN/python`` (see ``make test-stage``). A test that describes
behaviour only an earlier stage has (an error naming the chapter that adds a
feature) asks :func:`stage_has` and is skipped once that chapter is loaded;
it runs, and must pass, in the stages before.
"""

import ctypes
import importlib.util
import os
import pathlib
import subprocess
import textwrap

# NB: set before torch_accinte loads the emulator, which reads it once.
os.environ.setdefault("ACCINTE_DEVICE_COUNT", "2")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch_accinte  # noqa: E402


def load_file(path: pathlib.Path):
    """The Python file at ``path`` as a module, for the folders that are not
    packages (tools/, a chapter's output/, another chapter's tests)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_tool(name):
    """The module ``tools/NAME.py``."""
    return load_file(pathlib.Path(__file__).resolve().parents[1] / "tools" / f"{name}.py")


def hermetic_python() -> str:
    """The interpreter every test starts a fresh Python with.

    It is this one, minus any installed copy of torch_accinte or other
    package with a ``torch.backends`` entry point (``make demo`` installs
    one into the site-packages that holds torch), so the child sees the
    stage on ``PYTHONPATH`` and nothing else of the backend. See
    tools/hermetic_python.py for how.
    """
    return _hermetic.python()


_hermetic = load_tool("hermetic_python")


def stage_has(chapter: str) -> bool:
    """Whether the stage under test contains ``chapter`` (e.g. "02_fallback")."""
    return chapter in torch_accinte.loaded_chapters


def only_before(chapter: str):
    """Marks a test of behaviour that ``chapter`` replaces."""
    return pytest.mark.skipif(
        stage_has(chapter), reason=f"stage includes chapter {chapter}"
    )


def run_python(code: str, env: dict | None = None, timeout: int = 120):
    """Runs ``code`` in a fresh interpreter of the same stage.

    For behaviour fixed at process start (emulator configuration) or that
    must not disturb the test process. The interpreter is
    :func:`hermetic_python`. Returns the CompletedProcess.
    """
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [hermetic_python(), "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _global_state() -> dict:
    """What a test must leave as it found it: the current device, each
    device's current stream, autocast, the random seeds, the sync debug mode,
    the caching allocator's switch, memory caps and the memory pools routing
    this thread's allocations (``use_mem_pool``), whether the emulator
    is tracing activities (no profile left running), and the tensors sent
    to other processes that a consumer still holds, and (from chapter 15
    on) how many graphs are capturing."""
    count = torch.accinte.device_count()
    state = {
        "current device": torch.accinte.current_device(),
        "current streams": [torch.accinte.current_stream(i) for i in range(count)],
        "autocast": [(device, torch.is_autocast_enabled(device),
                      torch.get_autocast_dtype(device))
                     for device in ("cpu", "accinte")],
        "CPU seed": torch.initial_seed(),
        "sync debug mode": torch.accinte.get_sync_debug_mode(),
    }
    if hasattr(torch.accinte, "initial_seed"):  # chapter 08
        state["accinte seeds"] = [torch.accinte.initial_seed()]
    if stage_has("12_profiler"):
        state["activity tracing"] = _activity_tracing_enabled()
    if hasattr(torch.accinte, "caching_allocator_enable"):  # chapter 07
        from torch_accinte import _C

        state["caching allocator enabled"] = _C._caching_allocator_is_enabled()
        state["memory fractions"] = [
            torch.accinte.get_per_process_memory_fraction(i) for i in range(count)]
    if hasattr(torch.accinte, "ipc_collect"):  # chapter 14
        from torch_accinte import _C

        state["sent tensors a consumer holds"] = _C._ipc_collect()
    if hasattr(torch.accinte, "AccinteGraph"):  # chapter 15
        from torch_accinte import _C

        state["graph captures underway"] = _C._captures_underway()
    if hasattr(torch.accinte, "use_mem_pool"):  # chapter 07
        from torch_accinte import _C

        state["memory pool routes"] = [_C._mem_pool_routes(i) for i in range(count)]
    return state


def _activity_tracing_enabled() -> bool:
    """Whether the emulator is tracing (a profile left running, chapter 12),
    asked of the runtime's C API in the stage's own libaccinte.so."""
    library = ctypes.CDLL(str(pathlib.Path(torch_accinte.__file__).parent / "lib" / "libaccinte.so"))
    enabled = ctypes.c_int(0)
    assert library.accinteActivityIsEnabled(ctypes.byref(enabled)) == 0
    return bool(enabled.value)


def _default_streams() -> list:
    return [torch.accinte.default_stream(i) for i in range(torch.accinte.device_count())]


@pytest.fixture(autouse=True)
def leaves_no_state_behind():
    """Every test starts on device 0 with the default streams current and
    ends with the global state it started with.

    NB: a leak is reported on the test that caused it, then undone, so that
    it cannot make later tests pass or fail for the wrong reason (a stream
    left current on device 1 silently moves another test's work there).
    """
    before = _global_state()
    assert before["current device"] == 0, "a test started on a device other than 0"
    assert before["current streams"] == _default_streams(), (
        "a test started with a non-default current stream")
    yield
    after = _global_state()
    leaked = {key: (before[key], after[key]) for key in before if before[key] != after[key]}
    if leaked:
        for stream in _default_streams():
            torch.accinte.set_stream(stream)
        torch.accinte.set_device(0)
        torch.accinte.set_sync_debug_mode(before["sync debug mode"])
        if "memory fractions" in before:
            torch.accinte.caching_allocator_enable(before["caching allocator enabled"])
            for i, fraction in enumerate(before["memory fractions"]):
                torch.accinte.set_per_process_memory_fraction(fraction, i)
        if "memory pool routes" in before:
            from torch_accinte import _C

            for i, routes in enumerate(after["memory pool routes"]):
                for pool_id in reversed(routes):
                    _C._end_allocate_to_pool(i, pool_id)
                    _C._release_pool(i, pool_id)
        for device, enabled, dtype in before["autocast"]:
            torch.set_autocast_enabled(device, enabled)
            torch.set_autocast_dtype(device, dtype)
        pytest.fail(f"the test left global state changed (before, after): {leaked}")


@pytest.fixture
def accinte():
    """The first accinte device."""
    return torch.device("accinte:0")
