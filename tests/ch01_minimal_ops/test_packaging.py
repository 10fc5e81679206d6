"""Chapter 01: the library layering — relative RPATHs, hidden visibility —
and a package install that keeps the installed torch."""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import torch_accinte

PACKAGE = pathlib.Path(torch_accinte.__file__).parent
ROOT = pathlib.Path(__file__).resolve().parents[2]
LIBRARIES = sorted(PACKAGE.glob("lib/*.so")) + sorted(PACKAGE.glob("_C*.so"))

pytestmark = pytest.mark.skipif(
    shutil.which("readelf") is None or shutil.which("nm") is None,
    reason="needs binutils (readelf, nm)",
)


def test_the_four_libraries_are_there():
    names = {library.name.split(".")[0] for library in LIBRARIES}
    assert names == {"libaccinte", "libtorch_accinte_backend",
                     "libtorch_accinte_python", "_C"}


@pytest.mark.parametrize("library", LIBRARIES, ids=lambda p: p.name)
def test_runpath_is_relative(library):
    dynamic = subprocess.run(["readelf", "-d", library], capture_output=True,
                             text=True, check=True).stdout
    for match in re.finditer(r"R(UN)?PATH\).*\[(.*)\]", dynamic):
        for entry in match.group(2).split(":"):
            assert entry.startswith("$ORIGIN"), f"{library.name}: {entry}"


@pytest.mark.parametrize("library", LIBRARIES, ids=lambda p: p.name)
def test_only_marked_symbols_are_exported(library):
    symbols = subprocess.run(["nm", "-DC", "--defined-only", library],
                             capture_output=True, text=True, check=True).stdout
    exported_functions = [line.split(" ", 2)[2] for line in symbols.splitlines()
                          if line.split(" ")[1] == "T"]
    assert exported_functions
    for name in exported_functions:
        assert name.startswith(("accinte", "PyInit__C")), f"{library.name}: {name}"


def test_pip_keeps_the_installed_torch(tmp_path):
    # `pip install --no-build-isolation .` resolves the dependencies against
    # the torch this interpreter has (each release of requirements/torch.txt:
    # make test runs this on all of them): pip would install the package and
    # nothing else, torch included.
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-build-isolation",
         "--quiet", "--disable-pip-version-check", "--report", str(report), str(ROOT)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    installs = json.loads(report.read_text())["install"]
    names = [item["metadata"]["name"].lower().replace("-", "_") for item in installs]
    assert names == ["torch_accinte"], f"pip would also install {names[1:]}"
