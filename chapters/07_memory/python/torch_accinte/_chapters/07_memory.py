"""Chapter 07: the memory functions of ``torch.accinte``.

Each mirrors its ``torch.cuda`` namesake and reads the caching allocator of
``csrc/caching_allocator.cpp`` through ``_C``. :py:mod:`torch.accelerator`'s
memory functions reach the same allocator through
:pt-src:`c10::getDeviceAllocator`, so the two agree.
"""

import collections
import contextlib
import ctypes
import os
import sys
import warnings
from typing import Any, Optional

import torch
from torch_accinte import _C, device_module
from torch_accinte.device_module import _DeviceLike, _get_device_index, _lazy_init


def _index(device: _DeviceLike) -> int:
    _lazy_init()
    return _get_device_index(device, optional=True)


# LITERALINCLUDE START: CH07_PY_STATS
def memory_stats_as_nested_dict(device: _DeviceLike = None) -> dict[str, Any]:
    """The allocator's statistics of ``device`` as nested dicts."""
    return _C._memory_stats(_index(device))  # LITERALINCLUDE EMPHASIZE


def _flatten(nested: dict) -> dict[str, Any]:
    """``nested`` with flat keys ("a.b.c"), sorted, as torch.cuda's stats."""
    flat = []

    def flatten(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                # LITERALINCLUDE EMPHASIZE NEXT
                flatten(f"{prefix}.{key}" if prefix else key, item)
        else:
            flat.append((prefix, value))

    flatten("", nested)
    return collections.OrderedDict(sorted(flat))  # LITERALINCLUDE EMPHASIZE


def memory_stats(device: _DeviceLike = None) -> dict[str, Any]:
    """The allocator's statistics of ``device``, with flat keys such as
    ``"allocated_bytes.all.current"``, sorted, as ``torch.cuda.memory_stats``.
    """
    return _flatten(memory_stats_as_nested_dict(device))


def memory_allocated(device: _DeviceLike = None) -> int:
    """Bytes of device memory occupied by tensors (rounded block sizes)."""
    # LITERALINCLUDE EMPHASIZE NEXT
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: _DeviceLike = None) -> int:
    """Peak of :func:`memory_allocated` since the last peak reset."""
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: _DeviceLike = None) -> int:
    """Bytes of device memory the allocator holds: in use or cached."""
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device: _DeviceLike = None) -> int:
    """Peak of :func:`memory_reserved` since the last peak reset."""
    return memory_stats(device)["reserved_bytes.all.peak"]
# LITERALINCLUDE END: CH07_PY_STATS


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    """Sets every peak statistic of ``device`` to its current value."""
    _C._reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device: _DeviceLike = None) -> None:
    """Zeroes the accumulated (allocated/freed) counts and event counters."""
    _C._reset_accumulated_memory_stats(_index(device))


def empty_cache() -> None:
    """Returns every cached, unused segment of every device to the device.

    Memory held by tensors stays; so do segments that a tensor still uses
    part of.
    """
    _lazy_init()
    _C._empty_cache()


def mem_get_info(device: _DeviceLike = None) -> tuple[int, int]:
    """``(free, total)`` bytes of ``device``, as the device itself counts
    them: cached blocks are not free."""
    return _C._mem_get_info(_index(device))


