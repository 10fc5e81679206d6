"""The expected-failure list (expected_failures.json), read and matched.

Every entry names tests by a pattern over ``GenericClass.test_method``
(``fnmatch`` syntax, the method name as instantiated for accinte, e.g.
``TestIndexing.test_index_put_accumulate_accinte_*``), the PyTorch test
file it belongs to, a reason, and what would remove it (``until``: a
chapter of this guide or an upstream issue). Kinds:

* ``xfail``: the test runs and must fail; if it passes, unittest reports
  an unexpected success, so the list cannot go stale unnoticed.
* ``skip``: the test does not run (it would crash the process, hang, or
  take the machine's memory); kept to the few that cannot run at all.
* ``precision``: the test runs with ``atol``/``rtol`` raised to at least
  these values, where the emulator's kernels legitimately round
  differently from the CPU's.
"""

import dataclasses
import fnmatch
import json
import os
import pathlib

KINDS = ("xfail", "skip", "precision")
_REQUIRED = ("test", "file", "kind", "reason", "until")


@dataclasses.dataclass(frozen=True)
class Entry:
    test: str
    file: str
    kind: str
    reason: str
    until: str
    atol: float = 0.0
    rtol: float = 0.0

    def matches(self, qualified_name):
        """Whether ``GenericClass.test_method`` is one of this entry's tests."""
        return fnmatch.fnmatchcase(qualified_name, self.test)


def parse(data):
    """Entries from the decoded JSON document; raises ValueError on a bad entry."""
    entries = []
    for i, raw in enumerate(data.get("entries", [])):
        missing = [key for key in _REQUIRED if not raw.get(key)]
        if missing:
            raise ValueError(f"entry {i} ({raw.get('test')!r}) lacks {', '.join(missing)}")
        if raw["kind"] not in KINDS:
            raise ValueError(f"entry {i} ({raw['test']!r}): kind must be one of {KINDS}")
        if raw["kind"] == "precision" and not (raw.get("atol") or raw.get("rtol")):
            raise ValueError(f"entry {i} ({raw['test']!r}): a precision entry needs atol or rtol")
        if "." not in raw["test"]:
            raise ValueError(f"entry {i} ({raw['test']!r}): name it as Class.test_method")
        entries.append(Entry(**raw))
    return entries


#: Names another list than the shipped one (the runner's --expectations).
ENV_VAR = "ACCINTE_UPSTREAM_EXPECTATIONS"


def default_path():
    """The list in use: $ACCINTE_UPSTREAM_EXPECTATIONS, else the shipped one."""
    from torch_accinte.testing import EXPECTATIONS

    return pathlib.Path(os.environ.get(ENV_VAR) or EXPECTATIONS)


def load(path=None):
    """The entries of ``path`` (default: :func:`default_path`)."""
    path = pathlib.Path(path) if path else default_path()
    return parse(json.loads(path.read_text()))


def find(entries, qualified_name, kinds=("xfail", "skip")):
    """The first entry of one of ``kinds`` that names this test, or None."""
    for entry in entries:
        if entry.kind in kinds and entry.matches(qualified_name):
            return entry
    return None
