"""Chapter 06: `import torch` alone brings up accinte.

Autoload happens once per process, at `import torch`, so every case runs in a
fresh interpreter whose `PYTHONPATH` and `TORCH_DEVICE_BACKEND_AUTOLOAD` the
test controls. The test process itself has already autoloaded the stage
(conftest imports torch first), which the last tests check.
"""

import importlib.metadata
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest
import torch
import torch_accinte
from conftest import hermetic_python

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: The directory on sys.path that holds the stage under test.
STAGE = pathlib.Path(torch_accinte.__file__).parent.parent
ENTRY_MODULE = "_torch_accinte_autoload"
HINT = "TORCH_DEVICE_BACKEND_AUTOLOAD=0"
# NB: `python -c` puts its working directory first on sys.path, and metadata
# found there (a torch_accinte.egg-info, say) would take part: the children
# start in an empty directory.
_EMPTY = tempfile.TemporaryDirectory(prefix="ch06_autoload_")


def run(code: str, path, autoload: str | None = "1", warnings_are_errors=True,
        python=None):
    """Runs ``code`` with only ``path`` (a directory or a list; None: nothing)
    on ``PYTHONPATH`` and autoload set as given (None: variable unset).

    NB: by default in conftest's hermetic_python(), which sees no installed
    copy of torch_accinte (`make demo` installs one beside torch): "only
    ``path``" must hold for the package, its metadata and its entry point.
    """
    if python is None:
        python = hermetic_python()
    env = dict(os.environ)
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    if autoload is not None:
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = autoload
    env.pop("PYTHONPATH", None)
    if path is not None:
        paths = path if isinstance(path, list) else [path]
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    command = [str(python)]
    if warnings_are_errors:
        command += ["-W", "error"]
    return subprocess.run(
        command + ["-c", textwrap.dedent(code)],
        env=env, cwd=_EMPTY.name, capture_output=True, text=True, timeout=120,
    )


def copy_stage(target: pathlib.Path, metadata=True, entry_module=True,
               version=None) -> pathlib.Path:
    """A copy of the stage under test in ``target`` (another place on
    sys.path), optionally without its metadata or its entry-point module."""
    target.mkdir(parents=True)
    shutil.copytree(STAGE / "torch_accinte", target / "torch_accinte",
                    ignore=shutil.ignore_patterns("__pycache__"))
    if entry_module:
        shutil.copy(STAGE / f"{ENTRY_MODULE}.py", target)
    if metadata:
        (info,) = STAGE.glob("torch_accinte-*.dist-info")
        name = info.name if version is None else f"torch_accinte-{version}.dist-info"
        shutil.copytree(info, target / name)
    return target


BRINGS_UP = """
    import sys, torch
    assert "torch_accinte" in sys.modules, "import torch did not load torch_accinte"
    import torch_accinte
    assert torch.accinte is torch_accinte.device_module
    assert "06_autoload" in torch_accinte.loaded_chapters
    x = torch.arange(6.0).reshape(2, 3)
    y = x.to("accinte:1")
    assert y.device == torch.device("accinte", 1)
    torch.testing.assert_close((y * 2 + 1).cpu(), x * 2 + 1)
    print("LOADED", torch_accinte.__file__)
"""


def test_import_torch_alone_brings_up_accinte():
    result = run(BRINGS_UP, STAGE, autoload=None)
    assert result.returncode == 0, result.stderr
    assert f"LOADED {STAGE / 'torch_accinte' / '__init__.py'}" in result.stdout
    assert result.stderr == ""


def test_autoload_0_turns_it_off():
    result = run(
        """
        import sys, torch
        assert "torch_accinte" not in sys.modules
        assert not hasattr(torch, "accinte")
        try:
            torch.device("accinte")
        except RuntimeError as error:
            print("NO DEVICE:", error)
        import torch_accinte  # the explicit import of stages 01-05 still works
        torch.testing.assert_close(torch.ones(2, device="accinte").cpu(), torch.ones(2))
        print("EXPLICIT OK")
        """,
        STAGE, autoload="0",
    )
    assert result.returncode == 0, result.stderr
    assert "NO DEVICE:" in result.stdout and "EXPLICIT OK" in result.stdout


def test_explicit_import_after_autoload_registers_nothing_twice():
    # -W error: a second registration would raise ("already registered") or
    # warn (a kernel registered twice), and either fails the run.
    result = run(
        """
        import importlib, sys, torch
        first = sys.modules["torch_accinte"]
        device_module = torch.accinte
        import torch_accinte
        from torch_accinte import device_module as again
        assert torch_accinte is first and again is device_module
        assert torch.accinte is device_module
        torch.testing.assert_close(torch.ones(3, device="accinte").add(1).cpu(),
                                   torch.full((3,), 2.0))
        print("ONCE")
        """,
        STAGE,
    )
    assert result.returncode == 0, result.stderr
    assert "ONCE" in result.stdout and result.stderr == ""