def memory_summary(device: _DeviceLike = None, abbreviated: bool = False) -> str:
    """A table of the allocator's statistics of ``device``.

    Rows are the statistics, columns their current and peak values and the
    totals allocated and freed; ``abbreviated`` leaves out the per-pool rows.
    """
    index = _index(device)
    stats = memory_stats(index)
    rows = [
        ("Allocated memory", "allocated_bytes", True),
        ("Requested memory", "requested_bytes", True),
        ("Active memory", "active_bytes", True),
        ("Reserved memory", "reserved_bytes", True),
        ("Inactive split memory", "inactive_split_bytes", True),
        ("Allocations", "allocation", False),
        ("Active blocks", "active", False),
        ("Segments", "segment", False),
        ("Inactive split blocks", "inactive_split", False),
    ]
    pools = ["all"] if abbreviated else ["all", "large_pool", "small_pool"]
    header = f"{'':<34}{'current':>14}{'peak':>14}{'allocated':>14}{'freed':>14}"
    lines = [f"accinte memory summary, device {index}", header, "-" * len(header)]
    for title, key, in_bytes in rows:
        for pool in pools:
            label = title if pool == "all" else f"  from {pool.replace('_', ' ')}"
            values = [stats[f"{key}.{pool}.{metric}"]
                      for metric in ("current", "peak", "allocated", "freed")]
            cells = "".join(
                f"{_format_bytes(v) if in_bytes else v:>14}" for v in values)
            lines.append(f"{label:<34}{cells}")
    lines.append("-" * len(header))
    for key in ("num_alloc_retries", "num_ooms", "num_device_alloc",
                "num_device_free", "num_sync_all_streams"):
        lines.append(f"{key:<34}{stats[key]:>14}")
    return "\n".join(lines) + "\n"


