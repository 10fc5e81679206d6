"""Chapter 06: torch_accinte in each install state, in virtual environments.

`pip install --no-build-isolation -e .` (editable: the build tree is the
package, and `make stage` is the develop loop), a wheel installed in another
environment, and the states where the backend cannot load: `import torch`
must then warn, naming the fix, and go on without the device.

Slow (builds and installs): runs only with ACCINTE_TEST_INSTALL=1, as
`make test` sets it. Hermetic: each environment is a fresh venv without the
system's site-packages; torch and the build tools come from one more venv
that holds nothing else (made once per machine, outside the clone, and shared),
so a torch_accinte installed anywhere else cannot change the results. The
editable install is made from a copy of the repository under build/, whose
chapter files the develop-loop test edits.
"""

import fcntl
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import textwrap
import uuid

import numpy
import pytest
import setuptools
import torch
import wheel as wheel_package
from test_readme import usage_example

pytestmark = pytest.mark.skipif(
    os.environ.get("ACCINTE_TEST_INSTALL") != "1",
    reason="builds and installs the package into venvs; set ACCINTE_TEST_INSTALL=1")

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORK = ROOT / "build" / "install-tests"
#: The copy of the repository that is installed in editable mode.
CHECKOUT = WORK / "repo"
#: Where what outlives a clone is kept (tools/install_deps.sh's cache).
TORCH_CACHE = pathlib.Path(os.environ.get("ACCINTE_TORCH_CACHE") or pathlib.Path(
    os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache") / "torch_accinte")
TORCH_RELEASE = torch.__version__.split("+")[0]
HINT = "TORCH_DEVICE_BACKEND_AUTOLOAD=0"
_EMPTY = tempfile.TemporaryDirectory(prefix="ch06_install_")


def final_stage() -> str:
    chapters = sorted(path.parent.name for path in
                      ROOT.glob("chapters/[0-9][0-9]_*/CMakeLists.txt"))
    return chapters[-1][:2]


def clean_env(**extra) -> dict:
    """The environment of a user's shell: nothing of this test run's
    PYTHONPATH or autoload setting."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "TORCH_DEVICE_BACKEND_AUTOLOAD")}
    env["ACCINTE_DEVICE_COUNT"] = "2"
    env.update(extra)
    return env


def run(command, timeout=900, check=True, **kwargs):
    result = subprocess.run(
        [str(part) for part in command], capture_output=True, text=True,
        cwd=kwargs.pop("cwd", _EMPTY.name), env=kwargs.pop("env", clean_env()),
        timeout=timeout, **kwargs)
    if check:
        assert result.returncode == 0, (
            f"{command} failed:\n{result.stdout}\n{result.stderr}")
    return result


def python_in(venv: pathlib.Path, code: str):
    """Runs ``code`` as a user would: the venv's interpreter, started in an
    empty directory, no PYTHONPATH, autoload left to its default."""
    return run([venv / "bin" / "python", "-c", textwrap.dedent(code)],
               timeout=300, check=False)


@pytest.fixture(scope="module")
def work_lock():
    """One pytest session at a time uses build/install-tests/."""
    WORK.mkdir(parents=True, exist_ok=True)
    with open(WORK / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
        fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def torch_site(work_lock) -> pathlib.Path:
    """site-packages of a venv that holds torch (and numpy, without which it
    warns) and the build tools only.

    NB: pinned to this interpreter's releases, which the local wheel cache
    holds. Made once per machine (about a minute), outside the clone, as
    tools/install_deps.sh keeps the extra releases of torch, and never
    changed after: the tests only read it (each installs into a fresh venv
    of its own), so every clean clone can share it. Made aside and renamed
    into place, so that a run stopped halfway leaves nothing that looks
    ready and two runs at once keep one copy.
    """
    wanted = (f"torch=={TORCH_RELEASE} numpy=={numpy.__version__} "
              f"setuptools=={setuptools.__version__} "
              f"wheel=={wheel_package.__version__}")
    key = hashlib.sha256(f"{sys.version} {wanted}".encode()).hexdigest()[:12]
    base = TORCH_CACHE / "install-tests" / f"torch-{TORCH_RELEASE}-{key}"
    if not (base / "ready").exists():
        partial = base.with_name(f"{base.name}.partial.{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        try:
            run([sys.executable, "-m", "venv", partial])
            run([partial / "bin" / "python", "-m", "pip", "install", "-q",
                 *wanted.split()])
            (partial / "ready").write_text(wanted)
            partial.rename(base)
        except OSError:
            if not (base / "ready").exists():
                raise
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    (site,) = base.glob("lib/python*/site-packages")
    return site


def fresh_venv(name: str, torch_site: pathlib.Path) -> pathlib.Path:
    """A new, empty venv that sees torch (and pip) from ``torch_site``."""
    venv = WORK / name
    shutil.rmtree(venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", "--without-pip", venv])
    (site,) = venv.glob("lib/python*/site-packages")
    (site / "_torch_base.pth").write_text(
        f"import site; site.addsitedir({str(torch_site)!r})\n")
    return venv


def pip(venv: pathlib.Path, *args):
    return run([venv / "bin" / "python", "-m", "pip", *args])


def sync_sources(source: pathlib.Path, target: pathlib.Path) -> None:
    """Makes ``target`` a copy of the repository's sources (not build/ or
    .git/), rewriting only the files that differ, so that the copy's build
    tree rebuilds only what changed."""
    skip = {"build", ".git", "__pycache__", ".pytest_cache"}
    wanted = set()
    for folder, dirs, files in os.walk(source):
        dirs[:] = [d for d in dirs if d not in skip and not d.endswith(".egg-info")]
        for name in files:
            relative = pathlib.Path(folder, name).relative_to(source)
            wanted.add(relative)
            src, dst = source / relative, target / relative
            src_stat = src.stat()
            if dst.exists():
                dst_stat = dst.stat()
                if (dst_stat.st_size, dst_stat.st_mtime_ns) == (
                        src_stat.st_size, src_stat.st_mtime_ns):
                    continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    for folder, dirs, files in os.walk(target):
        if pathlib.Path(folder) == target:
            dirs[:] = [d for d in dirs if d != "build"]
        for name in files:
            path = pathlib.Path(folder, name)
            if path.relative_to(target) not in wanted and "__pycache__" not in path.parts:
                path.unlink()


def make_stage(tree: pathlib.Path) -> None:
    """The develop loop's command, `make stage`, in ``tree``.

    NB: with this test run's interpreter, whose torch is the venvs' release:
    the build tree then compiles against the same headers as the main build,
    so the first build of the copy comes from ccache.
    """
    (tree / "build").mkdir(exist_ok=True)
    (tree / "build" / ".deps").touch()  # the tools are installed already
    run(["make", "-C", tree, "--no-print-directory", "stage",
         f"PYTHON={sys.executable}"])


@pytest.fixture(scope="module")
def checkout(work_lock) -> pathlib.Path:
    moved = CHECKOUT / "build-deleted"  # left by an interrupted run
    if moved.exists() and not (CHECKOUT / "build").exists():
        moved.rename(CHECKOUT / "build")
    for stale in CHECKOUT.glob("build/stage*/python/torch_accinte/_C.cpython-39-*"):
        stale.unlink()  # left by an interrupted stale-tree test
    sync_sources(ROOT, CHECKOUT)
    make_stage(CHECKOUT)
    return CHECKOUT


@pytest.fixture(scope="module")
def editable(checkout, torch_site) -> pathlib.Path:
    """A venv with `pip install --no-build-isolation -e <checkout>`."""
    venv = fresh_venv("venv-editable", torch_site)
    pip(venv, "install", "-q", "--no-build-isolation", "--no-deps", "-e", checkout)
    return venv


def stage_of(tree: pathlib.Path) -> pathlib.Path:
    return tree / "build" / f"stage{final_stage()}" / "python"


def assert_readme_example_runs(venv: pathlib.Path) -> None:
    result = python_in(venv, usage_example())
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "accinte:0 2 devices"
    assert str(torch.arange(6.0).reshape(2, 3) + 2) in result.stdout
    assert result.stderr == ""


def assert_warns_and_torch_works(venv: pathlib.Path, *fix: str) -> str:
    result = python_in(venv, """
        import sys, torch
        assert "torch_accinte" not in sys.modules and not hasattr(torch, "accinte")
        print("TORCH OK", torch.ones(2).add(1).tolist())
    """)
    assert result.returncode == 0, result.stderr
    assert "TORCH OK [2.0, 2.0]" in result.stdout
    assert "RuntimeWarning: The accinte backend failed to autoload" in result.stderr
    for text in (*fix, HINT):
        assert text in result.stderr, result.stderr
    return result.stderr


def test_the_editable_install_is_the_build_tree(editable, checkout):
    (site,) = editable.glob("lib/python*/site-packages")
    assert not (site / "torch_accinte").exists(), "a copy was installed"
    (pth,) = site.glob("__editable__.torch_accinte-*.pth")
    assert pth.read_text().split() == [str(stage_of(checkout))]
    assert_readme_example_runs(editable)
    result = python_in(editable, """
        import sys, torch, torch_accinte
        print(torch_accinte.__file__)
        print(sys.modules["_torch_accinte_autoload"].__file__)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        str(stage_of(checkout) / "torch_accinte" / "__init__.py"),
        str(stage_of(checkout) / "_torch_accinte_autoload.py")]


