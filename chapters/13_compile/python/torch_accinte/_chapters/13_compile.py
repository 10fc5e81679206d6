"""Chapter 13: ``torch.compile`` on accinte.

Dynamo and Inductor keep registries of devices: Dynamo's device interfaces
(``torch._dynamo.device_interface``), Inductor's backends and device op
overrides (``torch._inductor.codegen.common``). accinte's entries are in
``torch_accinte.dynamo`` and ``torch_accinte.inductor``.

Importing Dynamo and Inductor takes longer than importing torch itself, and
most processes never compile, so this plug-in does not import them: it
registers accinte's entries the moment PyTorch imports the modules that use
them, through an import hook, or at once if they are already imported.
"""

import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any, Callable


# LITERALINCLUDE START: CH13_REGISTER
def _register_dynamo(_dynamo: ModuleType) -> None:
    from torch_accinte import dynamo

    dynamo.register()


def _register_inductor(_compile_fx: ModuleType) -> None:
    from torch._inductor.codegen.common import (
        register_backend_for_device,
        register_device_op_overrides,
    )

    from torch_accinte.inductor import (
        AccinteCacheKey,
        AccinteDeviceOpOverrides,
        AccinteScheduling,
        AccinteWrapperCodegen,
        fix_device_type_checks,
    )

    register_backend_for_device(
        "accinte",
        AccinteScheduling,
        AccinteWrapperCodegen,
        device_custom_pass=AccinteCacheKey(),
    )
    register_device_op_overrides("accinte", AccinteDeviceOpOverrides())
    fix_device_type_checks()


# NB: each registration runs once its module has run to the end: the whole
# of Dynamo for the first; for the second compile_fx, which Inductor imports
# after the code generators it drives and before it looks a backend up.
_REGISTRATIONS = {
    "torch._dynamo": _register_dynamo,
    "torch._inductor.compile_fx": _register_inductor,
}
# LITERALINCLUDE END: CH13_REGISTER


class _RegisteringLoader(importlib.abc.Loader):
    """A module's own loader, plus a registration once the module ran."""

    def __init__(self, loader: Any, register: Callable[[ModuleType], None]):
        self._loader = loader
        self._register = register

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._register(module)

    def __getattr__(self, name: str) -> Any:
        # get_source, get_filename, ...: tracebacks still show the source.
        return getattr(self._loader, name)


class _RegisterOnImport(importlib.abc.MetaPathFinder):
    """Finds the modules of ``_REGISTRATIONS`` as Python would, and runs
    their registration right after they are imported."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        register = _pending.pop(name, None)
        if register is None:
            return None
        if not _pending:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _RegisteringLoader(spec.loader, register)
        return spec


_pending: dict[str, Callable[[ModuleType], None]] = {}
for _name, _register in _REGISTRATIONS.items():
    if _name in sys.modules:
        _register(sys.modules[_name])
    else:
        _pending[_name] = _register
if _pending:
    sys.meta_path.insert(0, _RegisterOnImport())
