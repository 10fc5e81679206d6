"""A Python interpreter that sees no installed PyTorch backend.

Every test, and every ``output/`` script, that starts a fresh interpreter
means to run the stage on its ``PYTHONPATH`` and nothing else of the
backend. An installed copy breaks that: ``make demo`` runs ``pip install .``,
which puts ``torch_accinte``, its metadata and its ``torch.backends`` entry
point into the site-packages that also holds torch. A child interpreter
would then find the installed package where a test has removed it from the
path, and PyTorch would autoload the installed entry point where a test
expects none.

Neither of Python's switches helps: ``-s`` hides only the user's
site-packages, and ``-S`` (or ``-I``) hides torch too. So ``python()``
returns the interpreter of a virtual environment, made once per process,
whose site-packages holds a symbolic link to every entry of this
interpreter's site-packages except the files of the distributions that
declare a ``torch.backends`` entry point (or are named torch_accinte).
Everything else, torch and its dependencies, ``.pth`` files included,
is the same files; a child started with ``sys.executable`` from there (a
torchrun rank, say) is hermetic too.

Usable without torch or a stage (tools/generate_outputs.py imports it).
"""

import atexit
import importlib.metadata
import os
import pathlib
import shutil
import site
import sys
import sysconfig
import tempfile
import venv

#: The entry-point group PyTorch autoloads backends from.
BACKEND_GROUP = "torch.backends"
#: Always hidden, whatever its metadata says.
PROJECT = "torch_accinte"

_python = None


def _site_dirs() -> list:
    """This interpreter's site-packages directories, first on sys.path first."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        dirs.insert(0, site.getusersitepackages())
    return [d for d in dirs if os.path.isdir(d)]


def _is_backend(dist) -> bool:
    name = (dist.metadata["Name"] or "").lower().replace("-", "_")
    return name == PROJECT or any(
        point.group == BACKEND_GROUP for point in dist.entry_points)


def hidden_entries(site_dir: str) -> set:
    """The top-level names in ``site_dir`` that belong to a backend."""
    hidden = set()
    for dist in importlib.metadata.distributions(path=[site_dir]):
        if not _is_backend(dist):
            continue
        # NB: the metadata directory itself, then every file its RECORD
        # lists (the package, the entry-point module, an editable install's
        # .pth and finder); RECORD paths outside site-packages start "..".
        hidden.add(pathlib.Path(dist._path).name)
        for file in dist.files or []:
            top = pathlib.PurePath(file).parts[0]
            if top not in ("..", "__pycache__"):
                hidden.add(top)
        for top in (dist.read_text("top_level.txt") or "").split():
            hidden.add(top)
            hidden.add(top + ".py")
    return hidden


def python() -> str:
    """The path of the hermetic interpreter (see the module docstring)."""
    global _python
    if _python is not None:
        return _python
    root = tempfile.mkdtemp(prefix="hermetic_python_")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    scheme = {"base": root, "platbase": root}
    target = pathlib.Path(sysconfig.get_path("purelib", vars=scheme))
    linked = set(os.listdir(target))
    for site_dir in _site_dirs():
        hidden = hidden_entries(site_dir)
        for name in sorted(os.listdir(site_dir)):
            if name in hidden or name in linked or name == "__pycache__":
                continue
            os.symlink(os.path.join(site_dir, name), target / name)
            linked.add(name)
    _python = os.path.join(root, "bin", "python")
    return _python


if __name__ == "__main__":
    # `python3 tools/hermetic_python.py`: what would be hidden, and where.
    for site_dir in _site_dirs():
        print(site_dir, sorted(hidden_entries(site_dir)) or "(nothing hidden)")
