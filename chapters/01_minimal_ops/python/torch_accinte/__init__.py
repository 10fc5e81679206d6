"""The accinte device for PyTorch.

Importing this package makes :py:class:`torch.device("accinte") <torch.device>`
real: it loads the backend's libraries, renames PyTorch's PrivateUse1 backend
to ``accinte``, registers ``torch.accinte`` and the generated
``Tensor.accinte()`` family of methods, then loads what later chapters add.
"""

import importlib
import pkgutil

# NB: torch first: the extension module links against libtorch, which the
# dynamic loader finds because importing torch already loaded it.
import torch

# LITERALINCLUDE START: CH01_PYTHON_REGISTRATION
from torch_accinte import _C  # noqa: F401  (loads every registration)
from torch_accinte import device_module

torch.utils.rename_privateuse1_backend("accinte")
torch._register_device_module("accinte", device_module)
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_storage=True
)
# LITERALINCLUDE END: CH01_PYTHON_REGISTRATION


# LITERALINCLUDE START: CH01_CHAPTER_PLUGINS
def _load_chapters():
    """Imports every module in ``torch_accinte._chapters``, in name order.

    A later chapter adds a module named after its directory there
    (``02_fallback.py``, ...) instead of editing this file, so each stage
    loads exactly the chapters it contains, and ``loaded_chapters`` names
    them.
    """
    from torch_accinte import _chapters

    names = sorted(info.name for info in pkgutil.iter_modules(_chapters.__path__))
    for name in names:
        importlib.import_module(f"torch_accinte._chapters.{name}")
    return tuple(names)


loaded_chapters = ("01_minimal_ops",) + _load_chapters()
# LITERALINCLUDE END: CH01_CHAPTER_PLUGINS
