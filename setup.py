"""Builds the final stage with CMake and installs it as ``torch_accinte``.

``pip install --no-build-isolation .`` installs a copy of the final stage (the
build must see the installed torch, so build isolation is off);
``pip install --no-build-isolation -e .`` installs no copy: the final stage's
tree in build/ is what every interpreter imports, so ``make stage`` is the
whole develop loop (chapter 06's page, "Install states").
"""

import configparser
import glob
import os
import shutil
import subprocess
import sys

# NB: before anything imports torch: with an older torch_accinte installed,
# autoload would otherwise load that stale copy while building the new one.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

from setuptools import Distribution, setup  # noqa: E402
from setuptools.command.build_ext import build_ext  # noqa: E402
from setuptools.command.editable_wheel import editable_wheel  # noqa: E402

ROOT = os.path.dirname(os.path.abspath(__file__))
CMAKE_DIR = os.path.join(ROOT, "build", "cmake")


def final_stage():
    """The highest chapter number: the stage that holds every chapter.

    NB: from the chapter directories, as the Makefile and CMake discover
    them, not from CMake's stages.txt: an editable install needs the stage's
    path before CMake has configured anything.
    """
    pattern = os.path.join(ROOT, "chapters", "[0-9][0-9]_*", "CMakeLists.txt")
    chapters = sorted(os.path.basename(os.path.dirname(path))
                      for path in glob.glob(pattern))
    return chapters[-1][:2]


def stage_python_dir():
    return os.path.join(ROOT, "build", f"stage{final_stage()}", "python")


def torch_build(python):
    """What the compiled backend depends on in ``python``: the exact torch
    build, its C++ ABI, and the extension-module suffix (the Python ABI)."""
    result = subprocess.run(
        [python, "-c",
         "import sysconfig, torch; print(torch.__version__, "
         "torch.version.git_version, torch._C._GLIBCXX_USE_CXX11_ABI, "
         "sysconfig.get_config_var('EXT_SUFFIX'))"],
        capture_output=True, text=True,
    )
    return result.stdout.strip() if result.returncode == 0 else None


def configured_python():
    """The interpreter build/cmake was configured with, if any."""
    try:
        with open(os.path.join(CMAKE_DIR, "CMakeCache.txt")) as cache:
            for line in cache:
                if line.startswith("Python3_EXECUTABLE:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


def cmake_configure_args():
    """Configure build/cmake for this interpreter, unless it already is for
    one with the same torch build.

    NB: CMake compiles against the headers of the torch its interpreter
    imports, so another interpreter means other include paths and a rebuild
    of every chapter. A virtual environment with the same torch release as
    the interpreter `make` configured (the usual develop setup, and the
    install tests) builds the same binaries: keeping the configuration keeps
    `pip install -e .` and `make stage` from rebuilding everything in turn.
    """
    args = ["cmake", "-S", ROOT, "-B", CMAKE_DIR, "-G", "Ninja",
            f"-DACCINTE_STAGE_ROOT={os.path.join(ROOT, 'build')}"]
    configured = configured_python()
    if configured == sys.executable or (
            configured is not None and os.path.exists(configured)
            and torch_build(configured) == torch_build(sys.executable)):
        return args
    return args + [f"-DPython3_EXECUTABLE={sys.executable}"]


class BuildFinalStage(build_ext):
    """Configures and builds with CMake; for a wheel, copies the final stage
    tree into it. An editable install uses the tree where it is."""

    def run(self):
        subprocess.check_call(cmake_configure_args())
        subprocess.check_call(
            ["cmake", "--build", CMAKE_DIR, "--target", f"stage{final_stage()}"]
        )
        if self.editable_mode:
            return
        source = os.path.join(stage_python_dir(), "torch_accinte")
        target = os.path.join(self.build_lib, "torch_accinte")
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target, symlinks=False,
                        ignore=shutil.ignore_patterns("__pycache__"))
        # NB: top-level modules beside the package too: chapter 06's autoload
        # entry point lives outside torch_accinte (see its docstring). The
        # stage's *.dist-info is not copied; the wheel gets its own metadata.
        for module in glob.glob(os.path.join(stage_python_dir(), "*.py")):
            shutil.copy(module, self.build_lib)