def test_importing_torch_accinte_first_survives_the_cycle():
    # torch_accinte's first line imports torch, whose autoload then finds
    # torch_accinte half imported; it must leave the registration to the
    # import under way.
    result = run(
        """
        import torch_accinte
        import torch
        assert torch.accinte is torch_accinte.device_module
        assert "06_autoload" in torch_accinte.loaded_chapters
        torch.testing.assert_close(torch.ones(2, device="accinte").cpu(), torch.ones(2))
        print("CYCLE OK")
        """,
        STAGE,
    )
    assert result.returncode == 0, result.stderr
    assert "CYCLE OK" in result.stdout and result.stderr == ""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_autoload_leaves_the_device_uninitialised():
    # Every `import torch` now loads the backend, including the parent of a
    # DataLoader's forked workers: import must not initialise the device, or
    # the children could not use it.
    result = run(
        """
        import os, torch
        assert not torch.accinte.is_initialized()
        pid = os.fork()
        if pid == 0:
            ok = torch.equal((torch.ones(2, device="accinte") + 1).cpu(),
                             torch.full((2,), 2.0))
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        print("CHILD OK")
        """,
        STAGE,
    )
    assert result.returncode == 0, result.stderr
    assert "CHILD OK" in result.stdout


def test_broken_backend_is_reported_and_import_torch_still_works(tmp_path):
    broken = copy_stage(tmp_path / "broken")
    (broken / "torch_accinte" / "lib" / "libaccinte.so").write_bytes(b"not ELF")
    result = run(
        """
        import sys, torch
        assert "torch_accinte" not in sys.modules
        assert not hasattr(torch, "accinte")
        torch.testing.assert_close(torch.ones(2) + 1, torch.full((2,), 2.0))
        print("TORCH OK")
        try:
            import torch_accinte
        except ImportError as error:
            print("EXPLICIT:", error)
        """,
        broken, warnings_are_errors=False,
    )
    assert result.returncode == 0, result.stderr
    assert "TORCH OK" in result.stdout
    # What failed, and how to turn autoload off.
    assert "RuntimeWarning: The accinte backend failed to autoload" in result.stderr
    assert "libaccinte.so" in result.stderr
    assert HINT in result.stderr
    assert "EXPLICIT:" in result.stdout and "libaccinte.so" in result.stdout


def test_metadata_without_its_package_is_reported(tmp_path):
    orphan = tmp_path / "orphan"
    orphan.mkdir()
    shutil.copy(STAGE / f"{ENTRY_MODULE}.py", orphan)
    (info,) = STAGE.glob("torch_accinte-*.dist-info")
    shutil.copytree(info, orphan / info.name)
    result = run("import torch; print('TORCH OK')", orphan,
                 warnings_are_errors=False)
    assert result.returncode == 0, result.stderr
    assert "TORCH OK" in result.stdout
    assert "no torch_accinte package on sys.path" in result.stderr
    assert HINT in result.stderr


def test_a_stage_without_metadata_is_not_autoloaded_by_another_copy(tmp_path):
    # An installed copy (metadata and all) behind an earlier stage on
    # PYTHONPATH: PyTorch finds the installed entry point, `torch_accinte`
    # resolves to the stage, which must then load only when imported.
    earlier = copy_stage(tmp_path / "earlier", metadata=False, entry_module=False)
    installed = copy_stage(tmp_path / "installed")
    result = run(
        """
        import sys, torch
        assert "torch_accinte" not in sys.modules
        import torch_accinte
        print("EXPLICIT", torch_accinte.__file__)
        """,
        [earlier, installed],
    )
    assert result.returncode == 0, result.stderr
    assert f"EXPLICIT {earlier / 'torch_accinte' / '__init__.py'}" in result.stdout


def test_stage_in_front_of_an_installed_copy_autoloads_once(tmp_path):
    # `pip install .` writes its own dist-info; whatever its version,
    # importlib.metadata keeps the first distribution of a name on sys.path,
    # so the entry point runs once and loads the copy that comes first.
    first = copy_stage(tmp_path / "first")
    second = copy_stage(tmp_path / "second", version="0.0.1")
    result = run(
        """
        import importlib.metadata, torch, torch_accinte
        found = importlib.metadata.entry_points(group="torch.backends", name="accinte")
        assert len(found) == 1, found
        print("LOADED", torch_accinte.__file__)
        """,
        [first, second],
    )
    assert result.returncode == 0, result.stderr
    assert f"LOADED {first / 'torch_accinte' / '__init__.py'}" in result.stdout


