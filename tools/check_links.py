#!/usr/bin/env python3
"""Checks every internal link of the built guide.

Sphinx's nitpicky mode (``-n``) checks the references it resolves itself, but
not a Markdown link to a file, a raw ``href``, or an anchor inside a page. This
reads every HTML page of ``build/docs/html`` and fails (one ``page: problem``
line each) on an ``href`` or ``src`` that points inside the site at a file
that does not exist, or at an ``#anchor`` that the target page does not
define. Links that leave the site (``http:``, ``mailto:``, ...) are not
followed: the guide must build and check offline.

Usage, from the repository root::

    python3 tools/check_links.py [--html build/docs/html]
    python3 tools/check_links.py --self-test

Only the standard library is used.
"""

from __future__ import annotations

import argparse
import html.parser
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Set, Tuple
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent


class _Page(html.parser.HTMLParser):
    """Collects the ids and the links of one page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: Set[str] = set()
        self.links: List[str] = []

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, str]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name") and (name == "id" or tag == "a"):
                self.ids.add(value)
            elif name in ("href", "src") or (tag == "object" and name == "data"):
                self.links.append(value)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page


def check(html_dir: Path) -> Tuple[List[str], int]:
    """Problems of the site at ``html_dir``, and the number of links checked."""
    html_dir = html_dir.resolve()
    pages: Dict[Path, _Page] = {
        path: _parse(path) for path in sorted(html_dir.rglob("*.html"))
    }
    problems: List[str] = []
    checked = 0
    for path, page in pages.items():
        where = path.relative_to(html_dir).as_posix()
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith("//"):
                continue  # leaves the site
            if not parts.path and not parts.fragment:
                continue
            checked += 1
            target = path if not parts.path else (path.parent / unquote(parts.path))
            target = target.resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                problems.append(f"{where}: link to a missing file: {link}")
                continue
            fragment = unquote(parts.fragment)
            if fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if fragment not in ids:
                    problems.append(f"{where}: link to a missing anchor: {link}")
    return problems, checked


def self_test() -> int:
    """Builds small sites that must pass or fail; 0 if all behave."""
    cases = [
        ("good links pass", {
            "index.html": '<a href="a/b.html#x">b</a><img src="_images/i.svg">'
                          '<a href="#top" id="top">t</a><a href="https://e.org/">e</a>',
            "a/b.html": '<h1 id="x">B</h1><a href="../index.html">up</a>',
            "_images/i.svg": "<svg/>",
        }, []),
        ("a missing file fails", {
            "index.html": '<a href="gone.html">g</a>',
        }, ["index.html: link to a missing file: gone.html"]),
        ("a missing anchor fails", {
            "index.html": '<a href="b.html#nope">b</a>',
            "b.html": '<h1 id="yes">B</h1>',
        }, ["index.html: link to a missing anchor: b.html#nope"]),
        ("a missing image fails", {
            "index.html": '<img src="_images/none.png">',
        }, ["index.html: link to a missing file: _images/none.png"]),
    ]
    failures = 0
    for description, files, expected in cases:
        with tempfile.TemporaryDirectory(prefix="check_links_") as tmp:
            root = Path(tmp)
            for rel, text in files.items():
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(text, encoding="utf-8")
            got, _ = check(root)
        if got == expected:
            print(f"ok: {description}")
        else:
            failures += 1
            print(f"FAIL: {description}: expected {expected}, got {got}", file=sys.stderr)
    print(f"check_links: {len(cases) - failures} passed, {failures} failed")
    return 1 if failures else 0


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html", type=Path, default=ROOT / "build" / "docs" / "html")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args(argv)
    if args.self_test:
        return self_test()
    if not (args.html / "index.html").is_file():
        print(f"check_links: {args.html}/index.html missing (run `make docs`)",
              file=sys.stderr)
        return 1
    problems, checked = check(args.html)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"check_links: {len(problems)} broken of {checked} internal links",
              file=sys.stderr)
        return 1
    print(f"check_links: {checked} internal links, all OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
