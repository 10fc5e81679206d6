#!/usr/bin/env python3
"""Check the tagged regions that the guide includes from real sources.

The guide never pastes code. A page pulls a region of a real source file
with MyST's ``literalinclude`` directive, bounded by two tag lines in that
source. A tag line is a comment that holds nothing but the tag: ``//`` in
C and C++, ``#`` in Python, CMake and shell, followed by ``LITERALINCLUDE``,
then ``START`` or ``END``, a colon and the region's NAME (``[A-Z0-9_]+``).
A page selects the region with ``:start-after:`` and ``:end-before:`` set to
those two lines (quoted; a ``#`` marker must be quoted, or MyST reads it as a
comment).

Emphasis markers are not tags. A line of code inside a region may end with
a trailing comment that holds only the keyword and ``EMPHASIZE`` (``//`` or
``#`` as above); a comment line inside a region may hold only the keyword
and ``EMPHASIZE NEXT``, optionally followed by a count (``EMPHASIZE NEXT
2``). The guide's listing extension (docs/_ext/accinte_listings.py)
emphasises the line that carries the first, or the line(s) after the
second, and strips the markers from what the page shows.

Sphinx's ``start-after`` matches the first line that *contains* the marker,
so the tags must be unambiguous across the whole repository. This checker
fails (exit status 1, one ``path:line: problem`` line per problem) on:

* a malformed tag line (a line mentioning the keyword that is neither a
  tag nor an emphasis marker);
* an emphasis marker outside every region, a trailing one alone on its
  line, or an ``EMPHASIZE NEXT`` that is not alone on its line or whose
  next line is blank or the region's end;
* a START without END, an END without START, an END closing another NAME
  than the open START, a region nested in a region of the same NAME, or an
  empty region;
* a NAME defined twice anywhere in the repository;
* a NAME that is a prefix of another NAME (FOO and FOO_BAR), because the
  marker of FOO is contained in the marker of FOO_BAR;
* a region that no page includes;
* an include of a NAME that does not exist, or that is not in the file the
  include names (resolved relative to the page, or to the repository root
  for a path starting with ``/``), or of a file that does not exist;
* an include whose ``:start-after:`` and ``:end-before:`` name different
  regions, give only one of the two, are not tag markers, or use an
  unquoted ``#`` marker;
* an include that selects lines by number (``:lines:``, ``:start-at:``,
  ``:end-at:``): line numbers and at-markers drift as sources change.

Sources are the files (tracked or not) under common/, chapters/, examples/,
tests/, benchmarks/, tools/ and docs/, plus the files at the repository
root, except Markdown files, build output and this checker itself (whose
text necessarily mentions the keyword). Pages are docs/**/*.md and the
Markdown files of each chapter's directory, chapters/*/*.md (a chapter's
README.md and the pages of a chapter split into several).

Usage, from anywhere::

    python tools/check_tags.py            # check the repository
    python tools/check_tags.py --root DIR # check another tree
    python tools/check_tags.py --list     # also print every region
    python tools/check_tags.py --self-test

Only the standard library is used.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

# The keyword is assembled so that this file does not look tagged to itself
# or to anything grepping for it.
KEYWORD = "LITERAL" + "INCLUDE"

#: Directories scanned recursively for sources.
SOURCE_DIRS = (
    "common",
    "chapters",
    "conformance",
    "testing",
    "examples",
    "tests",
    "benchmarks",
    "tools",
    "docs",
)

#: This checker, relative to the root: never scanned as a source.
SELF_PATH = Path("tools", "check_tags.py")

#: Directory names never descended into.
SKIP_DIRS = {
    ".git",
    "build",
    "output",
    "_build",
    ".venv",
    "venv",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    "node_modules",
}

#: Files larger than this are not sources (generated data, binaries).
MAX_SOURCE_BYTES = 4 * 1024 * 1024

NAME_RE = r"[A-Z0-9_]+"

#: A well-formed tag line: a comment holding only the tag.
TAG_LINE_RE = re.compile(
    r"^\s*(?P<leader>//|#)\s*"
    + KEYWORD
    + r" (?P<kind>START|END): (?P<name>"
    + NAME_RE
    + r")\s*$"
)

#: A line of code that ends with an emphasis marker (a trailing comment).
EMPHASIS_LINE_RE = re.compile(
    r"^(?P<code>.*?)\s*(?://|#)\s*" + KEYWORD + r" EMPHASIZE\s*$"
)

#: A comment line that emphasises the line(s) after it.
EMPHASIS_NEXT_RE = re.compile(
    r"^\s*(?://|#)\s*" + KEYWORD + r" EMPHASIZE NEXT(?: [1-9][0-9]*)?\s*$"
)

#: A marker as a page writes it in :start-after: / :end-before: (the
#: comment leader is optional, since Sphinx matches substrings).
MARKER_RE = re.compile(
    r"^(?:(?P<leader>//|#)\s*)?"
    + KEYWORD
    + r" (?P<kind>START|END): (?P<name>"
    + NAME_RE
    + r")$"
)

#: Opening of a fenced block: backticks or colons (MyST colon_fence).
FENCE_OPEN_RE = re.compile(r"^(?P<indent>\s{0,3})(?P<fence>`{3,}|:{3,})(?P<info>.*)$")

#: A directive option line inside a fenced directive.
OPTION_RE = re.compile(r"^\s*:(?P<key>[A-Za-z0-9_-]+):(?:\s+(?P<value>.*?))?\s*$")

#: Directives whose content is literal text, not Markdown.
LITERAL_DIRECTIVES = {
    "literalinclude",
    "code-block",
    "code",
    "code-cell",
    "sourcecode",
    "math",
    "raw",
    "mermaid",
    "graphviz",
    "csv-table",
}

#: literalinclude options that select source lines by number or by an
#: included marker line: forbidden.
FORBIDDEN_OPTIONS = ("lines", "start-at", "end-at")


@dataclasses.dataclass
class Region:
    """A tagged region of a source file."""

    name: str
    path: Path  # relative to the root
    start_line: int  # 1-based line of the START tag
    start_text: str
    end_line: int = 0
    end_text: str = ""


@dataclasses.dataclass
class Include:
    """A literalinclude directive of a page."""

    page: Path  # relative to the root
    line: int  # 1-based line of the directive
    target: str  # the path as written
    options: Dict[str, str]


class Problems:
    """Collects ``path:line: problem`` messages."""

    def __init__(self) -> None:
        self.items: List[Tuple[str, int, str]] = []

    def add(self, path: Path, line: int, message: str) -> None:
        self.items.append((path.as_posix(), line, message))

    def lines(self) -> List[str]:
        return [f"{p}:{n}: {m}" for p, n, m in sorted(self.items)]

    def __bool__(self) -> bool:
        return bool(self.items)


# ---------------------------------------------------------------------------
# Finding files
# ---------------------------------------------------------------------------


def _walk(directory: Path) -> Iterable[Path]:
    for current, dirs, files in os.walk(directory):
        dirs[:] = sorted(
            d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")
        )
        for name in sorted(files):
            yield Path(current) / name


def source_files(root: Path) -> List[Path]:
    """Files that may hold tags, relative to ``root``."""
    candidates: List[Path] = [p for p in sorted(root.iterdir()) if p.is_file()]
    for directory in SOURCE_DIRS:
        if (root / directory).is_dir():
            candidates.extend(_walk(root / directory))
    this_file = Path(__file__).resolve()
    result = []
    for path in candidates:
        if path.suffix.lower() in (".md", ".rst") or path.is_symlink():
            continue
        if path.resolve() == this_file or path.relative_to(root) == SELF_PATH:
            continue
        try:
            if path.stat().st_size > MAX_SOURCE_BYTES:
                continue
        except OSError:
            continue
        result.append(path.relative_to(root))
    return result


def page_files(root: Path) -> List[Path]:
    """Guide pages, relative to ``root``."""
    pages: List[Path] = []
    if (root / "docs").is_dir():
        pages.extend(p for p in _walk(root / "docs") if p.suffix == ".md")
    if (root / "chapters").is_dir():
        # NB: a chapter's pages are its README.md and, for a chapter of
        # several pages, the other Markdown files beside it (not those of its
        # csrc/, python/ or output/ directories).
        pages.extend(sorted((root / "chapters").glob("*/*.md")))
    return [p.relative_to(root) for p in pages]


def _read_text(path: Path) -> Optional[str]:
    """The text of a file, or None for a binary (non UTF-8) file."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


