"""``torch.accinte``: the device module, modelled on ``torch.cuda``.

PyTorch looks some of these functions up by name (``is_available``,
``device_count``, ``current_device``, ``_lazy_init``, ``_is_in_bad_fork``),
and device-agnostic code calls the rest exactly as it would call
``torch.cuda``.
"""

import sys
import threading
from typing import Any, Optional, Union

import torch
from torch_accinte import _C

#: What a failing call of the device raises, as ``torch.cuda``'s: PyTorch's
#: own classes, both subclasses of ``RuntimeError``.
AcceleratorError = torch.AcceleratorError
OutOfMemoryError = torch.OutOfMemoryError

__all__ = [
    "AcceleratorError",
    "Event",
    "OutOfMemoryError",
    "Stream",
    "StreamContext",
    "can_device_access_peer",
    "clock_rate",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_sync_debug_mode",
    "init",
    "is_available",
    "is_initialized",
    "memory_usage",
    "power_draw",
    "set_device",
    "set_stream",
    "set_sync_debug_mode",
    "stream",
    "synchronize",
    "temperature",
    "utilization",
]

_DeviceLike = Union[int, str, torch.device, None]

_initialized = False
_initialization_lock = threading.Lock()


def _extend(**functions: Any) -> None:
    """Adds a later chapter's public functions to ``torch.accinte``.

    The extension point for chapters 05-08 (autocast dtypes, memory
    statistics, random number generation): each adds its functions from its
    plug-in module, so this file never changes.
    """
    for name, function in functions.items():
        if name in globals():
            raise RuntimeError(f"torch.accinte.{name} is already defined")
        globals()[name] = function
        if not name.startswith("_"):
            __all__.append(name)


_lazy_attributes: dict = {}
_lazy_attributes_lock = threading.RLock()


def _extend_lazily(**factories: Any) -> None:
    """Adds names to ``torch.accinte`` whose values are made on first use.

    For a value that asks the device, such as a tuple with one entry per
    device, which importing the package must not do (``torch.cuda`` fills
    its ``default_generators`` when CUDA initializes).
    """
    for name, factory in factories.items():
        if name in globals() or name in _lazy_attributes:
            raise RuntimeError(f"torch.accinte.{name} is already defined")
        _lazy_attributes[name] = factory
        __all__.append(name)


def __getattr__(name: str) -> Any:
    with _lazy_attributes_lock:
        if name in globals():
            return globals()[name]
        factory = _lazy_attributes.get(name)
        if factory is None:
            raise AttributeError(f"module 'torch.accinte' has no attribute '{name}'")
        globals()[name] = value = factory()
        return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_lazy_attributes))


def _get_device_index(device: _DeviceLike, optional: bool = True) -> int:
    """Index of ``device`` (an int, ``"accinte:N"`` or a ``torch.device``).

    ``None`` and an index-less ``"accinte"`` mean the current device.
    """
    if device is None:
        if not optional:
            raise ValueError("Expected an accinte device, got None")
        return current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "accinte":
        raise ValueError(f"Expected an accinte device, got {device}")
    return current_device() if device.index is None else device.index


# LITERALINCLUDE START: CH01_PY_LAZY_INIT
def _is_in_bad_fork() -> bool:
    """True in a child process forked after the device was initialized."""
    return _C._is_in_bad_fork()


def is_initialized() -> bool:
    """Whether the device is initialized in this process."""
    return _initialized and not _is_in_bad_fork()


def _lazy_init() -> None:
    """Initializes the device once; PyTorch calls this before first use."""
    global _initialized
    if is_initialized():
        return
    with _initialization_lock:
        if is_initialized():
            return
        if _is_in_bad_fork():
            raise RuntimeError(
                "Cannot re-initialize accinte in a forked subprocess: the "
                "parent initialized the device before fork(). To use accinte "
                "with multiprocessing, use the 'spawn' start method."
            )
        _C._init()
        _initialized = True
# LITERALINCLUDE END: CH01_PY_LAZY_INIT


def init() -> None:
    """Initializes the device explicitly (as ``torch.cuda.init``)."""
    _lazy_init()


def is_available() -> bool:
    """Whether at least one accinte device can be used."""
    return device_count() > 0


def device_count() -> int:
    """Number of accinte devices (``ACCINTE_DEVICE_COUNT``)."""
    if _is_in_bad_fork():
        return 0
    return _C._get_device_count()


def current_device() -> int:
    """Index of the calling thread's current device."""
    _lazy_init()
    return _C._get_device()


