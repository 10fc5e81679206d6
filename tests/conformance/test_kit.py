"""The conformance kit (conformance/) against the stage under test.

The kit must know no backend: its code names no device and imports
nothing of torch_accinte (an AST check of its sources). To show that from the outside
too, these tests run it against a copy of the stage renamed through and
through: package ``torch_kitdev``, device ``kitdev`` (the name is set only
in the package's Python, by ``torch.utils.rename_privateuse1_backend``, so
the copy's Python files are all that changes). The same copy with one
chapter's plugin emptied is a broken backend, whose failures the report must
name and whose dependents it must report blocked; the same copy with the
device module's ``torch.cuda``-like helpers removed is a backend whose
mechanisms all work, which only the parity check may fail; and a copy of
the kit with a check that hangs and one that crashes shows that the runner
records both and carries on.
"""

import ast
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys

import pytest
import torch_accinte

from conftest import hermetic_python

ROOT = pathlib.Path(__file__).resolve().parents[2]
KIT = ROOT / "conformance"
STAGE = torch_accinte.loaded_chapters[-1][:2]
STAGE_PYTHON = pathlib.Path(torch_accinte.__file__).resolve().parents[1]

#: What the kit may import: the standard library, torch, and itself.
ALLOWED_TOP_LEVEL = {"torch"} | set(sys.stdlib_module_names)


def _kit_sources():
    return sorted(KIT.rglob("*.py"))