def test_the_stage_metadata_matches_the_project():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (distribution,) = importlib.metadata.distributions(
        name="torch_accinte", path=[str(STAGE)])
    assert distribution.metadata["Name"] == project["name"]
    assert distribution.version == project["version"]
    (point,) = distribution.entry_points.select(group="torch.backends")
    assert (point.name, point.value) == ("accinte", f"{ENTRY_MODULE}:autoload")


@pytest.mark.skipif(os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") != "1",
                    reason="autoload is turned off for this run")
def test_this_process_was_autoloaded():
    # conftest imported torch before torch_accinte, so this test process is
    # the autoload case too, and every earlier chapter's suite runs under it.
    assert sys.modules[ENTRY_MODULE].__file__ == str(STAGE / f"{ENTRY_MODULE}.py")
    assert torch.accinte is torch_accinte.device_module


@pytest.mark.skipif(os.environ.get("ACCINTE_TEST_INSTALL") != "1",
                    reason="builds and installs the package into a venv "
                    "(about a minute); set ACCINTE_TEST_INSTALL=1")
def test_the_installed_package_autoloads(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages",
                    venv], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-build-isolation",
         "--no-deps", ROOT], capture_output=True, text=True, cwd=_EMPTY.name,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert install.returncode == 0, install.stdout + install.stderr
    # Metadata left in the repository root would join every Python started
    # there (setup.py writes it under build/).
    assert not list(ROOT.glob("*.egg-info")), "setup.py wrote into the root"
    result = run(BRINGS_UP, None, autoload=None, python=python)
    assert result.returncode == 0, result.stderr
    assert f"LOADED {venv}" in result.stdout and result.stderr == ""
    off = run("import sys, torch; assert 'torch_accinte' not in sys.modules",
              None, autoload="0", python=python)
    assert off.returncode == 0, off.stderr
    # The README's quickstart runs as a user would run it, against the
    # installed package and nothing else.
    quickstart = subprocess.run(
        [python, ROOT / "examples" / "quickstart.py"], capture_output=True,
        text=True, cwd=_EMPTY.name, timeout=600,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert quickstart.returncode == 0, quickstart.stdout + quickstart.stderr
    assert "round trip via accinte:0 and accinte:1 is exact" in quickstart.stdout
    # The package ships the conformance kit (docs/conformance.md).
    kit = subprocess.run(
        [python, "-m", "torch_accinte.conformance", "--help"], capture_output=True,
        text=True, cwd=_EMPTY.name, timeout=600,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert kit.returncode == 0 and "--expect-stage" in kit.stdout, kit.stdout + kit.stderr
    if "08_generator" in torch_accinte.loaded_chapters:  # the whole backend
        assert "training accuracy on accinte" in quickstart.stdout


STALE = """
[torch.backends]
stale = stale_backend:load
"""


def test_setup_py_never_autoloads_a_stale_copy(tmp_path):
    # A stale torch_accinte whose entry point announces itself when run.
    stale = tmp_path / "stale"
    (stale / "torch_accinte-0.0.1.dist-info").mkdir(parents=True)
    (stale / "torch_accinte-0.0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch_accinte\nVersion: 0.0.1\n")
    (stale / "torch_accinte-0.0.1.dist-info" / "entry_points.txt").write_text(STALE)
    (stale / "stale_backend.py").write_text("def load():\n    print('STALE LOADED')\n")

    control = run("import torch", stale, autoload=None)
    assert "STALE LOADED" in control.stdout, control.stderr

    # setup.py with setuptools.setup() stubbed out, then what the build does
    # after it: import torch in the same process and in a child (CMake's
    # configure step asks a child Python for torch's location).
    result = run(
        f"""
        import json, runpy, subprocess, sys, setuptools
        captured = {{}}
        setuptools.setup = lambda **kwargs: captured.update(kwargs)
        runpy.run_path({str(ROOT / "setup.py")!r}, run_name="__main__")
        import torch
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        print(json.dumps(captured["entry_points"]))
        """,
        stale, autoload=None, warnings_are_errors=False,
    )
    assert result.returncode == 0, result.stderr
    assert "STALE LOADED" not in result.stdout
    # The installed package declares the entry point from the chapters'
    # sources, so it does even before anything is built.
    assert f'["accinte = {ENTRY_MODULE}:autoload"]' in result.stdout