def test_the_editable_install_sees_a_change_after_make_stage(editable, checkout):
    # A chapter's Python file and chapter 06's entry module, which the
    # editable install runs from the build tree as well.
    edited = [checkout / "chapters/01_minimal_ops/python/torch_accinte/device_module.py",
              checkout / "chapters/06_autoload/python/_torch_accinte_autoload.py"]
    originals = [path.read_bytes() for path in edited]
    token = uuid.uuid4().hex
    probe = """
        import sys, torch
        print(getattr(torch.accinte, "DEVELOP_PROBE", None),
              getattr(sys.modules["_torch_accinte_autoload"], "DEVELOP_PROBE", None))
    """
    try:
        for path in edited:
            path.write_text(path.read_text() + f"\nDEVELOP_PROBE = {token!r}\n")
        before = python_in(editable, probe)
        assert before.returncode == 0, before.stderr
        assert before.stdout.split() == ["None", "None"]  # not built yet
        make_stage(checkout)
        after = python_in(editable, probe)
        assert after.returncode == 0, after.stderr
        assert after.stdout.split() == [token, token]
    finally:
        for path, original in zip(edited, originals):
            path.write_bytes(original)
        make_stage(checkout)


def test_the_editable_install_without_its_build_folder_warns(editable, checkout):
    moved = checkout / "build-deleted"
    (checkout / "build").rename(moved)
    try:
        stderr = assert_warns_and_torch_works(
            editable, "installed in editable mode", f"`make stage` in {checkout}")
        assert str(stage_of(checkout)) in stderr
    finally:
        moved.rename(checkout / "build")