# ---------------------------------------------------------------------------
# Tags in sources
# ---------------------------------------------------------------------------


def scan_source(root: Path, rel: Path, problems: Problems) -> List[Region]:
    """Parses the tag lines of one source; reports structural problems."""
    text = _read_text(root / rel)
    if text is None or KEYWORD not in text:
        return []
    regions: List[Region] = []
    open_regions: List[Region] = []
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if KEYWORD not in line:
            continue
        match = TAG_LINE_RE.match(line)
        if match is None and EMPHASIS_NEXT_RE.match(line):
            following = lines[number] if number < len(lines) else ""
            if not open_regions:
                problems.add(
                    rel,
                    number,
                    f"{KEYWORD} EMPHASIZE NEXT outside every region: no "
                    "listing shows the next line",
                )
            elif not following.strip() or TAG_LINE_RE.match(following):
                problems.add(
                    rel,
                    number,
                    f"{KEYWORD} EMPHASIZE NEXT is not followed by a line of code",
                )
            continue
        emphasis = EMPHASIS_LINE_RE.match(line) if match is None else None
        if emphasis is not None:
            if not emphasis["code"].strip():
                problems.add(
                    rel,
                    number,
                    f"{KEYWORD} EMPHASIZE alone on its line: it marks the "
                    "code it trails",
                )
            elif not open_regions:
                problems.add(
                    rel,
                    number,
                    f"{KEYWORD} EMPHASIZE outside every region: no listing "
                    "shows this line",
                )
            continue
        if match is None:
            problems.add(
                rel,
                number,
                f"malformed tag line {line.strip()!r}: expected a comment "
                f"holding only '{KEYWORD} START: NAME' or "
                f"'{KEYWORD} END: NAME' with NAME in {NAME_RE}, or code "
                f"followed by a comment holding only '{KEYWORD} EMPHASIZE'",
            )
            continue
        name, kind = match["name"], match["kind"]
        if kind == "START":
            if any(r.name == name for r in open_regions):
                problems.add(
                    rel, number, f"START of {name} nested inside region {name}"
                )
                continue
            region = Region(name, rel, number, line.strip())
            open_regions.append(region)
            regions.append(region)
            continue
        # END
        if not open_regions:
            problems.add(rel, number, f"END of {name} without a matching START")
            continue
        innermost = open_regions[-1]
        if innermost.name != name:
            if any(r.name == name for r in open_regions):
                problems.add(
                    rel,
                    number,
                    f"END of {name} while region {innermost.name} (started "
                    f"at line {innermost.start_line}) is still open",
                )
                # Close up to and including the named region to resync.
                while open_regions and open_regions[-1].name != name:
                    open_regions.pop()
                region = open_regions.pop()
                region.end_line, region.end_text = number, line.strip()
            else:
                problems.add(
                    rel,
                    number,
                    f"END of {name} does not match the open START of "
                    f"{innermost.name} at line {innermost.start_line}",
                )
            continue
        open_regions.pop()
        innermost.end_line, innermost.end_text = number, line.strip()
        if number == innermost.start_line + 1:
            problems.add(rel, innermost.start_line, f"region {name} is empty")
    for region in open_regions:
        problems.add(rel, region.start_line, f"START of {region.name} without END")
    return regions