# LITERALINCLUDE START: CH06_EDITABLE_ENTRY
EDITABLE_ENTRY = '''"""The autoload entry point of an editable install of torch_accinte.

Written by setup.py (`pip install -e {root}`). The backend is the build tree
{stage}, which a .pth file beside this module puts on sys.path. This module
is a real file, so that a missing build tree costs the device, never
`import torch`; it runs the build tree's own entry module, so `make stage`
updates that one too.
"""

import importlib.util
import os
import sys
import warnings

ROOT = {root!r}
STAGE = {stage!r}


def autoload() -> None:
    path = os.path.join(STAGE, __name__ + ".py")
    try:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"the build tree has no {{path}}")
        spec = importlib.util.spec_from_file_location(__name__, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        # From here on, the process looks as if the build tree were on
        # PYTHONPATH: the entry module is the build tree's.
        sys.modules[__name__] = module
        module.autoload()
    except Exception as error:
        warnings.warn(
            "The accinte backend failed to autoload, so `import torch` went "
            "on without the accinte device:\\n  "
            f"{{type(error).__name__}}: {{error}}\\n"
            f"torch_accinte is installed in editable mode from {{ROOT}}: it "
            f"is the build tree {{STAGE}}. Run `make stage` in {{ROOT}} to "
            "rebuild it, or `pip uninstall torch_accinte`; set "
            "TORCH_DEVICE_BACKEND_AUTOLOAD=0 to turn backend autoload off.",
            RuntimeWarning,
            stacklevel=2,
        )
'''
# LITERALINCLUDE END: CH06_EDITABLE_ENTRY


class _StageOnSysPath:
    """What an editable wheel holds besides its metadata: a .pth file that
    puts the final stage's tree on sys.path, and the entry module.

    NB: a path entry rather than setuptools' default for this project (which,
    with no source package, would be the repository root) or its import
    finder (a fixed map of module names): the package is not a source tree
    but the tree CMake assembles from every chapter, so a path to that tree
    is what `PYTHONPATH=build/stageNN/python` is, and sees every file
    `make stage` writes, new ones included, at no cost on start-up.
    """

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        pass

    def __call__(self, wheel, files, mapping):
        stage = stage_python_dir()
        wheel.writestr(f"__editable__.{self.name}.pth", f"{stage}\n".encode())
        module, _ = entry_point_target()
        wheel.writestr(f"{module}.py",
                       EDITABLE_ENTRY.format(root=ROOT, stage=stage).encode())


class EditableFinalStage(editable_wheel):
    """`pip install -e .`: the final stage's tree, used where it is built."""

    def _select_strategy(self, name, tag, build_lib):
        return _StageOnSysPath(name)


# NB: a private method of setuptools; fail the build loudly rather than let
# setuptools silently install its default (a path to the repository root,
# where nothing is importable: `import torch` would then fail).
assert hasattr(editable_wheel, "_select_strategy"), (
    "setuptools changed its editable_wheel command: see EditableFinalStage")


class BinaryDistribution(Distribution):
    """The package ships compiled libraries: its wheel is platform-specific."""

    def has_ext_modules(self):
        return True


def entry_points():
    """Entry points the chapters declare in a ``*.dist-info/entry_points.txt``
    of their Python tree (chapter 06 adds the ``torch.backends`` autoload
    entry point).

    NB: read from the chapters' sources, not from the built stage: pip asks
    for the metadata (entry points included) before build_ext has run, so on
    a fresh checkout the stage tree does not exist yet. The final stage holds
    every chapter, so both give the same entry points.
    """
    found = {}
    pattern = os.path.join(ROOT, "chapters", "[0-9][0-9]_*", "python",
                           "*.dist-info", "entry_points.txt")
    for path in sorted(glob.glob(pattern)):
        parser = configparser.ConfigParser()
        parser.read(path)
        for group in parser.sections():
            found.setdefault(group, []).extend(
                f"{name} = {value}" for name, value in parser.items(group)
            )
    return found


def entry_point_target():
    """(module, function) of the ``torch.backends`` entry point."""
    (point,) = entry_points()["torch.backends"]
    return tuple(point.split("=", 1)[1].strip().split(":"))


# NB: setuptools writes a torch_accinte.egg-info while it builds, by default
# into the repository root; with the entry point inside, a Python started in
# the root would find it first on sys.path and try to autoload from it.
EGG_BASE = os.path.join(ROOT, "build")
os.makedirs(EGG_BASE, exist_ok=True)

setup(
    # NB: no source package to list: the package is the final stage's tree,
    # which exists only once CMake has built it; BuildFinalStage (run as the
    # build_ext step, since the package is all compiled code and its glue)
    # copies it into the wheel, and an editable install points at it.
    packages=[],
    cmdclass={"build_ext": BuildFinalStage,
              "editable_wheel": EditableFinalStage},
    distclass=BinaryDistribution,
    entry_points=entry_points(),
    zip_safe=False,
    options={"egg_info": {"egg_base": EGG_BASE}},
)