def test_the_kit_imports_nothing_of_a_backend():
    """Every import of the kit is the standard library, torch or the kit
    itself (relative), never torch_accinte."""
    for path in _kit_sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in ALLOWED_TOP_LEVEL, (
                    f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")


def _docstrings(tree) -> set:
    """The string constants that are docstrings (prose, which may give
    accinte as an example)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _code_words(node):
    """What a node of code spells: a string constant, a name, an attribute,
    an argument, a keyword, an import, a definition."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    for field in ("id", "attr", "arg", "name", "module", "asname"):
        value = getattr(node, field, None)
        if isinstance(value, str):
            yield value


def test_the_kit_never_names_the_device():
    """No code of the kit (strings, names, attributes, imports; docstrings
    and comments are prose) says "accinte": the device and package names
    come from --device and --package."""
    for path in _kit_sources():
        tree = ast.parse(path.read_text(), str(path))
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            if id(node) in docstrings:
                continue
            for word in _code_words(node):
                assert not re.search("accinte", word, re.IGNORECASE), (
                    f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')} names the "
                    f"device: {word!r}")


def test_the_stage_ships_the_kit():
    """The stage's package holds a copy of the kit identical to conformance/
    (so that the pip-installed backend ships it too)."""
    shipped = STAGE_PYTHON / "torch_accinte" / "conformance"
    for path in _kit_sources():
        copy = shipped / path.relative_to(KIT)
        assert copy.exists(), f"the stage lacks {copy.relative_to(STAGE_PYTHON)}"
        assert copy.read_bytes() == path.read_bytes(), f"{copy} differs from {path}"


def _run_kit(stage_python: pathlib.Path, package: str, device: str, *args,
             cwd: pathlib.Path, module: str | None = None, timeout: float = 600):
    env = dict(os.environ, PYTHONPATH=str(stage_python))
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    argv = [hermetic_python(), "-m", module or f"{package}.conformance", "--device", device,
            "--package", package, *args]
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


#: tools/rename_backend.py: the porting page's recipe, which renames a stage.
RECIPE = ROOT / "tools" / "rename_backend.py"


@pytest.fixture(scope="module")
def renamed(tmp_path_factory):
    """The stage under test as package ``torch_kitdev``, device ``kitdev``,
    made by the first command of docs/porting.md's bring-up plan."""
    target = tmp_path_factory.mktemp("renamed") / "python"
    result = subprocess.run([hermetic_python(), str(RECIPE), str(STAGE_PYTHON), str(target),
                             "--device", "kitdev"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return target


def test_the_porting_recipe_gives_a_working_renamed_backend(renamed, tmp_path):
    """The second command of docs/porting.md's bring-up plan: on the renamed
    copy, plain ``import torch`` loads ``torch_kitdev`` (its entry point was
    renamed too), a computation on ``kitdev`` matches the CPU, and nothing of
    the copy still says accinte."""
    env = dict(os.environ, PYTHONPATH=str(renamed))
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    result = subprocess.run([hermetic_python(), str(RECIPE), "--check", "--device", "kitdev"],
                            env=env, cwd=tmp_path, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kitdev:0 matches the CPU" in result.stdout, result.stdout
    assert str(renamed / "torch_kitdev") in result.stdout, result.stdout
    probe = subprocess.run(
        [hermetic_python(), "-c", "import sys, torch; "
         "print(torch._C._get_privateuse1_backend_name(), 'torch_kitdev' in sys.modules)"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert probe.stdout.split() == ["kitdev", "True"], probe.stdout + probe.stderr
    # NB: the shared libraries keep their file names (the extension module
    # finds them through its RPATH, and PyTorch never sees them), and so do
    # the emulator's environment variables (ACCINTE_DEVICE_COUNT), which
    # belong to the device's runtime, not to the backend.
    left = [str(path.relative_to(renamed)) for path in renamed.rglob("*")
            if path.suffix != ".so" and ("accinte" in path.name
                                         or (path.is_file() and path.suffix in (".py", ".txt")
                                             and "accinte" in path.read_text()))]
    assert not left, left


def test_the_kit_holds_a_renamed_backend_to_the_stage_contract(renamed, tmp_path):
    """``python -m torch_kitdev.conformance --device kitdev --package
    torch_kitdev --expect-stage NN`` holds, and the report names kitdev."""
    result = _run_kit(renamed, "torch_kitdev", "kitdev", "--expect-stage", STAGE,
                      "--report", str(tmp_path / "report.md"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"stage {STAGE}: the stage contract holds" in result.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["device"] == "kitdev"
    assert report["environment"]["privateuse1_name"] == "kitdev"
    assert "`kitdev:0`" in (tmp_path / "report.md").read_text()
    statuses = {check["status"] for check in report["checks"]
                if check["chapter"].isdigit() and int(check["chapter"]) <= int(STAGE)}
    assert not statuses & {"failed", "blocked"}, statuses


def _statuses(report) -> dict:
    return {check["id"]: check["status"] for check in report["checks"]}


def test_a_broken_backend_fails_with_the_missing_mechanism(renamed, tmp_path):
    """The renamed stage with chapter 05's Python plugin emptied (no
    ``get_amp_supported_dtype``: autocast refuses the device) fails every
    autocast check with the section's missing line and nothing else: the
    parity check of chapter 05's names, which needs autocast, is reported
    *blocked by* it, in the autocast failure's group; the other parity
    checks pass. The stage contract breaks, which --expect-stage lists
    check by check."""
    broken = tmp_path / "python"
    shutil.copytree(renamed, broken)
    (broken / "torch_kitdev" / "_chapters" / "05_amp.py").write_text('"""Emptied."""\n')
    result = _run_kit(broken, "torch_kitdev", "kitdev", "--sections", "s00", "s05",
                      "--expect-stage", STAGE, "--report", str(tmp_path / "out.md"),
                      cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads((tmp_path / "out.json").read_text())
    statuses = _statuses(report)
    autocast = {check_id for check_id in statuses if check_id.startswith("s05_autocast.")}
    assert {i for i, s in statuses.items() if s == "failed"} == autocast
    gate = "s05_autocast.autocast_is_available"
    (blocked,) = [check for check in report["checks"] if check["status"] == "blocked"]
    assert blocked["id"] == "s00_parity.module_mirrors_torch_cuda_amp"
    assert blocked["blocked_by"] == [gate] and blocked["roots"] == [gate]
    assert {i for i, s in statuses.items() if s == "passed"} == {
        "s00_parity.module_mirrors_torch_cuda", "s00_parity.module_mirrors_torch_cuda_memory"}
    assert report["counts"] == {"passed": 2, "failed": len(autocast), "blocked": 1,
                                "skipped": 0}
    rows = {row["section"]: row for row in report["sections"]}
    assert rows["s05_autocast"]["status"] == "failed" and rows["s05_autocast"]["passed"] == 0
    missing = "autocast does nothing on the device"
    assert missing in rows["s05_autocast"]["first_failure"]
    assert rows["s00_parity"]["status"] == "blocked"
    (group,) = [g for g in report["root_causes"] if gate in g["failed"]]
    assert group["blocked"] == [blocked["id"]] and missing in group["missing"]
    text = (tmp_path / "out.md").read_text()
    assert "## Failures by root cause" in text and missing in text
    assert f"blocks 1: `{blocked['id']}`" in text
    assert f"2 passed, {len(autocast)} failed, 1 blocked, 0 skipped" in result.stdout
    assert result.stdout.count("expected to pass") == len(autocast) + 1
    assert f"{blocked['id']} (chapter 05): expected to pass on stage {STAGE}, blocked by " \
           f"{gate}" in result.stdout


def test_every_requirement_names_a_check_of_the_kit():
    """Each ``requires`` of every check names a check of the kit, and no
    chain of requirements comes back to where it started."""
    from torch_accinte.conformance import _discover, _plan

    plan = _plan(_discover(None))
    ids = {entry["id"] for entry in plan}
    needs = {entry["id"]: entry["requires"] for entry in plan}
    for check_id, required in needs.items():
        unknown = [name for name in required if name not in ids]
        assert not unknown, f"{check_id} requires {unknown}, which the kit does not have"

    def reach(check_id, seen):
        for name in needs[check_id]:
            assert name not in seen, f"a cycle of requirements: {' -> '.join(seen + (name,))}"
            reach(name, seen + (name,))

    for check_id in needs:
        reach(check_id, (check_id,))


def test_blocked_checks_and_root_causes():
    """A failure of a check whose requirement did not pass is *blocked*,
    transitively, with the failed check at the root; a passing check stays
    passed; a skipped or unknown requirement blocks nothing; the stage
    contract counts blocked as not passing."""
    from torch_accinte.conformance import (Run, counts, mismatches, resolve_blocked,
                                           root_causes)

    def entry(check_id, chapter, *requires):
        return {"id": check_id, "section": check_id.split(".")[0], "section_chapter": chapter,
                "title": "t", "check": check_id.split(".")[1], "chapter": chapter,
                "missing": f"{check_id} missing", "deadlines": 1, "requires": list(requires)}

    run = Run(device="dev", package=None, plan=[
        entry("s1.root", "01"), entry("s1.child", "01", "s1.root"),
        entry("s2.grandchild", "02", "s1.child"), entry("s2.survivor", "02", "s1.root"),
        entry("s2.skipped", "02"), entry("s2.after_skip", "02", "s2.skipped", "s9.unknown"),
    ])
    statuses = {"s1.root": "failed", "s1.child": "failed", "s2.grandchild": "failed",
                "s2.survivor": "passed", "s2.skipped": "skipped", "s2.after_skip": "failed"}
    run.results = {i: {"id": i, "status": s, "error": f"E {i}"} for i, s in statuses.items()}
    resolve_blocked(run)
    assert run.results["s1.child"]["blocked_by"] == ["s1.root"]
    assert run.results["s2.grandchild"]["blocked_by"] == ["s1.child"]
    assert run.results["s2.grandchild"]["roots"] == ["s1.root"]
    assert run.results["s2.survivor"]["status"] == "passed"
    assert run.results["s2.after_skip"]["status"] == "failed"
    assert counts(run) == {"passed": 1, "failed": 2, "blocked": 2, "skipped": 1}
    groups = {tuple(group["failed"]): group["blocked"] for group in root_causes(run)}
    assert groups == {("s1.root",): ["s1.child", "s2.grandchild"], ("s2.after_skip",): []}
    broken = mismatches(run, 1)
    assert any("s1.child" in line and "blocked by s1.root" in line for line in broken)
    assert not any("grandchild" in line for line in broken)  # chapter 02 > stage 01


#: The device module's ``torch.cuda``-like helpers a backend may well not
#: have: the device-generic APIs reach the same mechanisms without them.
HELPERS = (
    "synchronize", "set_device", "device", "device_of", "get_device_properties",
    "get_device_name", "get_device_capability", "current_stream", "default_stream",
    "stream", "set_stream", "empty_cache", "mem_get_info", "memory_allocated",
    "memory_reserved", "max_memory_allocated", "max_memory_reserved", "memory_stats",
    "reset_peak_memory_stats", "MemPool", "use_mem_pool",
)

WITHOUT_HELPERS = f"""

# Added by the conformance kit's test: torch.kitdev without {len(HELPERS)} helpers.
import sys as _sys
import types as _types
_full = torch.kitdev
_stripped = _types.ModuleType(_full.__name__, _full.__doc__)
_stripped.__dict__.update({{k: v for k, v in vars(_full).items() if k not in {HELPERS!r}}})


def _lookup(name, _removed={HELPERS!r}, _full=_full):
    # NB: the module's own __getattr__ reads its globals, the helpers included.
    if name in _removed:
        raise AttributeError(f"module 'torch.kitdev' has no attribute {{name!r}}")
    return getattr(_full, name)


_stripped.__getattr__ = _lookup
torch.kitdev = _stripped
_sys.modules["torch.kitdev"] = _stripped
"""


def test_a_backend_without_the_module_helpers_fails_only_parity(renamed, tmp_path):
    """The renamed stage whose ``torch.kitdev`` lacks the ``torch.cuda``-like
    helpers (synchronize, get_device_properties, current_stream, the memory
    functions, ...) fails the parity checks of chapters 01 and 07 and
    nothing else: the device, copies, streams and the caching allocator are
    checked through ``torch.accelerator``, ``torch.Stream`` and
    ``torch.accelerator.memory`` and pass. The memory-pool check, for which
    PyTorch has no device-generic API, is blocked by the parity check."""
    stripped = tmp_path / "python"
    shutil.copytree(renamed, stripped)
    init = stripped / "torch_kitdev" / "__init__.py"
    init.write_text(init.read_text() + WITHOUT_HELPERS)
    result = _run_kit(stripped, "torch_kitdev", "kitdev", "--sections", "s00", "s01", "s07",
                      "--report", str(tmp_path / "out.md"), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads((tmp_path / "out.json").read_text())
    statuses = _statuses(report)
    parity = {"s00_parity.module_mirrors_torch_cuda", "s00_parity.module_mirrors_torch_cuda_memory"}
    assert {i for i, s in statuses.items() if s == "failed"} == parity, result.stdout
    assert {i for i, s in statuses.items() if s == "blocked"} == {"s07_memory.memory_pools"}
    (pools,) = [c for c in report["checks"] if c["id"] == "s07_memory.memory_pools"]
    assert pools["blocked_by"] == ["s00_parity.module_mirrors_torch_cuda_memory"]
    assert set(statuses.values()) <= {"passed", "failed", "blocked", "skipped"}
    assert sum(status == "passed" for status in statuses.values()) >= 20
    for check_id in parity:
        (check,) = [c for c in report["checks"] if c["id"] == check_id]
        assert "torch.kitdev lacks" in check["error"]


HANG_AND_CRASH = '''
import os, signal, time
from .._api import Section, Skip

SECTION = Section(chapter="01", title="Runner self-test", missing="the runner's own test")

@SECTION.check(missing="a check that hangs")
def hangs(ctx):
    time.sleep(3600)

@SECTION.check(missing="a check that crashes")
def crashes(ctx):
    os.kill(os.getpid(), signal.SIGSEGV)

@SECTION.check
def skips(ctx):
    raise Skip("nothing to do here")

@SECTION.check
def passes(ctx):
    assert ctx.module.device_count() >= 1

@SECTION.check(deadlines=3)
def long_by_nature(ctx):
    time.sleep(7)
'''


def test_a_check_that_hangs_or_crashes_does_not_take_the_kit_down(tmp_path):
    """A check past --timeout, and one that kills its process, are each
    recorded as failed with their missing line; the checks after them run.
    A check registered with three deadlines may run past one."""
    kit = tmp_path / "conformance"
    shutil.copytree(KIT, kit, ignore=shutil.ignore_patterns("__pycache__"))
    (kit / "sections" / "s00_runner.py").write_text(HANG_AND_CRASH)
    result = _run_kit(STAGE_PYTHON, "torch_accinte", "accinte", "--timeout", "5",
                      "--sections", "s00_runner", "--report", str(tmp_path / "out.md"),
                      module="conformance", cwd=tmp_path, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    checks = {c["check"]: c for c in json.loads((tmp_path / "out.json").read_text())["checks"]}
    assert checks["hangs"]["status"] == "failed"
    assert "no result within 5 s" in checks["hangs"]["error"]
    assert checks["crashes"]["status"] == "failed"
    assert signal.Signals.SIGSEGV.name in checks["crashes"]["error"]
    assert checks["skips"]["status"] == "skipped"
    assert checks["passes"]["status"] == "passed"
    assert checks["long_by_nature"]["status"] == "passed", checks["long_by_nature"]
    text = (tmp_path / "out.md").read_text()
    assert "a check that hangs" in text and "a check that crashes" in text
