"""The ``torch.backends`` entry point of torch_accinte (chapter 06).

PyTorch calls :func:`autoload` near the end of ``import torch``, unless
``TORCH_DEVICE_BACKEND_AUTOLOAD`` is set to anything but ``1``. The entry
point is declared in ``torch_accinte-<version>.dist-info/entry_points.txt``.

NB: this module sits beside the ``torch_accinte`` package, not inside it.
PyTorch turns any exception from loading or calling an entry point into a
RuntimeError that aborts ``import torch``. An entry point inside the package
would run ``torch_accinte/__init__.py`` (and load the native libraries) while
PyTorch resolves it, before any code of ours could catch a failure; from
here, a broken backend costs the device, not ``import torch``.
"""

import glob
import importlib
import importlib.util
import os
import sys
import warnings

_DISABLE_HINT = "set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to turn backend autoload off"


# LITERALINCLUDE START: CH06_SHADOWED
def _package_beside_this_module(spec) -> bool:
    """Whether ``import torch_accinte`` would load the package that was
    installed (or staged) together with this entry point.

    NB: an entry point names modules, not files. A stage tree of chapters 01
    to 05 on ``PYTHONPATH`` has no metadata of its own, so with an installed
    torch_accinte PyTorch finds the installed entry point, while
    ``import torch_accinte`` finds the stage: the stage would be autoloaded
    by someone else's metadata. Those stages are meant to load only on an
    explicit ``import torch_accinte``, so such a mix loads nothing here.
    """
    package_dir = os.path.dirname(os.path.abspath(spec.origin))
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.dirname(package_dir) == here
# LITERALINCLUDE END: CH06_SHADOWED


# LITERALINCLUDE START: CH06_HOW_TO_FIX
def _how_to_fix(tree: str) -> str:
    """The fix for a copy in ``tree`` that does not load: an installer wrote
    a RECORD into its metadata, a build tree (a stage) has none."""
    if glob.glob(os.path.join(tree, "torch_accinte-*.dist-info", "RECORD")):
        return (f"the copy installed in {tree} does not load: reinstall it "
                "for this torch and Python (`pip install "
                "--no-build-isolation .` in the repository)")
    return (f"the build tree {tree} does not load: rebuild it for this torch "
            "and Python (`make stage` in its repository)")
# LITERALINCLUDE END: CH06_HOW_TO_FIX


# LITERALINCLUDE START: CH06_AUTOLOAD
def autoload() -> None:
    """Imports torch_accinte, which registers the accinte device; on failure,
    warns instead of raising, so ``import torch`` still succeeds."""
    # NB: the import cycle. `import torch_accinte` as a program's first import
    # runs `import torch` from the package's first lines, and torch then runs
    # this function while torch_accinte is half imported. Importing it here
    # would hand back that half-built module; the import under way finishes
    # the registration, so there is nothing to do.
    if "torch_accinte" in sys.modules:
        return
    here = os.path.dirname(os.path.abspath(__file__))
    fix = None
    try:
        spec = importlib.util.find_spec("torch_accinte")
        if spec is None or spec.origin is None:
            fix = "reinstall torch_accinte, or remove that metadata"
            raise ImportError(
                f"no torch_accinte package on sys.path, although its metadata "
                f"is in {here}"
            )
        if not _package_beside_this_module(spec):
            return
        importlib.import_module("torch_accinte")
    except Exception as error:
        warnings.warn(
            "The accinte backend failed to autoload, so `import torch` went on "
            f"without the accinte device:\n  {type(error).__name__}: {error}\n"
            f"The fix: {fix or _how_to_fix(here)}. `import torch_accinte` shows the full "
            f"traceback; {_DISABLE_HINT}.",
            RuntimeWarning,
            stacklevel=2,
        )
# LITERALINCLUDE END: CH06_AUTOLOAD
