#!/usr/bin/env python3
"""Numbers in the guide's prose that come from a measurement agree with it.

The guide cannot run the benchmarks; it renders a snapshot of a ``make
bench`` run, ``docs/output/bench_results.json`` (``make bench-snapshot``),
and a chapter may keep one of its own (chapter 09's run before its kernels).
A number in prose that comes from such a run is written in one of two ways:

``{bench-time}`NAME```, ``{bench-cpu-time}`NAME```, ``{bench-ratio}`NAME```
    generated: the build prints the benchmark's accinte time, CPU time or
    ratio from the snapshot, as the table does (``docs/_ext/accinte_bench.py``);
``{measured}`TEXT <FIELD: NAME>```
    checked: the build prints TEXT as written ("about 60 µs", "13 to 14
    GB/s"), and the number in it must agree with the benchmark's FIELD:
    ``time`` (accinte seconds), ``cpu-time``, ``ratio``, or ``bandwidth``
    (accinte's bytes per second, in GB/s or MB/s).

Either names another snapshot by a path relative to the page after ``@``:
``{bench-ratio}`NAME @ output/bench_before.json```. How close TEXT must be:

- ``N unit``: N is the value rounded to N's last digit (half a unit of it);
- ``about N unit``: within 10% of N, or half a unit of its last digit;
- ``N to M unit``: between N and M, each rounded as above.

A number that looks measured but is not the snapshot's (a goal, an earlier
run's result kept for history, an estimate the snapshot does not hold, a
setting) is marked ``{as-written}`TEXT```, printed as written. On every page
but those of ``NOT_LINTED``, a number with a unit of time, ``×`` or ``GB/s``
outside these roles and outside code is an error, so that a new number
cannot skip the check.

``python3 tools/check_numbers.py`` checks the guide's pages (``make
docs-check``); ``--self-test`` runs this module's own tests.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_report  # noqa: E402  (standard library only)

#: The snapshot a role reads unless it names another (conf.py's
#: ``accinte_bench_snapshot``).
DEFAULT_SNAPSHOT = "docs/output/bench_results.json"

#: The pages whose numbers with units need not be marked (see the docstring),
#: by path or directory: the emulator's pages that quote its settings (a spin
#: of 50 µs, a futex wait of 50 ms, buckets of 10 ms).
NOT_LINTED = ("docs/emulator/streams.md", "docs/emulator/ipc.md", "docs/emulator/telemetry.md")

#: The generated roles and the field of a benchmark each prints.
GENERATED = {"bench-time": "accinte_seconds", "bench-cpu-time": "cpu_seconds",
             "bench-ratio": "ratio"}

#: ``{measured}``'s fields: what each reads from a benchmark.
FIELDS: Dict[str, Callable[[dict], Optional[float]]] = {
    "time": lambda item: item["accinte_seconds"],
    "cpu-time": lambda item: item["cpu_seconds"],
    "ratio": lambda item: item["ratio"],
    "bandwidth": lambda item: (item["bytes"] / item["accinte_seconds"]
                               if item.get("bytes") and item["accinte_seconds"] else None),
}

#: Units a number may carry, and the factor from the field's own unit
#: (seconds, bytes per second, a ratio) to it.
TIME_UNITS = {"ns": 1e9, "µs": 1e6, "ms": 1e3, "s": 1.0, "min": 1 / 60}
RATE_UNITS = {"GB/s": 1e-9, "MB/s": 1e-6}
RATIO_UNITS = {"×": 1.0, "": 1.0}
UNITS_OF = {"time": TIME_UNITS, "cpu-time": TIME_UNITS, "bandwidth": RATE_UNITS,
            "ratio": RATIO_UNITS}

ROLE = re.compile(r"\{(bench-time|bench-cpu-time|bench-ratio|measured|as-written)\}`([^`]+)`")
MEASURED = re.compile(r"^(?P<text>.*?)\s*<(?P<field>[a-z-]+):\s*(?P<target>[^<>]+)>$", re.S)
NUMBER = r"\d[\d,]*(?:\.\d+)?"
QUANTITY = re.compile(
    rf"^(?P<about>about\s+)?(?P<low>{NUMBER})(?:\s+to\s+(?P<high>{NUMBER}))?"
    r"\s?(?P<unit>ns|µs|ms|min|s|×|GB/s|MB/s|)$")
#: What the lint calls a measured-looking number.
#: (Not a product of sizes, ``3 × 16``.)
UNMARKED = re.compile(rf"(?<![\w.]){NUMBER}\s?(?:×(?!\s?\d)|(?:µs|ms|ns|GB/s|MB/s)(?!\w))")


class Problem(NamedTuple):
    page: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.message}"


class Snapshots:
    """Snapshots read once each, by path."""

    def __init__(self) -> None:
        self._cache: Dict[Path, dict] = {}

    def benchmark(self, path: Path, name: str) -> dict:
        """The benchmark ``name`` of the snapshot at ``path``; ValueError if
        the file is not a valid snapshot or has no such benchmark."""
        if path not in self._cache:
            try:
                results = json.loads(path.read_text(encoding="utf-8"))
            except OSError as error:
                raise ValueError(f"cannot read {path}: {error.strerror}") from None
            bench_report.validate(results)
            self._cache[path] = results
        for item in self._cache[path]["benchmarks"]:
            if item["name"] == name:
                return item
        raise ValueError(f"{path.name} has no benchmark named {name!r}")


def split_target(target: str, page_dir: Path, root: Path) -> Tuple[str, Path]:
    """A role's ``NAME`` or ``NAME @ PATH``: the name and the snapshot's path."""
    name, at, rel = target.rpartition(" @ ")
    if not at:
        return " ".join(target.split()), root / DEFAULT_SNAPSHOT
    return " ".join(name.split()), (page_dir / rel.strip()).resolve()


def _number(text: str) -> Tuple[float, float]:
    """A written number and half a unit of its last digit."""
    digits = text.replace(",", "")
    decimals = len(digits.partition(".")[2])
    return float(digits), 0.5 * 10 ** -decimals


def check_quantity(text: str, field: str, value: float) -> Optional[str]:
    """Why ``text`` ("about 60 µs") misstates ``value`` of ``field`` (in
    seconds, bytes per second or a ratio); None if it agrees."""
    match = QUANTITY.match(" ".join(text.split()))
    if match is None:
        return (f"{text!r} is not a number the check reads: 'N unit', "
                f"'about N unit' or 'N to M unit'")
    units = UNITS_OF[field]
    unit = match["unit"]
    if unit not in units:
        return f"{text!r}: a {field} is written in {', '.join(u or 'a plain number' for u in units)}"
    shown = value * units[unit]
    low, low_half = _number(match["low"])
    if match["high"]:
        high, high_half = _number(match["high"])
        lowest, highest = low - low_half, high + high_half
    else:
        spread = max(low_half, 0.1 * low) if match["about"] else low_half
        lowest, highest = low - spread, low + spread
    if lowest <= shown <= highest:
        return None
    return f"{text!r} disagrees with the snapshot's {field}, {shown:.4g}{' ' if unit not in ('×', '') else ''}{unit}"


def _prose(text: str) -> List[Tuple[int, str]]:
    """The page's lines outside fenced code and directives, with inline code
    (but not roles) blanked out, each with its line number."""
    lines, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        if fence is not None:
            if stripped.startswith(fence) and stripped.strip() == fence:
                fence = None
            continue
        opening = re.match(r"(`{3,}|~{3,}|:{3,})", stripped)
        if opening:
            fence = opening.group(1)
            continue
        lines.append((number, line))
    return lines


def _blank_code(line: str) -> str:
    """``line`` with its inline code spans that are not a role's content blanked."""
    out, index = [], 0
    for match in re.finditer(r"(\{[\w:-]+\})?(`+)(.+?)\2", line):
        out.append(line[index:match.start()])
        out.append(match.group(0) if match.group(1) and match.group(2) == "`"
                   else " " * len(match.group(0)))
        index = match.end()
    out.append(line[index:])
    return "".join(out)