def set_device(device: _DeviceLike) -> None:
    """Makes ``device`` the calling thread's current device.

    As ``torch.cuda.set_device``, a negative index does nothing (code that
    stores -1 for "no device" passes it on), not even initialize the device.
    """
    index = _get_device_index(device)
    if index < 0:
        return
    _lazy_init()
    _C._set_device(index)


def can_device_access_peer(device: _DeviceLike, peer_device: _DeviceLike) -> bool:
    """Whether kernels of ``device`` can read the memory of ``peer_device``.

    Always ``False``: an emulated kernel may touch only allocations of its
    own device, so data moves between devices by copies (which work between
    any two). As ``torch.cuda``'s, an invalid index raises
    ``AssertionError``, and a device is not its own peer.
    """
    _lazy_init()
    device = _get_device_index(device)
    peer_device = _get_device_index(peer_device)
    if device < 0 or device >= device_count():
        raise AssertionError("Invalid device id")
    if peer_device < 0 or peer_device >= device_count():
        raise AssertionError("Invalid peer device id")
    return False


class device:
    """Context manager that makes ``device`` current, then restores exactly
    the device that was current on entry, even if the body changed it.

    ``None`` or a negative index leave the current device unchanged.
    """

    def __init__(self, device: _DeviceLike):
        self.index = -1 if device is None else _get_device_index(device)
        self.previous = -1

    def __enter__(self):
        if self.index >= 0:
            _lazy_init()
            self.previous = _C._exchange_device(self.index)
        return self

    def __exit__(self, *exc_info):
        if self.previous >= 0:
            _C._set_device(self.previous)
        return False


class device_of(device):
    """Context manager that makes the device of ``obj`` (a tensor or a
    storage) current, as :class:`device`; for an object that is not on
    accinte it changes nothing."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == "accinte" else -1)


def synchronize(device: _DeviceLike = None) -> None:
    """Waits for all work on every stream of ``device``."""
    _lazy_init()
    _C._synchronize(_get_device_index(device))


# LITERALINCLUDE START: CH01_PY_SYNC_DEBUG
def set_sync_debug_mode(debug_mode: Union[int, str]) -> None:
    """What an operation that makes the host wait for the device does:
    ``"default"`` (0) nothing, ``"warn"`` (1) warn, ``"error"`` (2) raise.

    As ``torch.cuda``'s, for the whole process. The synchronizing operations
    are the copies to and from the host that are not asynchronous
    (``.cpu()``, ``.to("accinte")``, printing), ``.item()``, a stream's
    ``synchronize()``, and, from chapter 02 on, every operator that runs on
    the CPU fallback, which copies its tensors to the host and back;
    ``synchronize()`` of a whole device is meant and is not one.
    """
    _lazy_init()
    if isinstance(debug_mode, str):
        modes = {"default": 0, "warn": 1, "error": 2}
        if debug_mode not in modes:
            raise RuntimeError(
                "invalid value of debug_mode, expected one of `default`, `warn`, `error`"
            )
        debug_mode = modes[debug_mode]
    _C._set_sync_debug_mode(debug_mode)


def get_sync_debug_mode() -> int:
    """The mode :func:`set_sync_debug_mode` set, as an int (0 by default)."""
    _lazy_init()
    return _C._get_sync_debug_mode()
# LITERALINCLUDE END: CH01_PY_SYNC_DEBUG


class _DeviceProperties:
    """Properties of one device, as ``torch.cuda.get_device_properties``."""

    def __init__(self, properties: dict):
        self.name = properties["name"]
        self.total_memory = properties["total_memory"]
        self.major = properties["major"]
        self.minor = properties["minor"]
        self.multi_processor_count = properties["multi_processor_count"]

    def __repr__(self) -> str:
        return (
            f"_AccinteDeviceProperties(name='{self.name}', "
            f"major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // (1024 * 1024)}MB, "
            f"multi_processor_count={self.multi_processor_count})"
        )


def get_device_properties(device: _DeviceLike = None) -> _DeviceProperties:
    """Properties (name, total memory, ...) of ``device``."""
    _lazy_init()
    return _DeviceProperties(_C._get_device_properties(_get_device_index(device)))


def get_device_name(device: _DeviceLike = None) -> str:
    """Name of ``device``."""
    return get_device_properties(device).name


def get_device_capability(device: _DeviceLike = None) -> tuple:
    """(major, minor) capability of ``device``."""
    properties = get_device_properties(device)
    return properties.major, properties.minor


# LITERALINCLUDE START: CH01_PY_TELEMETRY
def utilization(device: _DeviceLike = None) -> int:
    """Percent of time over the past sample period during which one or more
    kernels was executing on ``device``, as ``torch.cuda.utilization``.

    The emulator measures it: the sample period is the last second, and
    kernels running at once on several streams count once.
    """
    return _C._get_utilization_rates(_get_device_index(device))[0]


def memory_usage(device: _DeviceLike = None) -> int:
    """Percent of time over the past sample period during which the memory
    of ``device`` was being read or written, as ``torch.cuda.memory_usage``.

    The emulator counts its copies and memsets; what kernels read and write
    is not told apart from their computing.
    """
    return _C._get_utilization_rates(_get_device_index(device))[1]


def clock_rate(device: _DeviceLike = None) -> int:
    """Clock of the multiprocessors of ``device`` in MHz, as
    ``torch.cuda.clock_rate``; the emulator's is fixed."""
    return _C._get_clock_rate(_get_device_index(device))