# LITERALINCLUDE START: CH07_PY_FRACTION
def set_per_process_memory_fraction(fraction: float, device: _DeviceLike = None) -> None:
    """Caps what the caching allocator may reserve on ``device`` at
    ``fraction`` (0 to 1) of the device's memory.

    As ``torch.cuda``'s: a request past the cap first frees the cache, then
    raises ``torch.OutOfMemoryError``, whose message names the cap; memory
    already reserved stays.
    """
    index = _index(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(fraction, index)


def get_per_process_memory_fraction(device: _DeviceLike = None) -> float:
    """The cap :func:`set_per_process_memory_fraction` set (1.0 by default)."""
    return _C._get_memory_fraction(_index(device))
# LITERALINCLUDE END: CH07_PY_FRACTION


def _reset_all_peaks(name: str, device: _DeviceLike) -> None:
    """What the deprecated resets do: every peak statistic, as
    :func:`reset_peak_memory_stats`, and say so, as ``torch.cuda``'s do."""
    warnings.warn(
        f"torch.accinte.{name} now calls "
        "torch.accinte.reset_peak_memory_stats, which resets /all/ peak memory stats.",
        FutureWarning, stacklevel=3,
    )
    reset_peak_memory_stats(device)


def reset_max_memory_allocated(device: _DeviceLike = None) -> None:
    """Deprecated: resets every peak statistic (see :func:`reset_peak_memory_stats`)."""
    _reset_all_peaks("reset_max_memory_allocated", device)


def reset_max_memory_cached(device: _DeviceLike = None) -> None:
    """Deprecated: resets every peak statistic (see :func:`reset_peak_memory_stats`)."""
    _reset_all_peaks("reset_max_memory_cached", device)


def memory_cached(device: _DeviceLike = None) -> int:
    """Deprecated name of :func:`memory_reserved`."""
    warnings.warn(
        "`torch.accinte.memory_cached` has been renamed to `torch.accinte.memory_reserved`",
        FutureWarning, stacklevel=2,
    )
    return memory_reserved(device)


def max_memory_cached(device: _DeviceLike = None) -> int:
    """Deprecated name of :func:`max_memory_reserved`."""
    warnings.warn(
        "`torch.accinte.max_memory_cached` has been renamed to "
        "`torch.accinte.max_memory_reserved`",
        FutureWarning, stacklevel=2,
    )
    return max_memory_reserved(device)


def memory_snapshot(mempool_id: Optional[tuple] = None,
                    include_traces: bool = True) -> list:
    """The caching allocator's segments of every device, as
    ``torch.cuda.memory_snapshot``: one dict per segment (``device``,
    ``address``, ``total_size``, ``allocated_size``, ``active_size``,
    ``requested_size``, ``stream``, ``segment_type`` "small" or "large",
    ``segment_pool_id``: the :class:`MemPool` it belongs to, ``(0, 0)`` for
    the general pools), with its ``blocks`` in address order (``address``,
    ``size``, ``requested_size``, ``state``: "active_allocated",
    "active_pending_free" or "inactive").

    With ``mempool_id``, only the segments of that pool. No call stacks are
    recorded (``frames`` are empty, whatever ``include_traces`` says).
    """
    segments = _C._memory_snapshot()
    if mempool_id is None:
        return segments
    wanted = tuple(mempool_id)
    return [segment for segment in segments if segment["segment_pool_id"] == wanted]


def host_memory_stats_as_nested_dict() -> dict[str, Any]:
    """The pinned host allocator's statistics as nested dicts (empty before
    the device initializes, as ``torch.cuda``'s)."""
    if not device_module.is_initialized():
        return {}
    return _C._host_memory_stats()


def host_memory_stats() -> dict[str, Any]:
    """The pinned host allocator's statistics with flat keys, sorted, as
    ``torch.cuda.host_memory_stats``: ``allocations``, ``allocated_bytes``,
    ``active_requests``, ``active_bytes`` (each ``.current``, ``.peak``,
    ``.allocated``, ``.freed``), ``num_host_alloc``, ``num_host_free`` and
    the times of the emulator's pinned allocations and frees
    (``host_alloc_time.*``, ``host_free_time.*``, microseconds)."""
    return _flatten(host_memory_stats_as_nested_dict())


def reset_accumulated_host_memory_stats() -> None:
    """Zeroes the pinned host allocator's accumulated counts."""
    _C._reset_accumulated_host_memory_stats()


def reset_peak_host_memory_stats() -> None:
    """Sets the pinned host allocator's peaks to their current values."""
    _C._reset_peak_host_memory_stats()


def device_memory_used(device: _DeviceLike = None) -> int:
    """Bytes of ``device`` in use, as the device counts them (what
    ``nvidia-smi`` shows for a CUDA device): its total less its free
    memory, cached segments included."""
    free, total = mem_get_info(device)
    return total - free


def list_gpu_processes(device: _DeviceLike = None) -> str:
    """The processes that use ``device`` and the memory each holds there, in
    the text ``torch.cuda.list_gpu_processes`` prints.

    An emulated device lives inside one process, so the list is this process
    once it has initialized the device, with :func:`device_memory_used`;
    before that no process uses it (and asking does not initialize it).
    """
    initialized = device_module.is_initialized()
    # NB: before initialization the current device is 0; asking for it would
    # initialize the device.
    index = 0 if device is None and not initialized else _get_device_index(device)
    lines = [f"GPU:{index}"]
    if not initialized:
        lines.append("no processes are running")
    else:
        used = device_memory_used(index) / (1024 * 1024)
        lines.append(f"process {os.getpid():>10d} uses {used:>12.3f} MB GPU memory")
    return "\n".join(lines)


def get_allocator_backend() -> str:
    """The device allocator in use: ``"native"``, the caching allocator of
    this chapter, or ``"pluggable"`` once :func:`change_current_allocator`
    replaced it."""
    return _C._allocator_backend()


# LITERALINCLUDE START: CH07_PY_PLUGGABLE
class _AccinteAllocator:
    """A device allocator that :func:`change_current_allocator` can make
    current, as ``torch.cuda.memory._CUDAAllocator``."""

    def __init__(self, allocator: "_C._PluggableAllocator"):
        self._allocator = allocator

    def allocator(self) -> "_C._PluggableAllocator":
        """The allocator object of ``_C``."""
        return self._allocator


class AccintePluggableAllocator(_AccinteAllocator):
    """A device allocator loaded from a shared library, as
    ``torch.cuda.memory.CUDAPluggableAllocator``.

    The library's ``alloc_fn_name`` has the signature
    ``void* alloc(ssize_t size, int device, accinteStream_t stream)`` and
    returns device memory (from ``accinteMalloc``, say), or NULL when it has
    none; its ``free_fn_name`` is
    ``void free(void* ptr, ssize_t size, int device, accinteStream_t stream)``
    and gets the size, device and stream of the allocation back.
    """

    def __init__(self, path_to_so_file: str, alloc_fn_name: str, free_fn_name: str):
        library = ctypes.CDLL(path_to_so_file)  # LITERALINCLUDE EMPHASIZE
        alloc_fn = ctypes.cast(getattr(library, alloc_fn_name), ctypes.c_void_p).value
        free_fn = ctypes.cast(getattr(library, free_fn_name), ctypes.c_void_p).value
        # NB: the library stays loaded as long as the allocator may call it.
        self._library = library
        super().__init__(_C._pluggable_allocator(alloc_fn, free_fn))


def change_current_allocator(allocator: "AccintePluggableAllocator") -> None:
    """Makes ``allocator`` allocate every later tensor instead of the caching
    allocator, as ``torch.cuda.memory.change_current_allocator``: only
    before the caching allocator has allocated anything in the process."""
    if not isinstance(allocator, _AccinteAllocator):
        raise TypeError("change_current_allocator takes an allocator such as "
                        "torch.accinte.memory.AccintePluggableAllocator, not "
                        f"{type(allocator).__name__}")
    _lazy_init()
    _C._change_current_allocator(allocator.allocator())
# LITERALINCLUDE END: CH07_PY_PLUGGABLE


# LITERALINCLUDE START: CH07_PY_MEMPOOL
class MemPool(_C._MemPool):
    """A private pool of the caching allocator, as ``torch.cuda.MemPool``.

    Made on the current device. Inside :func:`use_mem_pool`, the thread's
    allocations take blocks of the pool's own segments; freed, the blocks
    return to the pool, and no allocation outside it ever gets them. Once
    the pool object is gone and its tensors are freed, its segments go back
    to the device (at once if no tensor of it is alive, else at the next
    :func:`empty_cache`).

    ``allocator`` (an :class:`AccintePluggableAllocator`) reserves the
    pool's segments instead of ``accinteMalloc``. CUDA's ``use_on_oom`` and
    ``no_split`` are not supported. With the cache switched off
    (:func:`caching_allocator_enable`), allocations bypass pools too.
    """

    def __init__(self, allocator: Optional[AccintePluggableAllocator] = None,
                 use_on_oom: bool = False, no_split: bool = False):
        if use_on_oom or no_split:
            raise NotImplementedError(
                "torch.accinte.MemPool supports neither use_on_oom nor no_split")
        if isinstance(allocator, _AccinteAllocator):
            allocator = allocator.allocator()
        _lazy_init()
        super().__init__(allocator)

    @property
    def id(self) -> tuple[int, int]:
        """The pool's id: ``(0, n)``, n counting the pools of the process."""
        return super().id

    def use_count(self) -> int:
        """The references to the pool: this object, and each
        :func:`use_mem_pool` block that routes to it."""
        return super().use_count()

    def snapshot(self, include_traces: bool = True) -> list:
        """:func:`memory_snapshot` of the pool's segments only."""
        return memory_snapshot(self.id, include_traces=include_traces)


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device: _DeviceLike = None):
    """Routes the allocations of the current thread on ``device`` (default:
    the current device) to ``pool`` in its ``with`` block, as
    ``torch.cuda.use_mem_pool``; other threads, such as autograd's backward
    threads, allocate as before. In nested blocks of one thread, the pool
    routed first serves it, as on CUDA."""
    if not isinstance(pool, MemPool):
        raise TypeError(f"use_mem_pool takes a torch.accinte.MemPool, not "
                        f"{type(pool).__name__}")
    _lazy_init()
    index = _get_device_index(device)
    _C._begin_allocate_to_pool(index, pool)  # LITERALINCLUDE EMPHASIZE
    try:
        yield
    finally:
        _C._end_allocate_to_pool(index, pool.id)
        _C._release_pool(index, pool.id)  # LITERALINCLUDE EMPHASIZE
