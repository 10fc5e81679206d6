"""Chapter 04: a script that ends right after a backward pass exits cleanly.

Autograd runs the nodes of accinte tensors on a device thread of its own,
which may still be letting go of the finished backward (and of the Python
objects it captured) when the script's last line has returned. Without the
chapter's exit hook, that thread could take the GIL while the interpreter
finalizes, and Python ends such a thread by unwinding it through a
destructor: "terminate called without an active exception", exit code 134.

The race depends on scheduling, so each case starts many fresh interpreters
while a CPU burner competes with them for the cores (which is what made it
show up on loaded machines).
"""

import collections
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import torch_accinte

from conftest import hermetic_python, stage_has

#: The directory on sys.path that holds the stage under test.
STAGE = pathlib.Path(torch_accinte.__file__).parent.parent

# LITERALINCLUDE START: CH04_PY_EXIT_SCRIPT
#: A user's script whose last step is a backward pass.
SCRIPT = """\
import torch
model = torch.nn.Linear(8, 8).to("accinte")
model(torch.randn(4, 8, device="accinte")).sum().backward()
"""
# LITERALINCLUDE END: CH04_PY_EXIT_SCRIPT

#: How many interpreters a case starts, and how many run at once.
#: NB: without the exit hook about one interpreter in ten aborts under
#: load, so 30 miss it one time in twenty-five (0.9 ** 30); `make test`
#: runs the case four times (stage 04, the sanitized final stage and each
#: extra release), and `make flake-check` as often as asked.
RUNS = 30
PARALLEL = 2
#: No new interpreter starts after this many seconds, so that the case stays
#: short on a machine much slower than expected (it then runs fewer).
LAUNCH_BUDGET_S = 25.0


def _command(autoload: bool) -> tuple[list[str], dict]:
    """How to run SCRIPT against the stage under test and nothing else.

    NB: only the stage is on PYTHONPATH, the children start in an empty
    directory, and the interpreter is conftest's hermetic one, so a copy of
    torch_accinte installed in site-packages cannot be the one that runs.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = str(STAGE)
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "1" if autoload else "0"
    script = SCRIPT if autoload else "import torch_accinte\n" + SCRIPT
    return [hermetic_python(), "-c", script], env


def _run_many(autoload_modes: list[bool]) -> list[tuple[bool, int, str]]:
    """Runs SCRIPT up to RUNS times, alternating over ``autoload_modes``,
    under CPU load; returns (autoload, exit code, stderr) per run."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="ch04_exit_") as empty:
            start = time.monotonic()
            pending = collections.deque(
                autoload_modes[i % len(autoload_modes)] for i in range(RUNS))
            while pending and time.monotonic() - start < LAUNCH_BUDGET_S:
                batch = []
                while pending and len(batch) < PARALLEL:
                    autoload = pending.popleft()
                    command, env = _command(autoload)
                    batch.append((autoload, subprocess.Popen(
                        command, env=env, cwd=empty, stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, text=True)))
                for autoload, child in batch:
                    _, stderr = child.communicate(timeout=300)
                    results.append((autoload, child.returncode, stderr))
    finally:
        burner.kill()
        burner.wait()
    return results


def test_script_ending_after_backward_exits_cleanly():
    """Every interpreter exits with 0 and nothing on stderr about a
    terminated thread, with the backend imported explicitly and, from
    chapter 06 on, autoloaded by ``import torch``."""
    modes = [False, True] if stage_has("06_autoload") else [False]
    results = _run_many(modes)
    assert results, "no interpreter ran"
    failed = [(autoload, code, stderr[-400:]) for autoload, code, stderr in results
              if code != 0 or "terminate called" in stderr]
    assert not failed, (
        f"{len(failed)} of {len(results)} interpreters failed at exit "
        f"(autoload, exit code, end of stderr): {failed[:3]}")