def check_names(regions: List[Region], problems: Problems) -> Dict[str, Region]:
    """Reports duplicate names and names that prefix others."""
    by_name: Dict[str, Region] = {}
    for region in regions:
        first = by_name.get(region.name)
        if first is not None:
            problems.add(
                region.path,
                region.start_line,
                f"duplicate tag {region.name}: already defined at "
                f"{first.path.as_posix()}:{first.start_line}",
            )
            continue
        by_name[region.name] = region
    names = sorted(by_name)
    for i, short in enumerate(names):
        for longer in names[i + 1 :]:
            if not longer.startswith(short):
                break
            region = by_name[longer]
            other = by_name[short]
            problems.add(
                region.path,
                region.start_line,
                f"tag {longer} starts with tag {short} "
                f"({other.path.as_posix()}:{other.start_line}); "
                "rename one, a start-after marker of the shorter one "
                "would match the longer one",
            )
    return by_name


# ---------------------------------------------------------------------------
# literalinclude directives in pages
# ---------------------------------------------------------------------------


def _closes(line: str, fence: str) -> bool:
    """Whether ``line`` closes a block opened by ``fence``."""
    stripped = line.strip()
    return len(stripped) >= len(fence) and set(stripped) == {fence[0]}


def scan_page(root: Path, rel: Path) -> List[Include]:
    """Finds the literalinclude directives of one MyST page.

    Code fences that are not directives (```` ```python ````, ```` ```text
    ````, ...) and literal directives are skipped, so a page may show an
    example directive inside a fence. Directives with Markdown content
    (admonitions, ...) are scanned into.
    """
    text = _read_text(root / rel) or ""
    lines = text.splitlines()
    includes: List[Include] = []
    # Each open fence: (fence string, skipping content?)
    stack: List[Tuple[str, bool]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if stack and _closes(line, stack[-1][0]):
            stack.pop()
            i += 1
            continue
        if stack and stack[-1][1]:
            i += 1
            continue
        match = FENCE_OPEN_RE.match(line)
        if match is None:
            i += 1
            continue
        fence, info = match["fence"], match["info"].strip()
        if fence[0] == "`" and "`" in info:
            i += 1  # inline code such as ```x```, not a fence
            continue
        directive = re.match(r"^\{(?P<name>[^}]+)\}\s*(?P<arg>.*)$", info)
        if directive is None:
            # A plain code fence (or a bare colon fence): literal content.
            stack.append((fence, True))
            i += 1
            continue
        name = directive["name"].strip()
        if name != "literalinclude":
            stack.append((fence, name in LITERAL_DIRECTIVES))
            i += 1
            continue
        options, i_after = _parse_options(lines, i + 1, fence)
        includes.append(Include(rel, i + 1, directive["arg"].strip(), options))
        stack.append((fence, True))
        i = i_after
    return includes


def _parse_options(lines: List[str], i: int, fence: str) -> Tuple[Dict[str, str], int]:
    """Reads directive options (``:key: value`` lines or a ``---`` block)."""
    options: Dict[str, str] = {}
    if i < len(lines) and lines[i].strip() == "---":
        i += 1
        while i < len(lines) and lines[i].strip() != "---":
            if _closes(lines[i], fence):
                return options, i
            key, sep, value = lines[i].strip().partition(":")
            if sep:
                options[key.strip()] = value.strip()
            i += 1
        return options, i + 1
    while i < len(lines):
        match = OPTION_RE.match(lines[i])
        if match is None:
            break
        options[match["key"]] = (match["value"] or "").strip()
        i += 1
    return options, i


def _unquote(value: str) -> Tuple[str, bool]:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1], True
    return value, False