# LITERALINCLUDE END: CH07_PY_MEMPOOL


def caching_allocator_alloc(size: int, device: _DeviceLike = None,
                            stream: Optional[torch.Stream] = None) -> int:
    """``size`` bytes from the caching allocator on ``device`` for ``stream``
    (default: the device's current stream), as an address, for code that
    manages device memory itself. Free it with
    :func:`caching_allocator_delete`."""
    index = _index(device)
    if stream is None:
        stream = device_module.current_stream(index)
    if not isinstance(stream, torch.Stream):
        raise TypeError("Invalid type for stream argument, must be "
                        "`torch.accinte.Stream`")
    if stream.device != torch.device("accinte", index):
        raise ValueError(f"stream is on {stream.device}, not on accinte:{index}")
    with device_module.StreamContext(stream):
        return _C._caching_allocator_alloc(size)


def caching_allocator_delete(mem_ptr: int) -> None:
    """Frees memory of :func:`caching_allocator_alloc`; the allocator
    remembers its device and stream."""
    _C._caching_allocator_delete(mem_ptr)


def caching_allocator_enable(value: bool = True) -> None:
    """Switches the caching allocator on (the default) or off.

    Off, each tensor is one device allocation, returned to the device (which
    waits for it) as soon as the tensor is freed, outside the statistics.
    As ``torch.cuda``'s, it does nothing before the device initializes.
    """
    if device_module.is_initialized():
        _C._caching_allocator_enable(bool(value))


