"""Chapter 07: the memory functions of ``torch.accinte``.

Each mirrors its ``torch.cuda`` namesake and reads the caching allocator of
``csrc/caching_allocator.cpp`` through ``_C``. ``torch.accelerator``'s memory
functions reach the same allocator through ``c10::getDeviceAllocator``, so
the two agree.
"""

import collections
from typing import Any

from torch_accinte import _C, device_module
from torch_accinte.device_module import _DeviceLike, _get_device_index, _lazy_init


def _index(device: _DeviceLike) -> int:
    _lazy_init()
    return _get_device_index(device, optional=True)


# LITERALINCLUDE START: CH07_PY_STATS
def memory_stats_as_nested_dict(device: _DeviceLike = None) -> dict[str, Any]:
    """The allocator's statistics of ``device`` as nested dicts."""
    return _C._memory_stats(_index(device))  # LITERALINCLUDE EMPHASIZE


def memory_stats(device: _DeviceLike = None) -> dict[str, Any]:
    """The allocator's statistics of ``device``, with flat keys such as
    ``"allocated_bytes.all.current"``, sorted, as ``torch.cuda.memory_stats``.
    """
    flat = []

    def flatten(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                # LITERALINCLUDE EMPHASIZE NEXT
                flatten(f"{prefix}.{key}" if prefix else key, item)
        else:
            flat.append((prefix, value))

    flatten("", memory_stats_as_nested_dict(device))
    return collections.OrderedDict(sorted(flat))  # LITERALINCLUDE EMPHASIZE


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
)
# LITERALINCLUDE END: CH07_PY_EXTEND