def _joined(lines: List[Tuple[int, str]]) -> List[Tuple[int, str]]:
    """Roles can wrap across lines: each paragraph as one string, with the
    line number it starts on."""
    paragraphs, current, start = [], [], 0
    for number, line in lines:
        if not line.strip():
            if current:
                paragraphs.append((start, " ".join(current)))
            current = []
            continue
        if not current:
            start = number
        current.append(line.strip())
    if current:
        paragraphs.append((start, " ".join(current)))
    return paragraphs


def check_page(page: Path, root: Path, snapshots: Snapshots, lint: bool) -> List[Problem]:
    """The problems of one page (see the module's docstring)."""
    rel = page.relative_to(root).as_posix()
    problems = []
    for line, paragraph in _joined(_prose(page.read_text(encoding="utf-8"))):
        paragraph = _blank_code(paragraph)
        for match in ROLE.finditer(paragraph):
            role, content = match.groups()
            if role == "as-written":
                continue
            try:
                if role in GENERATED:
                    name, path = split_target(content, page.parent, root)
                    item = snapshots.benchmark(path, name)
                    if item[GENERATED[role]] is None:
                        raise ValueError(f"benchmark {name!r} has no {GENERATED[role]}")
                    continue
                parts = MEASURED.match(content)
                if parts is None or parts["field"] not in FIELDS:
                    raise ValueError(f"{{measured}} is `TEXT <FIELD: NAME>`, FIELD one of "
                                     f"{', '.join(FIELDS)}: not {content!r}")
                name, path = split_target(parts["target"], page.parent, root)
                value = FIELDS[parts["field"]](snapshots.benchmark(path, name))
                if value is None:
                    raise ValueError(f"benchmark {name!r} has no {parts['field']}")
                why = check_quantity(parts["text"], parts["field"], value)
                if why:
                    raise ValueError(f"{why} ({name!r})")
            except ValueError as error:
                problems.append(Problem(rel, line, f"{{{role}}}: {error}"))
        if lint:
            for number in UNMARKED.finditer(ROLE.sub(" ", paragraph)):
                problems.append(Problem(
                    rel, line, f"{number.group(0)!r} is not marked: {{bench-ratio}} and its "
                    f"kin, {{measured}}, or {{as-written}} for a goal, an earlier run or a setting"))
    return problems