def _resolve(root: Path, page: Path, target: str) -> Path:
    """A literalinclude path as Sphinx resolves it, relative to ``root``."""
    if target.startswith("/"):
        resolved = root / target.lstrip("/")
    else:
        resolved = root / page.parent / target
    return Path(os.path.normpath(resolved))


def check_include(
    root: Path,
    include: Include,
    by_name: Dict[str, Region],
    used: Dict[str, Include],
    problems: Problems,
) -> None:
    """Checks one literalinclude directive against the regions found."""
    page, line = include.page, include.line
    for option in FORBIDDEN_OPTIONS:
        if option in include.options:
            problems.add(
                page,
                line,
                f"literalinclude of {include.target!r} uses :{option}:; "
                f"select a tagged region with :start-after: and :end-before: "
                "instead",
            )
    if not include.target:
        problems.add(page, line, "literalinclude without a file name")
        return
    target = _resolve(root, page, include.target)
    target_exists = target.is_file()
    if not target_exists:
        problems.add(
            page, line, f"literalinclude file {include.target!r} does not exist"
        )

    start = include.options.get("start-after")
    end = include.options.get("end-before")
    if start is None and end is None:
        return  # a whole-file include
    markers = {}
    for option, value, kind in (("start-after", start, "START"), ("end-before", end, "END")):
        if value is None:
            problems.add(
                page,
                line,
                f"literalinclude of {include.target!r} has only one of "
                f":start-after: and :end-before:; give both",
            )
            return
        raw, quoted = _unquote(value)
        match = MARKER_RE.match(raw.strip())
        if match is None or match["kind"] != kind:
            problems.add(
                page,
                line,
                f":{option}: {value!r} is not a '{KEYWORD} {kind}: NAME' marker",
            )
            return
        if match["leader"] == "#" and not quoted:
            problems.add(
                page,
                line,
                f":{option}: {value!r} starts with '#' and must be quoted "
                "(MyST reads an unquoted # as a comment)",
            )
        markers[option] = (match["name"], raw.strip())
    start_name, start_marker = markers["start-after"]
    end_name, end_marker = markers["end-before"]
    if start_name != end_name:
        problems.add(
            page,
            line,
            f":start-after: names {start_name} but :end-before: names {end_name}",
        )
        return
    region = by_name.get(start_name)
    if region is None:
        problems.add(page, line, f"include of tag {start_name}, which does not exist")
        return
    used.setdefault(start_name, include)
    if target_exists and region.end_line:
        if root / region.path != target:
            problems.add(
                page,
                line,
                f"tag {start_name} is in {region.path.as_posix()}, not in "
                f"{include.target!r}",
            )
            return
        if start_marker not in region.start_text or end_marker not in region.end_text:
            problems.add(
                page,
                line,
                f"markers of tag {start_name} do not match the tag lines in "
                f"{region.path.as_posix()} (check the comment leader)",
            )


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------