@contextlib.contextmanager
def caching_allocator_disabled():
    """Switches the caching allocator off in its ``with`` block, then back
    to what it was."""
    previous = _C._caching_allocator_is_enabled()
    caching_allocator_enable(False)
    try:
        yield
    finally:
        caching_allocator_enable(previous)


def _format_bytes(nbytes: int) -> str:
    if abs(nbytes) < 1024:
        return f"{nbytes} B"
    value = float(nbytes)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}"


# LITERALINCLUDE START: CH07_PY_EXTEND
device_module._extend(
    memory_stats=memory_stats,
    memory_stats_as_nested_dict=memory_stats_as_nested_dict,
    memory_allocated=memory_allocated,
    max_memory_allocated=max_memory_allocated,
    memory_reserved=memory_reserved,
    max_memory_reserved=max_memory_reserved,
    reset_peak_memory_stats=reset_peak_memory_stats,
    reset_accumulated_memory_stats=reset_accumulated_memory_stats,
    empty_cache=empty_cache,
    mem_get_info=mem_get_info,
    memory_summary=memory_summary,
    set_per_process_memory_fraction=set_per_process_memory_fraction,
    get_per_process_memory_fraction=get_per_process_memory_fraction,
    reset_max_memory_allocated=reset_max_memory_allocated,
    reset_max_memory_cached=reset_max_memory_cached,
    memory_cached=memory_cached,
    max_memory_cached=max_memory_cached,
    memory_snapshot=memory_snapshot,
    host_memory_stats=host_memory_stats,
    host_memory_stats_as_nested_dict=host_memory_stats_as_nested_dict,
    reset_accumulated_host_memory_stats=reset_accumulated_host_memory_stats,
    reset_peak_host_memory_stats=reset_peak_host_memory_stats,
    device_memory_used=device_memory_used,
    get_allocator_backend=get_allocator_backend,
    list_gpu_processes=list_gpu_processes,
    caching_allocator_alloc=caching_allocator_alloc,
    caching_allocator_delete=caching_allocator_delete,
    caching_allocator_enable=caching_allocator_enable,
    caching_allocator_disabled=caching_allocator_disabled,
    MemPool=MemPool,
    use_mem_pool=use_mem_pool,
    AccintePluggableAllocator=AccintePluggableAllocator,
    change_current_allocator=change_current_allocator,
)
# LITERALINCLUDE END: CH07_PY_EXTEND

# ``torch.accinte.memory``, importable by that name as ``torch.cuda.memory``
# is: the functions above under their submodule.
from torch_accinte import memory  # noqa: E402

device_module._extend(memory=memory)
sys.modules["torch.accinte.memory"] = memory