def pages(root: Path) -> List[Path]:
    """The guide's pages: the front page, docs/ (with its subdirectories, such
    as the emulator's pages in docs/emulator/) and the chapters'."""
    docs = sorted(page for page in (root / "docs").rglob("*.md")
                  if not SKIPPED_DIRS & set(page.relative_to(root / "docs").parts[:-1]))
    found = [root / "index.md", *docs, *sorted((root / "chapters").glob("*/*.md"))]
    return [page for page in found if page.is_file()]


#: Directories under docs/ that hold no pages (conf.py's exclude_patterns).
SKIPPED_DIRS = {"output", "build", "_build", "_static", "_ext"}


def linted(rel: str, not_linted: Tuple[str, ...] = NOT_LINTED) -> bool:
    """Whether the page at ``rel`` (relative to the root) is linted."""
    return not any(rel == path or (path.endswith("/") and rel.startswith(path))
                   for path in not_linted)


def check(root: Path = ROOT, not_linted: Tuple[str, ...] = NOT_LINTED) -> List[Problem]:
    snapshots = Snapshots()
    problems = []
    for page in pages(root):
        problems += check_page(page, root, snapshots,
                               linted(page.relative_to(root).as_posix(), not_linted))
    return problems


# -- Self-test -------------------------------------------------------------------

def _snapshot() -> dict:
    return {
        "schema": bench_report.SCHEMA, "stage": "14", "chapters": [], "torch": "2.13.0",
        "date": "2026-01-01 00:00 UTC", "cpu_count": 2, "torch_threads": 2,
        "other_load": 0.0, "repeats": 21,
        "benchmarks": [
            bench_report.entry("a + b, 1 element (latency)", bench_report.TIME,
                               64.16e-6, 0.994e-6, bench_report.goal(bench_report.TIME, 3)),
            bench_report.entry("host → device, 64 MiB pinned", bench_report.BANDWIDTH,
                               0.004716, 0.003674, bench_report.goal(bench_report.BANDWIDTH, 0.8),
                               nbytes=64 << 20),
        ],
    }