def check(root: Path) -> Tuple[Problems, Dict[str, Region], Dict[str, Include]]:
    """Checks the tree at ``root``; returns problems, regions and uses."""
    root = Path(os.path.normpath(root.absolute()))
    problems = Problems()
    regions: List[Region] = []
    for rel in source_files(root):
        regions.extend(scan_source(root, rel, problems))
    by_name = check_names(regions, problems)
    used: Dict[str, Include] = {}
    for page in page_files(root):
        for include in scan_page(root, page):
            check_include(root, include, by_name, used, problems)
    for name, region in sorted(by_name.items()):
        if name not in used:
            problems.add(
                region.path,
                region.start_line,
                f"tag {name} is not included by any page",
            )
    return problems, by_name, used


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="repository root (default: the parent of tools/)",
    )
    parser.add_argument("--list", action="store_true", help="print every region")
    parser.add_argument(
        "--self-test", action="store_true", help="run the checker's own tests"
    )
    args = parser.parse_args(argv)
    if args.self_test:
        return self_test()
    problems, by_name, used = check(args.root)
    if args.list:
        for name, region in sorted(by_name.items()):
            include = used.get(name)
            where = (
                f"{include.page.as_posix()}:{include.line}" if include else "(unused)"
            )
            print(
                f"{name}: {region.path.as_posix()}:{region.start_line}-"
                f"{region.end_line} <- {where}"
            )
    if problems:
        for message in problems.lines():
            print(message, file=sys.stderr)
        print(
            f"check_tags: {len(problems.items)} problem(s) in "
            f"{len(by_name)} tag(s)",
            file=sys.stderr,
        )
        return 1
    print(f"check_tags: {len(by_name)} tag(s), {len(used)} included, all OK")
    return 0


# ---------------------------------------------------------------------------
# Self-test
# ---------------------------------------------------------------------------


def _c_tag(kind: str, name: str) -> str:
    return f"// {KEYWORD} {kind}: {name}"


def _py_tag(kind: str, name: str) -> str:
    return f"# {KEYWORD} {kind}: {name}"


def _c_source(*names: str) -> str:
    body = ["int x = 0;"]
    for name in names:
        body += [_c_tag("START", name), f"int {name.lower()} = 1;", _c_tag("END", name)]
    return "\n".join(body) + "\n"