def temperature(device: _DeviceLike = None) -> int:
    """Temperature of ``device`` in degrees Celsius, as
    ``torch.cuda.temperature``; the emulator's rises with its utilization."""
    return _C._get_temperature(_get_device_index(device))


def power_draw(device: _DeviceLike = None) -> int:
    """Power drawn by ``device`` in milliwatts, as ``torch.cuda.power_draw``;
    the emulator's rises with its utilization."""
    return _C._get_power_draw(_get_device_index(device))
# LITERALINCLUDE END: CH01_PY_TELEMETRY


class Stream(torch.Stream):
    """A new stream on ``device`` (default: current); lower priority numbers
    run first. Usable wherever a ``torch.Stream`` is."""

    def __new__(cls, device: _DeviceLike = None, priority: int = 0):
        _lazy_init()
        return super().__new__(
            cls, device=torch.device("accinte", _get_device_index(device)),
            priority=priority,
        )


class Event(torch.Event):
    """A new event on the current device. Usable wherever a ``torch.Event``
    is; ``enable_timing=True`` allows ``elapsed_time``.

    NB: the object made is a plain ``torch.Event``, not an instance of this
    class: ``torch.Event.elapsed_time`` and ``torch.Stream.record_event``
    accept only that exact type, so an instance of a subclass would be
    refused as the other event of ``start.elapsed_time(end)``.
    """

    def __new__(cls, enable_timing: bool = False, blocking: bool = False,
                interprocess: bool = False):
        _lazy_init()
        return torch.Event(
            device=torch.device("accinte", current_device()),
            enable_timing=enable_timing, blocking=blocking,
            interprocess=interprocess,
        )


def current_stream(device: _DeviceLike = None) -> torch.Stream:
    """The calling thread's current stream on ``device``."""
    _lazy_init()
    return torch.accelerator.current_stream(_get_device_index(device))


def default_stream(device: _DeviceLike = None) -> torch.Stream:
    """The default stream of ``device`` (stream id 0)."""
    _lazy_init()
    stream_id, device_index, device_type = _C._get_default_stream(
        _get_device_index(device)
    )
    return torch.Stream(
        stream_id=stream_id, device_index=device_index, device_type=device_type
    )


def set_stream(stream: torch.Stream) -> None:
    """Makes ``stream`` current on its device for the calling thread."""
    _lazy_init()
    torch.accelerator.set_stream(stream)


class StreamContext:
    """Context manager that makes ``stream`` current, then restores.

    As ``torch.cuda.StreamContext``: inside the block the stream's device is
    the current device too; on exit the stream that was current on that
    device and the device that was current on entry are both restored.
    ``None`` changes nothing.
    """

    def __init__(self, stream: Optional[torch.Stream]):
        self.stream = stream
        self.previous_stream: Optional[torch.Stream] = None
        self.previous_device = -1

    def __enter__(self):
        if self.stream is not None:
            self.previous_device = current_device()
            self.previous_stream = current_stream(self.stream.device_index)
            # NB: setting a stream also makes its device current.
            set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc_info):
        if self.previous_stream is not None:
            set_stream(self.previous_stream)
            _C._set_device(self.previous_device)
        return False


def stream(stream: Optional[torch.Stream]) -> StreamContext:
    """A :class:`StreamContext` that makes ``stream`` current in its ``with``
    block (as ``torch.cuda.stream``)."""
    return StreamContext(stream)


# ``torch.accinte.streams``, importable by that name as ``torch.cuda.streams``
# is; torch._register_device_module puts ``torch.accinte`` beside it.
from torch_accinte import streams  # noqa: E402

sys.modules["torch.accinte.streams"] = streams