def self_test() -> int:
    cases = [
        # (page text, linted, expected problems' fragments; [] for none)
        ("one costs {bench-time}`a + b, 1 element (latency)`.", True, []),
        ("ratio {bench-ratio}`a + b, 1 element\n(latency)`, wrapped.", True, []),
        ("{bench-ratio}`a + c`", False, ["no benchmark named 'a + c'"]),
        ("{measured}`about 60 µs <time: a + b, 1 element (latency)>`", True, []),
        ("{measured}`64.2 µs <time: a + b, 1 element (latency)>`", True, []),
        ("{measured}`1 µs <cpu-time: a + b, 1 element (latency)>`", True, []),
        ("{measured}`65 × <ratio: a + b, 1 element (latency)>`", True, []),
        ("{measured}`sixty µs <time: a + b, 1 element (latency)>`", True, ["is not a number"]),
        ("{measured}`65× <ratio: a + b, 1 element (latency)>`", True, []),
        # The deliberately wrong number: 19 µs where the snapshot says 64.
        ("{measured}`19 µs <time: a + b, 1 element (latency)>`", True,
         ["'19 µs' disagrees with the snapshot's time, 64.16 µs"]),
        ("{measured}`about 50 µs <time: a + b, 1 element (latency)>`", True, ["disagrees"]),
        ("{measured}`60 to 70 µs <time: a + b, 1 element (latency)>`", True, []),
        ("{measured}`13 to 14 GB/s <bandwidth: host → device, 64 MiB pinned>`", True, []),
        ("{measured}`0.78 <ratio: host → device, 64 MiB pinned>`", True, []),
        ("{measured}`0.75 <ratio: host → device, 64 MiB pinned>`", True, ["disagrees"]),
        ("{measured}`64 × <speed: a + b, 1 element (latency)>`", True, ["FIELD one of"]),
        ("{measured}`64 s <ratio: a + b, 1 element (latency)>`", True, ["a ratio is written in"]),
        ("{bench-ratio}`a + b, 1 element (latency) @ before.json`", True, []),
        ("{measured}`2.55× <ratio: MLP @ before.json>`", True, []),
        ("{measured}`1.7× <ratio: MLP @ before.json>`", True, ["disagrees"]),
        ("{bench-ratio}`MLP @ missing.json`", True, ["cannot read"]),
        # The lint: a bare measured-looking number fails on a linted page only.
        ("it takes 19 µs and 26× more", True, ["'19 µs'", "'26×'"]),
        ("it takes 19 µs", False, []),
        ("images of 3 × 16 × 16, a 2× gain", True, ["'2×'"]),
        ("the goal is {as-written}`3×`, earlier {as-written}`19 µs`", True, []),
        ("code `x = 3×` and\n\n```text\n19 µs\n```\n", True, []),
        ("``{bench-ratio}`nothing` `` in code", True, []),
    ]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "docs" / "output").mkdir(parents=True)
        (root / DEFAULT_SNAPSHOT).write_text(json.dumps(_snapshot()), encoding="utf-8")
        before = _snapshot()
        before["benchmarks"].append(bench_report.entry(
            "MLP", bench_report.TIME, 2.55, 1.0, None))
        (root / "docs" / "before.json").write_text(json.dumps(before), encoding="utf-8")
        for text, lint, expected in cases:
            page = root / "docs" / "page.md"
            page.write_text(text, encoding="utf-8")
            got = [p.message for p in check_page(page, root, Snapshots(), lint)]
            ok = len(got) == len(expected) and all(
                fragment in message for fragment, message in zip(expected, got))
            if not ok:
                failures += 1
                print(f"FAIL {text!r}: expected {expected}, got {got}")
    linted_cases = (("docs/performance.md", True), ("docs/emulator.md", True),
                    ("docs/emulator/streams.md", False), ("docs/emulator/memory.md", True),
                    ("chapters/09_native_kernels/attention.md", True),
                    ("chapters/01_minimal_ops/README.md", True))
    for rel, expected in linted_cases:
        if linted(rel) != expected:
            failures += 1
            print(f"FAIL linted({rel!r}) is {not expected}")
    # A page in a subdirectory of docs/ is read; Markdown under docs/output/ is not.
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for rel in ("docs/a.md", "docs/emulator/b.md", "docs/output/c.md"):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text("# Page\n", encoding="utf-8")
        found = [page.relative_to(root).as_posix() for page in pages(root)]
        if found != ["docs/a.md", "docs/emulator/b.md"]:
            failures += 1
            print(f"FAIL pages() found {found}")
    # A wrong number on a real page is caught end to end: a copy of the
    # guide's performance page with one generated number replaced by a
    # checked, wrong one.
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "docs" / "output").mkdir(parents=True)
        (root / DEFAULT_SNAPSHOT).write_text(
            (ROOT / DEFAULT_SNAPSHOT).read_text(encoding="utf-8"), encoding="utf-8")
        text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
        wrong = "{measured}`19 µs <time: system: mprotect of one page to read-write, a write, back to none>`"
        target = "{bench-time}`system: mprotect of one page to read-write, a write, back to none`"
        (root / "docs" / "performance.md").write_text(
            text.replace(target, wrong), encoding="utf-8")
        got = check(root)
        if target not in text or len(got) != 1 or "'19 µs' disagrees" not in got[0].message:
            failures += 1
            print(f"FAIL the performance page with a wrong number: got {[str(p) for p in got]}")
    # The cases, the pages linted or not, pages(), the wrong number end to end.
    total = len(cases) + len(linted_cases) + 1 + 1
    print(f"check_numbers self-test: {total - failures} of {total} passed")
    return 1 if failures else 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--self-test", action="store_true", help="run this module's tests")
    args = parser.parse_args(argv)
    if args.self_test:
        return self_test()
    problems = check()
    for problem in problems:
        print(problem)
    print(f"check_numbers: {len(problems)} problem(s) in {len(pages(ROOT))} pages")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
