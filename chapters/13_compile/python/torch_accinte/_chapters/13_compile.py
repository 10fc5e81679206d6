"""Chapter 13: ``torch.compile`` on accinte.

Dynamo and Inductor keep registries of devices: Dynamo's device interfaces
(:pt-src:`torch._dynamo.device_interface`), Inductor's backends and device op
overrides (:pt-src:`torch._inductor.codegen.common`). accinte's entries are in
``torch_accinte.dynamo`` and ``torch_accinte.inductor``.

Importing Dynamo and Inductor takes longer than importing torch itself, and
most processes never compile, so this plug-in does not import them: it
registers accinte's entries the moment PyTorch imports the modules that use
them, through an import hook, or at once if they are already imported.
"""

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any


# LITERALINCLUDE START: CH13_REGISTER
# Which of accinte's modules to import once each of PyTorch's has run to the
# end: the whole of Dynamo; compile_fx, which Inductor imports after the code
# generators it drives and before it looks a backend up.
_REGISTRATIONS = {
    "torch._dynamo": "torch_accinte.dynamo",
    "torch._inductor.compile_fx": "torch_accinte.inductor",
}
# LITERALINCLUDE END: CH13_REGISTER


def _register(name: str) -> None:
    # NB: accinte's module registers when it is imported (its last line), so
    # importing it is the whole registration; if it is the module whose own
    # imports reached PyTorch's, it is half-run here, and registers when it
    # finishes.
    importlib.import_module(name)


class _RegisteringLoader(importlib.abc.Loader):
    """A module's own loader, plus a registration once the module ran."""

    def __init__(self, loader: Any, registration: str):
        self._loader = loader
        self._registration = registration

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _register(self._registration)

    def __getattr__(self, name: str) -> Any:
        # get_source, get_filename, ...: tracebacks still show the source.
        return getattr(self._loader, name)


class _RegisterOnImport(importlib.abc.MetaPathFinder):
    """Finds the modules of ``_REGISTRATIONS`` as Python would, and runs
    their registration right after they are imported."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        registration = _pending.pop(name, None)
        if registration is None:
            return None
        if not _pending:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _RegisteringLoader(spec.loader, registration)
        return spec


_pending: dict[str, str] = {}
for _name, _registration in _REGISTRATIONS.items():
    if _name in sys.modules:
        _register(_registration)
    else:
        _pending[_name] = _registration
if _pending:
    sys.meta_path.insert(0, _RegisterOnImport())
