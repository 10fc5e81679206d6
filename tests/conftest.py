"""Shared test helpers.

Every pytest process tests exactly one stage: ``PYTHONPATH`` points at
``build/stageNN/python`` (see ``make test-stage``). A test that describes
behaviour only an earlier stage has (an error naming the chapter that adds a
feature) asks :func:`stage_has` and is skipped once that chapter is loaded;
it runs, and must pass, in the stages before.
"""

import os
import subprocess
import sys
import textwrap

# NB: set before torch_accinte loads the emulator, which reads it once.
os.environ.setdefault("ACCINTE_DEVICE_COUNT", "2")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch_accinte  # noqa: E402


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
    must not disturb the test process. Returns the CompletedProcess.
    """
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def accinte():
    """The first accinte device."""
    return torch.device("accinte:0")
