"""Builds the final stage with CMake and installs it as ``torch_accinte``.

``pip install --no-build-isolation .`` (the build must see the installed
torch, so build isolation is off).
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

ROOT = os.path.dirname(os.path.abspath(__file__))
CMAKE_DIR = os.path.join(ROOT, "build", "cmake")


def final_stage():
    """The highest stage CMake configured (build/cmake/stages.txt)."""
    with open(os.path.join(CMAKE_DIR, "stages.txt")) as stages:
        return stages.read().split(";")[-1].strip()


def stage_python_dir():
    return os.path.join(ROOT, "build", f"stage{final_stage()}", "python")


class BuildFinalStage(build_ext):
    """Configures and builds with CMake, then copies the final stage tree."""

    def run(self):
        subprocess.check_call(
            ["cmake", "-S", ROOT, "-B", CMAKE_DIR, "-G", "Ninja",
             f"-DPython3_EXECUTABLE={sys.executable}"]
        )
        subprocess.check_call(
            ["cmake", "--build", CMAKE_DIR, "--target", f"stage{final_stage()}"]
        )
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


# NB: setuptools writes a torch_accinte.egg-info while it builds, by default
# into the repository root; with the entry point inside, a Python started in
# the root would find it first on sys.path and try to autoload from it.
EGG_BASE = os.path.join(ROOT, "build")
os.makedirs(EGG_BASE, exist_ok=True)

setup(
    # NB: no source package to list: the package is the final stage's tree,
    # which exists only once CMake has built it; BuildFinalStage (run as the
    # build_ext step, since the package is all compiled code and its glue)
    # copies it into the wheel.
    packages=[],
    cmdclass={"build_ext": BuildFinalStage},
    distclass=BinaryDistribution,
    entry_points=entry_points(),
    zip_safe=False,
    options={"egg_info": {"egg_base": EGG_BASE}},
)