def test_the_editable_install_of_a_stale_build_tree_warns(editable, checkout):
    # The extension module of a build tree another Python built.
    (extension,) = (stage_of(checkout) / "torch_accinte").glob("_C.*.so")
    stale = extension.with_name("_C.cpython-39-x86_64-linux-gnu.so")
    extension.rename(stale)
    try:
        assert_warns_and_torch_works(
            editable, f"the build tree {stage_of(checkout)} does not load",
            "`make stage`")
    finally:
        stale.rename(extension)


@pytest.fixture(scope="module")
def wheel(torch_site) -> pathlib.Path:
    """`pip wheel --no-build-isolation .` of the repository under test."""
    builder = fresh_venv("venv-wheel-build", torch_site)
    out = WORK / "wheels"
    shutil.rmtree(out, ignore_errors=True)
    pip(builder, "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", out, ROOT)
    (built,) = out.glob("torch_accinte-*.whl")
    return built


def test_the_wheel_works_in_another_venv(wheel, torch_site):
    venv = fresh_venv("venv-wheel", torch_site)
    pip(venv, "install", "-q", "--no-index", wheel)
    assert_readme_example_runs(venv)
    (site,) = venv.glob("lib/python*/site-packages")
    result = python_in(venv, "import torch, torch_accinte; print(torch_accinte.__file__)")
    assert result.stdout.strip() == str(site / "torch_accinte" / "__init__.py")
    assert [path.name for path in site.glob("*.pth")] == ["_torch_base.pth"]

    # A broken installed copy: the warning says to reinstall it.
    library = site / "torch_accinte" / "lib" / "libaccinte.so"
    original = library.read_bytes()
    library.write_bytes(b"not ELF")
    try:
        assert_warns_and_torch_works(
            venv, "libaccinte.so", f"the copy installed in {site} does not load",
            "reinstall")
    finally:
        library.write_bytes(original)
    assert_readme_example_runs(venv)
