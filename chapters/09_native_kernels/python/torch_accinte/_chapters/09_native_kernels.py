"""Chapter 09: native kernels, and finding where they are needed.

The C++ side runs ATen's CPU kernels on device memory, inside kernel
launches, for the operators a training step spends its time in. This module
adds :func:`record_fallbacks` to ``torch.accinte``: a context manager that
counts the operator calls that still take the CPU fallback, to find the next
kernels worth writing.
"""

import contextlib
from typing import Dict, Iterator, List, NamedTuple

from torch_accinte import _C, device_module


class FallbackCalls(NamedTuple):
    """How often one operator took the CPU fallback while recording."""

    #: The operator, as ``"aten::name.overload"``.
    op: str
    #: How many of its calls ran on the fallback.
    calls: int
    #: The host time those calls took, copies and waits for the device included.
    seconds: float


# LITERALINCLUDE START: CH09_PY_RECORD
class FallbackRecord:
    """What :func:`record_fallbacks` saw; filled when its ``with`` block ends."""

    def __init__(self) -> None:
        #: One row per operator, the most time first.
        self.rows: List[FallbackCalls] = []

    @property
    def calls(self) -> Dict[str, int]:
        """How many calls of each operator took the fallback."""
        return {row.op: row.calls for row in self.rows}

    def table(self) -> str:
        """The rows as a text table, with totals."""
        width = max([len("operator")] + [len(row.op) for row in self.rows])
        lines = [f"{'operator':<{width}}  {'calls':>6}  {'ms':>9}"]
        for row in self.rows:
            lines.append(f"{row.op:<{width}}  {row.calls:>6}  {row.seconds * 1e3:>9.3f}")
        total_calls = sum(row.calls for row in self.rows)
        total_ms = sum(row.seconds for row in self.rows) * 1e3
        lines.append(f"{'total':<{width}}  {total_calls:>6}  {total_ms:>9.3f}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


@contextlib.contextmanager
def record_fallbacks() -> Iterator[FallbackRecord]:
    """Counts, on every thread, the operator calls that run on the CPU
    fallback inside the ``with`` block::

        with torch.accinte.record_fallbacks() as record:
            train_step()
        print(record.table())

    Only one recording runs at a time.
    """
    record = FallbackRecord()
    _C._start_fallback_recording()
    try:
        yield record
    finally:
        record.rows = [FallbackCalls(*row) for row in _C._stop_fallback_recording()]
# LITERALINCLUDE END: CH09_PY_RECORD


device_module._extend(
    record_fallbacks=record_fallbacks,
    FallbackRecord=FallbackRecord,
    FallbackCalls=FallbackCalls,
)