def _include(path: str, start: str, end: str, extra: str = "", quote: str = '"') -> str:
    return (
        f"```{{literalinclude}} {path}\n"
        f":language: cpp\n"
        f":start-after: {quote}{start}{quote}\n"
        f":end-before: {quote}{end}{quote}\n"
        f"{extra}"
        "```\n"
    )


def _c_include(path: str, name: str, end_name: Optional[str] = None, **kw: str) -> str:
    return _include(path, _c_tag("START", name), _c_tag("END", end_name or name), **kw)


def _page(*blocks: str) -> str:
    return "# Page\n\n" + "\n".join(blocks)


#: (description, files, expected problem substrings; empty means "passes").
_CASES: List[Tuple[str, Dict[str, str], List[str]]] = [
    (
        "a correct tree passes",
        {
            "common/src/a.cpp": _c_source("ALPHA", "BETA"),
            "chapters/01_x/python/m.py": "\n".join(
                ["x = 1", _py_tag("START", "PY_PART"), "y = 2", _py_tag("END", "PY_PART")]
            )
            + "\n",
            "docs/emulator.md": _page(
                _c_include("../common/src/a.cpp", "ALPHA"),
                _c_include("/common/src/a.cpp", "BETA"),
            ),
            "chapters/01_x/README.md": _page(
                _include(
                    "python/m.py",
                    _py_tag("START", "PY_PART"),
                    _py_tag("END", "PY_PART"),
                ),
                "````markdown\n"
                + _c_include("../common/src/a.cpp", "NOT_REAL")
                + "````\n",
                "```{note}\nA note.\n```\n",
            ),
        },
        [],
    ),
    (
        "START without END",
        {
            "common/a.cpp": _c_tag("START", "OPEN") + "\nint x;\n",
            "docs/p.md": _page(_c_include("../common/a.cpp", "OPEN")),
        },
        ["common/a.cpp:1: START of OPEN without END"],
    ),
    (
        "END without START",
        {
            "common/a.cpp": _c_source("OK") + _c_tag("END", "LOST") + "\n",
            "docs/p.md": _page(_c_include("../common/a.cpp", "OK")),
        },
        ["common/a.cpp:5: END of LOST without a matching START"],
    ),
    (
        "END naming another region",
        {
            "common/a.cpp": "\n".join(
                [_c_tag("START", "ONE"), "int a;", _c_tag("END", "TWO")]
            )
            + "\n",
            "docs/p.md": _page(_c_include("../common/a.cpp", "ONE")),
        },
        [
            "common/a.cpp:3: END of TWO does not match the open START of ONE",
            "common/a.cpp:1: START of ONE without END",
        ],
    ),
    (
        "same region nested",
        {
            "common/a.cpp": "\n".join(
                [
                    _c_tag("START", "NEST"),
                    "int a;",
                    _c_tag("START", "NEST"),
                    "int b;",
                    _c_tag("END", "NEST"),
                ]
            )
            + "\n",
            "docs/p.md": _page(_c_include("../common/a.cpp", "NEST")),
        },
        ["common/a.cpp:3: START of NEST nested inside region NEST"],
    ),
    (
        "empty region",
        {
            "common/a.cpp": _c_tag("START", "HOLLOW") + "\n" + _c_tag("END", "HOLLOW") + "\n",
            "docs/p.md": _page(_c_include("../common/a.cpp", "HOLLOW")),
        },
        ["common/a.cpp:1: region HOLLOW is empty"],
    ),
    (
        "malformed tag",
        {
            "common/a.cpp": _c_source("GOOD") + f"// {KEYWORD} START: lower_case\n",
            "docs/p.md": _page(_c_include("../common/a.cpp", "GOOD")),
        },
        ["common/a.cpp:5: malformed tag line"],
    ),
    (
        "duplicate name across files",
        {
            "common/a.cpp": _c_source("TWICE"),
            "tests/b.cpp": _c_source("TWICE"),
            "docs/p.md": _page(_c_include("../common/a.cpp", "TWICE")),
        },
        ["tests/b.cpp:2: duplicate tag TWICE: already defined at common/a.cpp:2"],
    ),
    (
        "name prefixing another",
        {
            "common/a.cpp": _c_source("FOO", "FOO_BAR"),
            "docs/p.md": _page(
                _c_include("../common/a.cpp", "FOO"),
                _c_include("../common/a.cpp", "FOO_BAR"),
            ),
        },
        ["common/a.cpp:5: tag FOO_BAR starts with tag FOO"],
    ),
    (
        "a chapter's other pages are pages too",
        {
            "chapters/01_x/csrc/a.cpp": _c_source("ON_README", "ON_TOPIC"),
            "chapters/01_x/README.md": _page(_c_include("csrc/a.cpp", "ON_README")),
            "chapters/01_x/topic.md": _page(_c_include("csrc/a.cpp", "ON_TOPIC")),
            "chapters/01_x/csrc/notes.md": _page(_c_include("a.cpp", "GHOST")),
        },
        [],
    ),
    (
        "tag not included by any page",
        {
            "common/a.cpp": _c_source("USED", "UNUSED"),
            "docs/p.md": _page(_c_include("../common/a.cpp", "USED")),
        },
        ["common/a.cpp:5: tag UNUSED is not included by any page"],
    ),
    (
        "include of a tag that does not exist",
        {
            "common/a.cpp": _c_source("REAL"),
            "docs/p.md": _page(
                _c_include("../common/a.cpp", "REAL"),
                _c_include("../common/a.cpp", "GHOST"),
            ),
        },
        ["docs/p.md:9: include of tag GHOST, which does not exist"],
    ),
    (
        "include naming the wrong file",
        {
            "common/a.cpp": _c_source("HERE"),
            "common/b.cpp": "int b;\n",
            "docs/p.md": _page(_c_include("../common/b.cpp", "HERE")),
        },
        ["docs/p.md:3: tag HERE is in common/a.cpp, not in '../common/b.cpp'"],
    ),
    (
        "include of a file that does not exist",
        {
            "common/a.cpp": _c_source("HERE"),
            "docs/p.md": _page(_c_include("../common/missing.cpp", "HERE")),
        },
        ["docs/p.md:3: literalinclude file '../common/missing.cpp' does not exist"],
    ),
    (
        "start-after and end-before naming different tags",
        {
            "common/a.cpp": _c_source("LEFT", "RIGHT"),
            "docs/p.md": _page(
                _c_include("../common/a.cpp", "LEFT", "RIGHT"),
                _c_include("../common/a.cpp", "RIGHT"),
            ),
        },
        [
            "docs/p.md:3: :start-after: names LEFT but :end-before: names RIGHT",
            "common/a.cpp:2: tag LEFT is not included by any page",
        ],
    ),
    (
        "line-number include",
        {
            "common/a.cpp": _c_source("LINES"),
            "docs/p.md": _page(
                _c_include("../common/a.cpp", "LINES"),
                "```{literalinclude} ../common/a.cpp\n:lines: 2-4\n```\n",
            ),
        },
        ["docs/p.md:9: literalinclude of '../common/a.cpp' uses :lines:"],
    ),
    (
        "unquoted # marker",
        {
            "tools/a.sh": "\n".join(
                ["echo hi", _py_tag("START", "SH_PART"), "echo x", _py_tag("END", "SH_PART")]
            )
            + "\n",
            "docs/p.md": _page(
                _include(
                    "../tools/a.sh",
                    _py_tag("START", "SH_PART"),
                    _py_tag("END", "SH_PART"),
                    quote="",
                )
            ),
        },
        [
            "docs/p.md:3: :start-after: '# " + KEYWORD + " START: SH_PART' starts with '#'",
            "docs/p.md:3: :end-before: '# " + KEYWORD + " END: SH_PART' starts with '#'",
        ],
    ),
    (
        "wrong comment leader in the marker",
        {
            "tools/a.py": "\n".join(
                ["a = 1", _py_tag("START", "LEADER"), "b = 2", _py_tag("END", "LEADER")]
            )
            + "\n",
            "docs/p.md": _page(_c_include("../tools/a.py", "LEADER")),
        },
        ["docs/p.md:3: markers of tag LEADER do not match the tag lines"],
    ),
    (
        "emphasis markers inside a region pass",
        {
            "common/a.cpp": "\n".join(
                [
                    _c_tag("START", "LOUD"),
                    f"int a = 1; // {KEYWORD} EMPHASIZE",
                    "int b = 2;",
                    f"  // {KEYWORD} EMPHASIZE NEXT",
                    "int c = 3;",
                    f"// {KEYWORD} EMPHASIZE NEXT 2",
                    "int d =",
                    "    4;",
                    _c_tag("END", "LOUD"),
                ]
            )
            + "\n",
            "tools/a.py": "\n".join(
                [
                    _py_tag("START", "PY_LOUD"),
                    f"a = 1  # {KEYWORD} EMPHASIZE",
                    _py_tag("END", "PY_LOUD"),
                ]
            )
            + "\n",
            "docs/p.md": _page(
                _c_include("../common/a.cpp", "LOUD"),
                _include(
                    "../tools/a.py", _py_tag("START", "PY_LOUD"), _py_tag("END", "PY_LOUD")
                ),
            ),
        },
        [],
    ),
    (
        "emphasis markers misplaced or misspelt",
        {
            "common/a.cpp": "\n".join(
                [
                    f"int a = 1; // {KEYWORD} EMPHASIZE",
                    _c_tag("START", "QUIET"),
                    f"// {KEYWORD} EMPHASIZE",
                    f"int b = 2; // {KEYWORD} EMPHASISE",
                    "int c = 3;",
                    f"int d = 4; // {KEYWORD} EMPHASIZE NEXT",
                    f"// {KEYWORD} EMPHASIZE NEXT",
                    "",
                    f"// {KEYWORD} EMPHASIZE NEXT",
                    _c_tag("END", "QUIET"),
                    f"// {KEYWORD} EMPHASIZE NEXT",
                    "int e = 5;",
                ]
            )
            + "\n",
            "docs/p.md": _page(_c_include("../common/a.cpp", "QUIET")),
        },
        [
            "common/a.cpp:1: " + KEYWORD + " EMPHASIZE outside every region",
            "common/a.cpp:3: " + KEYWORD + " EMPHASIZE alone on its line",
            "common/a.cpp:4: malformed tag line",
            "common/a.cpp:6: malformed tag line",
            "common/a.cpp:7: " + KEYWORD + " EMPHASIZE NEXT is not followed",
            "common/a.cpp:9: " + KEYWORD + " EMPHASIZE NEXT is not followed",
            "common/a.cpp:11: " + KEYWORD + " EMPHASIZE NEXT outside every region",
        ],
    ),
    (
        "build output and Markdown are not sources",
        {
            "common/a.cpp": _c_source("KEPT"),
            "build/stage01/copy.cpp": _c_source("KEPT", "STRAY"),
            "chapters/01_x/build/copy.cpp": _c_source("STRAY"),
            "docs/notes.md": "Write `" + _c_tag("START", "PROSE") + "` lines.\n",
            "docs/p.md": _page(_c_include("../common/a.cpp", "KEPT")),
        },
        [],
    ),
]


def self_test() -> int:
    """Runs every case of _CASES in a temporary tree; 0 if all pass."""
    failures = 0
    for description, files, expected in _CASES:
        with tempfile.TemporaryDirectory(prefix="check_tags_") as tmp:
            root = Path(tmp)
            for rel, content in files.items():
                path = root / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content, encoding="utf-8")
            problems, _, _ = check(root)
            got = problems.lines()
        missing = [e for e in expected if not any(e in g for g in got)]
        unexpected = [g for g in got if not any(e in g for e in expected)]
        if missing or unexpected:
            failures += 1
            print(f"FAIL: {description}", file=sys.stderr)
            for e in missing:
                print(f"  expected, not reported: {e}", file=sys.stderr)
            for g in unexpected:
                print(f"  reported, not expected: {g}", file=sys.stderr)
        else:
            print(f"ok: {description}")
    passed = len(_CASES) - failures
    print(f"check_tags: {passed} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
