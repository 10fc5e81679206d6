"""Chapter 13: Dynamo's device interface for accinte.

``torch._dynamo.device_interface`` keeps one
:pt-src:`DeviceInterface <torch._dynamo.device_interface.DeviceInterface>` per
device type: what Dynamo and Inductor ask of a device while they compile (its
current device and stream, its properties, how to synchronize), and what lets
Dynamo trace code that uses ``torch.accinte`` streams and events. The
chapter's plug-in registers ``AccinteInterface`` when Dynamo is imported
(``_chapters/13_compile.py``).
"""

from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface

from torch_accinte import _C


# NB: the device Inductor's compile workers were told to use; they compile
# for it without changing the process's current device.
_worker_device = [0]


# LITERALINCLUDE START: CH13_INTERFACE
class AccinteInterface(DeviceInterface):
    """What Dynamo and Inductor ask of the accinte device."""

    device = torch.accinte.device
    Event = torch.accinte.Event
    Stream = torch.accinte.Stream

    class Worker:
        """The device Inductor's compile workers compile for, set without
        changing the process's current device."""

        @staticmethod
        def set_device(device: int) -> None:
            _worker_device[0] = device

        @staticmethod
        def current_device() -> int:
            return _worker_device[0]

        @staticmethod
        def get_device_properties(device: torch.types.Device = None) -> Any:
            if device is None:
                device = _worker_device[0]
            return torch.accinte.get_device_properties(device)
    # LITERALINCLUDE END: CH13_INTERFACE

    # LITERALINCLUDE START: CH13_DEVICE_FUNCTIONS
    current_device = staticmethod(torch.accinte.current_device)
    set_device = staticmethod(torch.accinte.set_device)
    device_count = staticmethod(torch.accinte.device_count)
    stream = staticmethod(torch.accinte.stream)
    current_stream = staticmethod(torch.accinte.current_stream)
    set_stream = staticmethod(torch.accinte.set_stream)
    synchronize = staticmethod(torch.accinte.synchronize)
    get_device_properties = staticmethod(torch.accinte.get_device_properties)
    get_raw_stream = staticmethod(_C._current_raw_stream)
    memory_allocated = staticmethod(torch.accinte.memory_allocated)
    is_bf16_supported = staticmethod(torch.accinte.is_bf16_supported)

    @staticmethod
    def is_available() -> bool:
        return torch.accinte.is_available()

    @staticmethod
    def exchange_device(device: int) -> int:
        previous = torch.accinte.current_device()
        torch.accinte.set_device(device)
        return previous

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        return AccinteInterface.exchange_device(device)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        torch.accinte.set_stream(
            torch.Stream(
                stream_id=stream_id, device_index=device_index, device_type=device_type
            )
        )

    @staticmethod
    def get_compute_capability(device: torch.types.Device = None) -> str:
        major, minor = torch.accinte.get_device_capability(device)
        return f"{major}.{minor}"

    @staticmethod
    def is_triton_capable(device: torch.types.Device = None) -> bool:
        # NB: no Triton backend here; Inductor then never picks Triton for
        # the device, whatever config.cpu_backend says.
        return False
# LITERALINCLUDE END: CH13_DEVICE_FUNCTIONS



# LITERALINCLUDE START: CH13_POLYFILLS
# NB: Dynamo knows torch.cuda's stream and device functions by name and
# traces them into the graph; any other device module's functions it would
# step into, down to their pybind11 calls, and break the graph there. Each of
# these maps accinte's function to its torch.accelerator counterpart, which
# Dynamo knows for every device.
#
# torch.accinte.synchronize() breaks the graph on purpose, and runs eagerly:
# in the graph it would be a node with no device, which does not make
# Inductor's C++ scheduling emit the kernels it holds back for fusion first,
# so they would run after the synchronize instead of before it.
def _synchronize(device: Any = None) -> None:
    torch._dynamo.graph_break(
        "torch.accinte.synchronize() runs between compiled graphs (chapter 13)")


def _current_device() -> int:
    return torch.accelerator.current_device_index()


# NB: the number of devices is fixed for the process (the emulator reads it
# once), so Dynamo may take it as a constant of the graph when it traces,
# as it could not take torch.accelerator.device_count(), an operator that
# returns no tensor (it fails under fullgraph=True, as torch.cuda's does on
# torch 2.13).
@torch.compiler.assume_constant_result
def _counted_devices() -> int:
    return torch.accelerator.device_count()


def _device_count() -> int:
    return _counted_devices()


def _is_available() -> bool:
    return torch.accelerator.is_available()


def _current_stream(device: Any = None) -> torch.Stream:
    if device is None:
        return torch.accelerator.current_stream()
    return torch.accelerator.current_stream(device)


def _set_stream(stream: torch.Stream) -> None:
    torch.accelerator.set_stream(stream)


_POLYFILLS = {
    "synchronize": _synchronize,
    "current_device": _current_device,
    "device_count": _device_count,
    "is_available": _is_available,
    "current_stream": _current_stream,
    "set_stream": _set_stream,
}
# LITERALINCLUDE END: CH13_POLYFILLS


# LITERALINCLUDE START: CH13_DYNAMO_REGISTRATION
def register() -> None:
    """Registers accinte with Dynamo; this module's import does."""
    from torch._dynamo import substitute_in_graph
    from torch._dynamo.device_interface import register_interface_for_device
    from torch._dynamo.trace_rules import get_torch_obj_rule_map
    from torch._dynamo.variables import TorchInGraphFunctionVariable

    register_interface_for_device("accinte", AccinteInterface)
    for name, polyfill in _POLYFILLS.items():
        substitute_in_graph(getattr(torch.accinte, name))(polyfill)
    # NB: torch.accinte.stream(s) has no torch.accelerator counterpart, but
    # Dynamo turns the `stream` of every registered device interface into a
    # stream context, once the function counts as one of torch's.
    get_torch_obj_rule_map()[torch.accinte.stream] = TorchInGraphFunctionVariable
# LITERALINCLUDE END: CH13_DYNAMO_REGISTRATION


register()
