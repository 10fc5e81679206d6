#!/usr/bin/env python3
"""Opens every page of the built guide in headless Chromium and checks it.

The guide (``build/docs/html``, from ``make docs``) is served by Python's
``http.server`` on 127.0.0.1, and Debian's ``chromium`` is driven through
the Chrome DevTools protocol over ``--remote-debugging-pipe`` (JSON messages
separated by NUL bytes on file descriptors 3 and 4), so nothing beyond the
standard library and the browser is needed, and nothing is downloaded.

A page fails on:

* a JavaScript exception or a console error (which includes a resource,
  such as an image or a script, that failed to load);
* a broken image: an ``<img>`` without pixels or a diagram ``<object>``
  whose document did not load;
* no content: a page whose article holds fewer than MIN_TEXT characters;
* a generated output block (``.accinte-output``, see
  docs/_ext/accinte_listings.py) with a line wider than its box, unless the
  line is a row of a table, which tools/generate_outputs.py keeps whole and
  the page lets scroll; or an output box that holds fewer characters than
  the WIDTH that script wraps at;
* an identifier wrapped in an output: a wrap (the " ↩" marker) in a line of
  input (``>>>``, ``...``, ``$``), or right after a qualified name
  (``a.b``, ``a::b``) when the next piece goes on with a letter or digit,
  as in ``torch._C.DispatchKey.Aut ↩`` / ``ocastPrivateUse1``;
* a listing whose caption does not link to its file in the repository at a
  commit or branch (``.../blob/REF/path``, ``.../tree/REF/dir``);
* a PyTorch API whose first use on the page is not a link: the names are
  those of docs/pytorch/api.txt (with their aliases), a use is inline code
  outside headings, API reference entries and links within the guide that
  is the name, or a call of it (``torch.compile(model)``); the link must go to PyTorch's documentation
  of the release (``docs.pytorch.org/docs/2.13/``) or to its source at the
  release's tag (``github.com/pytorch/pytorch/blob/v2.13.0/``), as conf.py
  sets them;
* a broken internal link (tools/check_links.py's check, on the whole site);
* a listing (a captioned block, cut from a source) that shows a tag line
  or an emphasis marker (see tools/check_tags.py), which
  docs/_ext/accinte_listings.py strips;
* a listing longer than MAX_LISTING_LINES lines that is not folded
  (``:fold:``, see docs/_ext/accinte_listings.py): a page shows the few
  lines that carry the idea, the rest is one click away. A
  generated output (``.accinte-output``) is not limited: it is what its
  script printed, which the text around it compares line by line;
* a landing page without its "How to read a listing" section (LEGEND),
  which says what a highlighted line and a folded listing are, or another
  page with a section of that title: the guide says it once;
* a chapter page (``chapters/*/README.html``) whose last section is not
  "On real hardware", or whose "On real hardware" section does not link to
  the porting checklist (``docs/porting.html#porting-NN``, NN the chapter's
  number; tools/check_links.py checks that the anchor exists).

* a diagram (a Graphviz ``<object>``) that is not in a figure whose caption
  links to its SVG, that has no alt text (``aria-label``), whose text holds
  a literal escape sequence (``\\n``, ``\\l``, ``\\r``), or whose text is
  drawn smaller than MIN_DIAGRAM_TEXT pixels;
* at the phone's width (PHONE, 400 px) a page wider than the window, or an
  element of the article that reaches past the window's edge outside a box
  of its own that scrolls sideways (furo lets the whole text column scroll,
  which would hide it): wide tables, listings, outputs and diagrams must
  scroll in their own box; and a table or diagram box that scrolls without
  the line above it that says so (docs/_static/accinte.js adds it);
* a front page (FRONT_DOOR) whose first screen, at WIDTH, does not link to
  what the final backend does and to both ways in: porting a whole device
  (the bring-up plan) and adding one mechanism (the list of chapters);
* at WIDTH, a page taller than MAX_PAGE_HEIGHT pixels, a page a reader
  does not finish, unless TALL_PAGES names it with the reason; and a page
  TALL_PAGES names that is no longer too tall, or no longer exists (a
  stale entry), so that the list cannot outlive its reasons. The height of
  every page is printed.

Every page is checked at WIDTH and again at PHONE; the checks of outputs'
and listings' widths, made for the desktop, run at WIDTH only.

Other code blocks wider than their box are reported, not failed: a reader
can scroll a listing, but an output's cut-off line is the one that says
what went wrong. The search page must find "allocator" and "fallback", and
screenshots of some pages at both widths, and of every diagram, are
written to ``build/docs/screenshots/``.

Usage, from the repository root::

    python3 tools/browser_test.py [--html build/docs/html] [--chromium chromium]
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import functools
import http.server
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import check_links
import generate_outputs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs" / "_ext"))
import accinte_pytorch  # noqa: E402  (docs/_ext: the table of PyTorch's APIs)

ROOT = Path(__file__).resolve().parent.parent

WIDTH, HEIGHT = 1280, 900
#: A phone's window, checked after the desktop's.
PHONE, PHONE_HEIGHT = 400, 800
#: The smallest text of a diagram, in CSS pixels as drawn.
MIN_DIAGRAM_TEXT = 10
#: Fewest characters of text a page's article must hold.
MIN_TEXT = 200
#: The most lines a listing shows unfolded.
MAX_LISTING_LINES = 60
#: The page that explains highlighted lines and folded listings, and the
#: title of its section that does.
LEGEND = ("index.html", "How to read a listing")
#: The front page, and what its first screen (WIDTH x HEIGHT) must link to:
#: (what the reader is offered, where the link goes, a pattern of its href).
FRONT_DOOR = ("index.html", (
    ("what the final backend does", r"^docs/real_models\.html$"),
    ("port my whole device", r"^docs/porting\.html#bring-up-plan$"),
    ("add one mechanism", r"^(#find-a-mechanism|docs/architecture\.html)$"),
))
#: The tallest a page may be at WIDTH, in CSS pixels, as it opens (folded
#: listings closed): what a reader finishes in one sitting.
MAX_PAGE_HEIGHT = 12000
#: Pages still taller than MAX_PAGE_HEIGHT, each with the reason. An entry
#: whose page is no longer too tall, or no longer exists, fails the test
#: as stale: remove it.
TALL_PAGES = {
    "docs/porting.html": "the porting page: split pending",
    "docs/api.html": "the C++ API reference: split pending (a page per chapter)",
    "docs/python_api.html": "the Python API reference: split pending (a page per chapter)",
}
#: Seconds to wait for one page's load event.
LOAD_TIMEOUT = 30
#: Queries the search page must answer.
SEARCHES = ("allocator", "fallback")
#: Pages whose screenshots are saved (relative to the html directory).
SCREENSHOTS = {
    "landing": "index.html",
    "chapter02": "chapters/02_fallback/README.html",
    "chapter09": "chapters/09_native_kernels/README.html",
}

#: Runs in the page after its load event; returns what the checks need.
PAGE_PROBE = r"""
(() => {
  const article = document.querySelector("article[role=main]") || document.body;
  const brokenImages = [...document.querySelectorAll("img")]
    .filter(img => !img.complete || img.naturalWidth === 0)
    .map(img => img.getAttribute("src"));
  const brokenObjects = [...document.querySelectorAll("object")]
    .filter(o => !o.contentDocument || !o.contentDocument.documentElement
                 || o.getBoundingClientRect().width === 0)
    .map(o => o.getAttribute("data"));
  const wide = pre => pre.scrollWidth > pre.clientWidth + 1;
  const captionOf = pre => {
    const wrapper = pre.closest(".literal-block-wrapper");
    const caption = wrapper && wrapper.querySelector(".caption-text");
    return caption ? caption.textContent.trim() : "";
  };
  const label = pre => {
    const caption = captionOf(pre);
    const first = pre.textContent.split("\n")[0];
    return (caption ? caption + ": " : "") + first.slice(0, 70);
  };
  // An output block: its lines, which of them its box cuts, and how many
  // characters of its font the box holds, measured with a hidden copy of
  // each line in the block's own font.
  const measureOutput = pre => {
    const style = getComputedStyle(pre);
    const inner = pre.clientWidth - parseFloat(style.paddingLeft)
      - parseFloat(style.paddingRight);
    const probe = document.createElement("span");
    probe.style.cssText = "position:absolute;visibility:hidden;white-space:pre";
    pre.appendChild(probe);
    const width = text => { probe.textContent = text; return probe.getBoundingClientRect().width; };
    const lines = pre.textContent.replace(/\n$/, "").split("\n");
    const cut = lines.map((line, i) => width(line) > inner + 1 ? i : -1).filter(i => i >= 0);
    const capacity = Math.floor((inner + 1) / (width("0".repeat(100)) / 100));
    probe.remove();
    return {label: label(pre), lines, cut, capacity};
  };
  const outputs = [...document.querySelectorAll(".accinte-output pre")];
  const others = [...document.querySelectorAll("pre")]
    .filter(pre => !pre.closest(".accinte-output"));
  const captions = [...document.querySelectorAll(".literal-block-wrapper .code-block-caption")]
    .map(caption => ({
      text: caption.querySelector(".caption-text").textContent.trim(),
      links: [...caption.querySelectorAll(".caption-text a[href]")].map(a => a.href),
    }));
  // Inline code in the page's own text, in document order: not in a code
  // block, a heading or an API reference entry (the declarations and
  // docstrings docs/api.md and docs/python_api.md render).
  const inline = [...article.querySelectorAll("code")]
    .filter(code => !code.closest("pre, h1, h2, h3, h4, h5, h6, dl.py, dl.cpp, dl.c"))
    .map(code => {
      const link = code.closest("a[href]");
      return {text: code.textContent, href: link ? link.getAttribute("href") : null};
    });
  const sections = [...article.querySelectorAll("section > h2")].map(h2 => ({
    title: h2.textContent.replace(/\u00b6/g, "").trim(),
    links: [...h2.parentElement.querySelectorAll("a[href]")].map(a => a.href),
  }));
  // Diagrams: where they sit, what they say, how large their text is drawn.
  const diagrams = [...document.querySelectorAll("object.graphviz")].map(o => {
    const figure = o.closest("figure");
    const caption = figure && figure.querySelector("figcaption");
    const svg = o.contentDocument && o.contentDocument.querySelector("svg");
    const box = o.getBoundingClientRect();
    const natural = svg ? svg.getBoundingClientRect().width : 0;
    const scale = natural ? box.width / natural : 1;
    const texts = svg ? [...svg.querySelectorAll("text")] : [];
    // NB: the font size is in the SVG's user units; the text's screen
    // transform maps them to CSS pixels as drawn (the viewBox's scale).
    const sizes = texts.map(t => parseFloat(getComputedStyle(t).fontSize) *
                                 Math.abs(t.getScreenCTM() ? t.getScreenCTM().a : 1));
    return {
      data: o.data,
      caption: caption ? caption.textContent.trim() : null,
      captionLinks: caption ? [...caption.querySelectorAll("a[href]")].map(a => a.href) : [],
      alt: o.getAttribute("aria-label") || "",
      texts: texts.map(t => t.textContent),
      smallest: sizes.length ? Math.min(...sizes) : null,
      scale,
    };
  });
  // Every code block: how many lines it shows, whether it is folded.
  const listings = [...document.querySelectorAll("pre")].map(pre => ({
    label: label(pre),
    lines: pre.textContent.replace(/\n$/, "").split("\n").length,
    folded: pre.closest("details") !== null,
    output: pre.closest(".accinte-output") !== null,
    // NB: assembled, so that this file holds no tag keyword. Only a
    // captioned block comes from a source: a page may show a tag in a
    // code block of its own (docs/architecture.md says how to write one).
    tagged: pre.closest(".literal-block-wrapper") !== null
            && pre.textContent.includes("LITERAL" + "INCLUDE"),
  }));
  const root = document.documentElement;
  // What the page cuts at the window's right edge: an element of the article
  // that reaches past it outside a box of its own that scrolls sideways
  // (overflow-x auto or scroll, below the article; furo lets the whole
  // content column scroll instead, which hides it), reported at its
  // outermost such element.
  const scrolls = el => ["auto", "scroll"].includes(getComputedStyle(el).overflowX);
  const inScrollBox = el => {
    for (let a = el.parentElement; a && a !== article; a = a.parentElement) {
      if (scrolls(a)) return true;
    }
    return false;
  };
  const pastEdge = el => el.getBoundingClientRect().right > root.clientWidth + 1;
  const describe = el => el.tagName.toLowerCase()
    + (el.className && typeof el.className === "string" ? "." + el.className.split(/\s+/)[0] : "")
    + ": " + (el.textContent || "").trim().replace(/\s+/g, " ").slice(0, 60);
  const cut = [...article.querySelectorAll("*")]
    .filter(el => pastEdge(el) && !inScrollBox(el)
                  && !(el.parentElement !== article && pastEdge(el.parentElement)))
    .map(describe);
  // Boxes that scroll sideways (accinte.js's selection) and whether the line
  // above each says so.
  const scrollBoxes = [...article.querySelectorAll(".table-wrapper, .accinte-diagram, .accinte-svg-box")]
    .filter(box => box.scrollWidth > box.clientWidth + 1)
    .map(box => {
      const hint = box.previousElementSibling;
      const shown = hint && hint.classList.contains("accinte-scroll-hint")
                    && !hint.hidden && hint.getBoundingClientRect().height > 0;
      return {label: describe(box), hinted: !!shown};
    });
  // The links a reader sees without scrolling.
  const firstScreen = [...article.querySelectorAll("a[href]")]
    .filter(a => { const r = a.getBoundingClientRect();
                   return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight; })
    .map(a => ({href: a.getAttribute("href"), text: a.textContent.trim()}));
  return JSON.stringify({
    cut, scrollBoxes, firstScreen,
    diagrams,
    pageWidth: root.scrollWidth, windowWidth: root.clientWidth,
    pageHeight: root.scrollHeight,
    textLength: article.innerText.trim().length,
    brokenImages, brokenObjects,
    outputs: outputs.map(measureOutput),
    wideOthers: others.filter(wide).map(label),
    captions, sections, inline, listings,
  });
})()
"""

#: The title of the section every chapter page ends with.
HARDWARE_SECTION = "On real hardware"
#: A chapter's page, relative to the html directory: its number.
CHAPTER_PAGE = re.compile(r"^chapters/(\d\d)_[^/]+/README\.html$")
#: Where a listing's caption links: a file or directory at a commit or branch.
REPOSITORY_LINK = re.compile(r"^https://[^/]+/[^/]+/[^/]+/(blob|tree)/[^/]+/.+")
#: A qualified name (``a.b``, ``a::b``) at the end of a piece of a wrapped line.
_NAME_END = re.compile(r"[A-Za-z_]\w*(?:(?:\.|::)\w+)+$")


def output_problems(output: Dict[str, Any]) -> List[str]:
    """Lines of a generated output cut by their box outside a table, a box
    narrower than what generate_outputs wraps at, and wrapped identifiers."""
    lines, what = output["lines"], output["label"]
    problems = []
    tables = generate_outputs.table_lines(lines)
    cut = [i for i in output["cut"] if i not in tables]
    problems += [f"output line wider than its box: {what}: {lines[i][:70]}" for i in cut]
    if output["capacity"] < generate_outputs.WIDTH:
        problems.append(f"output box holds {output['capacity']} characters, fewer than the "
                        f"{generate_outputs.WIDTH} tools/generate_outputs.py wraps at: {what}")
    problems += [f"wrapped identifier in output: {what}: {problem}"
                 for problem in wrapped_identifiers(lines)]
    return problems


def wrapped_identifiers(lines: List[str]) -> List[str]:
    """Wraps that cut an identifier or a line of input (see the docstring)."""
    problems = []
    marker = generate_outputs.MARKER
    for index, line in enumerate(lines[:-1]):
        if not line.endswith(marker):
            continue
        piece = line[: -len(marker)]
        following = lines[index + 1].lstrip()
        if generate_outputs.is_input(piece):
            problems.append(f"a line of input is wrapped: {piece.strip()[:70]}")
        elif _NAME_END.search(piece) and re.match(r"\w", following):
            problems.append(f"{piece.split()[-1]} {marker.strip()} {following.split()[0]}")
    return problems


def caption_problems(captions: List[Dict[str, Any]]) -> List[str]:
    """Listing captions that do not link to the repository."""
    return [f"caption not linked to the repository: {c['text'][:70]}"
            for c in captions
            if not any(REPOSITORY_LINK.match(link) for link in c["links"])]


#: A literal escape sequence in a diagram's text: DOT source that escaped
#: its backslash (``\\n``), which Graphviz then draws.
_ESCAPE = re.compile(r"\\[nlr]")


def diagram_problems(diagrams: List[Dict[str, Any]]) -> List[str]:
    """Diagrams that are not captioned figures with alt text and a link to
    their SVG, that show an escape sequence, or whose text is too small."""
    problems = []
    for diagram in diagrams:
        name = diagram["data"].rsplit("/", 1)[-1]
        if diagram["caption"] is None:
            problems.append(f"diagram not in a figure with a caption: {name}")
        elif diagram["data"] not in diagram["captionLinks"]:
            problems.append(f"diagram's caption does not link to its SVG: {name}")
        if not diagram["alt"].strip():
            problems.append(f"diagram without alt text: {name}")
        for text in diagram["texts"]:
            if _ESCAPE.search(text):
                problems.append(f"diagram shows an escape sequence: {name}: {text!r}")
        if diagram["smallest"] is not None and diagram["smallest"] < MIN_DIAGRAM_TEXT:
            problems.append(f"diagram text drawn at {diagram['smallest']:.1f} px, under "
                            f"{MIN_DIAGRAM_TEXT}: {name}")
    return problems


def chapter_problems(page: str, sections: List[Dict[str, Any]]) -> List[str]:
    """A chapter page must end with its "On real hardware" section, which
    links to its entry of the porting checklist."""
    match = CHAPTER_PAGE.match(page)
    if match is None:
        return []
    titles = [section["title"] for section in sections]
    if HARDWARE_SECTION not in titles:
        return [f'no "{HARDWARE_SECTION}" section']
    problems = []
    if titles[-1] != HARDWARE_SECTION:
        problems.append(f'"{HARDWARE_SECTION}" is not the last section (it is followed '
                        f'by "{titles[-1]}")')
    links = sections[titles.index(HARDWARE_SECTION)]["links"]
    anchor = f"docs/porting.html#porting-{match.group(1)}"
    if not any(link.split("?")[0].endswith(anchor) for link in links):
        problems.append(f'"{HARDWARE_SECTION}" does not link to {anchor}')
    return problems


def listing_problems(listings: List[Dict[str, Any]]) -> List[str]:
    """Listings that show a tag or emphasis marker, and unfolded listings
    longer than MAX_LISTING_LINES."""
    problems = [f"listing shows a tag line or marker: {listing['label']}"
                for listing in listings if listing.get("tagged")]
    return problems + [f"listing of {listing['lines']} lines, more than {MAX_LISTING_LINES}, "
            f"not folded: {listing['label']}"
            for listing in listings
            if listing["lines"] > MAX_LISTING_LINES and not listing["folded"]
            and not listing.get("output")]


def front_door_problems(page: str, first_screen: List[Dict[str, Any]]) -> List[str]:
    """The front page's first screen must offer each way in of FRONT_DOOR."""
    where, ways = FRONT_DOOR
    if page != where:
        return []
    return [f'first screen has no link to "{what}" ({pattern})'
            for what, pattern in ways
            if not any(re.match(pattern, link["href"]) for link in first_screen)]


def height_problems(page: str, height: int,
                    allowed: Optional[Dict[str, str]] = None) -> List[str]:
    """At WIDTH: a page taller than MAX_PAGE_HEIGHT that ``allowed``
    (TALL_PAGES) does not name, and an entry of it whose page is short
    enough now."""
    allowed = TALL_PAGES if allowed is None else allowed
    if height > MAX_PAGE_HEIGHT and page not in allowed:
        return [f"the page is {height} px tall at {WIDTH} px, more than "
                f"{MAX_PAGE_HEIGHT}: split it, or name it in TALL_PAGES with the reason"]
    if height <= MAX_PAGE_HEIGHT and page in allowed:
        return [f"stale entry of TALL_PAGES ({allowed[page]!r}): the page is {height} px "
                f"tall at {WIDTH} px, no more than {MAX_PAGE_HEIGHT}: remove the entry"]
    return []


def stale_tall_pages(pages: List[str],
                     allowed: Optional[Dict[str, str]] = None) -> List[str]:
    """Entries of ``allowed`` (TALL_PAGES) that name no page of the guide."""
    allowed = TALL_PAGES if allowed is None else allowed
    return [f"stale entry of TALL_PAGES ({reason!r}): no page {page}"
            for page, reason in allowed.items() if page not in pages]


def phone_problems(cut: List[str], boxes: List[Dict[str, Any]]) -> List[str]:
    """At the phone's width: what the page cuts at the window's edge outside
    a box that scrolls, and boxes that scroll without their hint."""
    return ([f"cut at the window's edge, outside a box that scrolls: {what}" for what in cut]
            + [f"scrolls sideways without a hint: {box['label']}"
               for box in boxes if not box["hinted"]])


def legend_problems(page: str, sections: List[Dict[str, Any]]) -> List[str]:
    """The legend of the listings: on its page, and on no other."""
    titles = [section["title"] for section in sections]
    where, title = LEGEND
    if page == where and title not in titles:
        return [f'no "{title}" section: the guide must say what highlighted lines '
                f'and folded listings are']
    if page != where and title in titles:
        return [f'a "{title}" section: the guide says it once, on {where}']
    return []


#: A use of a name in inline code: the name, or a call of it.
_USE = re.compile(r"^([A-Za-z_][\w.:]*)(\(.*\))?$", re.S)


def _pytorch_names() -> Dict[str, Any]:
    """Every spelling of a PyTorch API the guide links (docs/pytorch/api.txt):
    {spelling: table entry}."""
    names = {}
    for entry in accinte_pytorch.read_table():
        for spelling in [entry.name] + entry.aliases:
            names[spelling] = entry
    return names


def _pytorch_prefixes() -> Dict[str, str]:
    """Where a link to PyTorch must go, by kind of entry (conf.py's settings)."""
    settings: Dict[str, Any] = {}
    text = (ROOT / "conf.py").read_text(encoding="utf-8")
    for name in ("pytorch_release", "pytorch_tag"):
        match = re.search(rf'^{name} = "([^"]+)"', text, re.M)
        settings[name] = match.group(1) if match else None
    return {
        "py": f"https://docs.pytorch.org/docs/{settings['pytorch_release']}/",
        "src": f"https://github.com/pytorch/pytorch/(blob|tree)/{settings['pytorch_tag']}/",
    }


def api_link_problems(inline: List[Dict[str, Any]],
                      names: Optional[Dict[str, Any]] = None,
                      prefixes: Optional[Dict[str, str]] = None) -> List[str]:
    """PyTorch APIs whose first use on a page is not linked, or is linked
    elsewhere than to PyTorch's documentation or source of the release."""
    names = _pytorch_names() if names is None else names
    prefixes = _pytorch_prefixes() if prefixes is None else prefixes
    problems, seen = [], set()
    for code in inline:
        text = " ".join(code["text"].split())
        match = _USE.match(text)
        entry = names.get(match.group(1)) if match else None
        if entry is None or entry.name in seen:
            continue
        # NB: code in a link within the guide (a section of a chapter named
        # after the API, on the front page) names the section, not the API.
        if code["href"] is not None and not re.match(r"https?://", code["href"]):
            continue
        seen.add(entry.name)
        href = code["href"]
        prefix = prefixes["src" if entry.role == "src" else "py"]
        if href is None:
            problems.append(f"first use of {entry.name} not linked: `{text[:60]}`")
        elif not re.match(prefix, href):
            problems.append(f"first use of {entry.name} links to {href}, not to {prefix}")
    return problems


#: How many results the search page lists (the search runs after load).
SEARCH_PROBE = (
    "document.querySelectorAll('#search-results li, ul.search li').length"
)


class Browser:
    """A headless Chromium driven through the DevTools protocol on a pipe."""

    def __init__(self, executable: str, profile: str) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire_fds() -> None:
            # In the child: the pipes become fds 3 and 4, which dup2 makes
            # inheritable. NB: both are first moved above 9, so that wiring
            # one cannot overwrite the other if it happened to be 3 or 4.
            read_end = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            write_end = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self.process = subprocess.Popen(
            [
                executable,
                "--headless",
                "--no-sandbox",  # NB: CI and this machine run as root
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                f"--window-size={WIDTH},{HEIGHT}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Python's own descriptors are not inheritable, so keeping the
            # rest open leaks nothing; closing them would close 3 and 4.
            close_fds=False,
            preexec_fn=wire_fds,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next_id = 0
        self._messages: "queue.Queue[Optional[Dict[str, Any]]]" = queue.Queue()
        self.events: List[Dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send(
            "Target.attachToTarget", targetId=target, flatten=True
        )["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=True)
        self.set_window(WIDTH, HEIGHT)

    def set_window(self, width: int, height: int, mobile: bool = False) -> None:
        """The window's size; ``mobile`` as a phone, which honours the
        pages' viewport meta tag."""
        self.send(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=mobile,
        )

    def _read(self) -> None:
        buffer = b""
        with os.fdopen(self._from_browser, "rb", buffering=0) as pipe:
            while True:
                chunk = pipe.read(65536)
                if not chunk:
                    self._messages.put(None)
                    return
                buffer += chunk
                while b"\0" in buffer:
                    message, buffer = buffer.split(b"\0", 1)
                    self._messages.put(json.loads(message))

    def _next_message(self, deadline: float) -> Dict[str, Any]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no answer from the browser")
        try:
            message = self._messages.get(timeout=remaining)
        except queue.Empty:
            raise TimeoutError("no answer from the browser") from None
        if message is None:
            raise RuntimeError("the browser closed its DevTools pipe")
        return message

    def send(self, method: str, session: bool = False, timeout: float = 30,
             **params: Any) -> Dict[str, Any]:
        """Sends one command and returns its result; keeps events seen meanwhile."""
        self._next_id += 1
        command: Dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            command["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            message = self._next_message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for_event(self, method: str, timeout: float) -> None:
        """Waits until an event named ``method`` arrives (or was kept)."""
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._next_message(deadline))

    def evaluate(self, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate", session=True, expression=expression, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"probe failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str) -> List[Dict[str, Any]]:
        """Loads ``url``; returns the events of the load (errors included)."""
        self.events = []
        self.send("Page.navigate", session=True, url=url)
        self.wait_for_event("Page.loadEventFired", LOAD_TIMEOUT)
        # Let scripts that run on load (search, copy buttons) report errors.
        time.sleep(0.3)
        self.evaluate("0")
        return self.events

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", session=True, format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)


def errors_of(events: List[Dict[str, Any]]) -> List[str]:
    """The JavaScript exceptions and console errors among ``events``."""
    errors = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text")
            errors.append(f"exception: {text}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            errors.append(f"console.{params['type']}: {args}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            errors.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())
    return errors


def serve(directory: Path) -> http.server.ThreadingHTTPServer:
    """http.server on 127.0.0.1, on a free port, in a thread."""

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def pages_of(html: Path) -> List[str]:
    """Every HTML page of the guide, relative to ``html``, in a stable order."""
    return sorted(
        p.relative_to(html).as_posix()
        for p in html.rglob("*.html")
        if not any(part.startswith("_") for part in p.relative_to(html).parts)
    )


#: The fewest characters an output box held, over the pages checked: what
#: generate_outputs.WIDTH may be raised to.
capacities: List[int] = []


#: Scrolls the page to its diagram number N (the expression's argument).
SCROLL_TO_DIAGRAM = (
    "(n => {{ const o = document.querySelectorAll('object.graphviz')[n];"
    " (o.closest('figure') || o).scrollIntoView({{behavior: 'instant'}}); return 1; }})({})"
)


#: Each page's height at WIDTH, in CSS pixels, as check_page measured it.
heights: Dict[str, int] = {}


def check_page(browser: Browser, base: str, page: str, width: int = WIDTH,
               screenshots: Optional[Path] = None) -> List[str]:
    """Problems of one page at one window width (empty if it passes)."""
    problems = errors_of(browser.open(f"{base}/{page}"))
    probe = json.loads(browser.evaluate(PAGE_PROBE))
    problems += [f"broken image {src}" for src in probe["brokenImages"]]
    problems += [f"diagram did not load: {data}" for data in probe["brokenObjects"]]
    if page != "search.html" and probe["textLength"] < MIN_TEXT:
        problems.append(f"no content ({probe['textLength']} characters of text)")
    problems += diagram_problems(probe["diagrams"])
    if probe["pageWidth"] > probe["windowWidth"]:
        problems.append(f"the page is {probe['pageWidth']} px wide, wider than the "
                        f"{probe['windowWidth']} px window: it scrolls sideways")
    if width == PHONE:
        problems += phone_problems(probe["cut"], probe["scrollBoxes"])
    if width == WIDTH:
        heights[page] = probe["pageHeight"]
        problems += height_problems(page, probe["pageHeight"])
        problems += front_door_problems(page, probe["firstScreen"])
        for output in probe["outputs"]:
            problems += output_problems(output)
            capacities.append(output["capacity"])
        for what in probe["wideOthers"]:
            print(f"  note: {page}: code block scrolls sideways: {what}")
    problems += caption_problems(probe["captions"])
    problems += chapter_problems(page, probe["sections"])
    problems += listing_problems(probe["listings"])
    problems += legend_problems(page, probe["sections"])
    problems += api_link_problems(probe["inline"])
    if screenshots is not None:
        stem = page.removesuffix(".html").replace("/", "_")
        for name, shown in SCREENSHOTS.items():
            if shown == page:
                browser.screenshot(screenshots / f"{name}-{width}.png")
        for index in range(len(probe["diagrams"])):
            browser.evaluate(SCROLL_TO_DIAGRAM.format(index))
            time.sleep(0.1)
            browser.screenshot(screenshots / f"diagram-{stem}-{index}-{width}.png")
    return problems


def self_test() -> int:
    """Checks api_link_problems on made-up pages; 0 if it behaves."""
    Entry = accinte_pytorch.Entry
    names = {
        "torch.compile": Entry("py:func", "torch.compile", "x.html", [], 0),
        "at::native::cpu_fallback": Entry("src", "at::native::cpu_fallback", "a.h", [], 0),
        "cpu_fallback": Entry("src", "at::native::cpu_fallback", "a.h", [], 0),
    }
    prefixes = {"py": "https://docs/2.13/", "src": "https://gh/(blob|tree)/v2.13.0/"}
    doc, src = "https://docs/2.13/x.html#torch.compile", "https://gh/blob/v2.13.0/a.h#L1"
    cases = [
        ("linked first uses pass",
         [{"text": "torch.compile(model)", "href": doc}, {"text": "torch.compile", "href": None},
          {"text": "cpu_fallback", "href": src}, {"text": "at::native::cpu_fallback", "href": None},
          {"text": "torch.accinte", "href": None}], []),
        ("code in a link within the guide is not a use",
         [{"text": "torch.compile", "href": "chapters/13.html#x"},
          {"text": "torch.compile", "href": None}],
         ["first use of torch.compile not linked: `torch.compile`"]),
        ("an unlinked first use fails",
         [{"text": "torch.compile", "href": None}, {"text": "torch.compile", "href": doc}],
         ["first use of torch.compile not linked: `torch.compile`"]),
        ("an alias counts as a use",
         [{"text": "cpu_fallback()", "href": None}],
         ["first use of at::native::cpu_fallback not linked: `cpu_fallback()`"]),
        ("a link elsewhere fails",
         [{"text": "torch.compile", "href": "https://docs/stable/x.html"}],
         ["first use of torch.compile links to https://docs/stable/x.html, "
          "not to https://docs/2.13/"]),
        ("a source link at another tag fails",
         [{"text": "cpu_fallback", "href": "https://gh/blob/main/a.h"}],
         ["first use of at::native::cpu_fallback links to https://gh/blob/main/a.h, "
          "not to https://gh/(blob|tree)/v2.13.0/"]),
    ]
    failures = 0
    for description, inline, expected in cases:
        got = api_link_problems(inline, names, prefixes)
        if got == expected:
            print(f"ok: {description}")
        else:
            failures += 1
            print(f"FAIL: {description}: expected {expected}, got {got}", file=sys.stderr)
    listings = [{"label": "a.cpp: x", "lines": MAX_LISTING_LINES + 1, "folded": False},
                {"label": "b.cpp: y", "lines": MAX_LISTING_LINES + 1, "folded": True},
                {"label": "c.cpp: z", "lines": MAX_LISTING_LINES, "folded": False},
                {"label": "Output of d.py", "lines": MAX_LISTING_LINES + 1, "folded": False,
                 "output": True}]
    listing_cases = [
        ("a long unfolded listing fails on any page (an output does not)",
         listing_problems(listings),
         [f"listing of {MAX_LISTING_LINES + 1} lines, more than {MAX_LISTING_LINES}, "
          f"not folded: a.cpp: x"]),
        ("the legend's page without it fails",
         len(legend_problems(LEGEND[0], [{"title": "Other"}])), 1),
        ("the legend on another page fails",
         len(legend_problems("docs/x.html", [{"title": LEGEND[1]}])), 1),
        ("the legend on its page passes",
         legend_problems(LEGEND[0], [{"title": LEGEND[1]}]), []),
        ("a front page offering both ways in passes",
         front_door_problems(FRONT_DOOR[0], [{"href": "docs/real_models.html"},
                                             {"href": "docs/porting.html#bring-up-plan"},
                                             {"href": "#find-a-mechanism"}]), []),
        ("a front page without the bring-up plan on its first screen fails",
         len(front_door_problems(FRONT_DOOR[0], [{"href": "docs/real_models.html"},
                                                 {"href": "docs/architecture.html"}])), 1),
        ("another page needs no front door",
         front_door_problems("docs/porting.html", []), []),
        ("at a phone's width, a cut element and an unhinted box fail",
         phone_problems(["table: x"], [{"label": "div.table-wrapper: y", "hinted": False},
                                       {"label": "div.accinte-diagram: z", "hinted": True}]),
         ["cut at the window's edge, outside a box that scrolls: table: x",
          "scrolls sideways without a hint: div.table-wrapper: y"]),
        ("at a phone's width, hinted boxes pass",
         phone_problems([], [{"label": "div.table-wrapper: y", "hinted": True}]), []),
        ("a page of the greatest height passes",
         height_problems("a.html", MAX_PAGE_HEIGHT, {}), []),
        ("a taller page fails",
         len(height_problems("a.html", MAX_PAGE_HEIGHT + 1, {})), 1),
        ("a taller page named in the list passes",
         height_problems("a.html", MAX_PAGE_HEIGHT + 1, {"a.html": "split pending"}), []),
        ("a listed page that is short enough now is stale",
         height_problems("a.html", MAX_PAGE_HEIGHT, {"a.html": "split pending"}),
         [f"stale entry of TALL_PAGES ('split pending'): the page is {MAX_PAGE_HEIGHT} px "
          f"tall at {WIDTH} px, no more than {MAX_PAGE_HEIGHT}: remove the entry"]),
        ("a listed page that no longer exists is stale",
         stale_tall_pages(["b.html"], {"a.html": "split pending", "b.html": "x"}),
         ["stale entry of TALL_PAGES ('split pending'): no page a.html"]),
    ]
    for description, got, expected in listing_cases:
        if got == expected:
            print(f"ok: {description}")
        else:
            failures += 1
            print(f"FAIL: {description}: expected {expected}, got {got}", file=sys.stderr)
    cases += listing_cases
    # The real table and settings: every entry is found, and conf.py's
    # settings are read.
    real = _pytorch_names()
    if "torch.compile" not in real or "None" in "".join(_pytorch_prefixes().values()):
        failures += 1
        print("FAIL: docs/pytorch/api.txt or conf.py's pytorch settings not read",
              file=sys.stderr)
    print(f"browser_test self-test: {len(cases) + 1 - failures} passed, {failures} failed")
    return 1 if failures else 0


def check_search(browser: Browser, base: str, query: str) -> List[str]:
    errors = errors_of(browser.open(f"{base}/search.html?q={query}"))
    deadline = time.monotonic() + 15
    count = 0
    while time.monotonic() < deadline:
        count = browser.evaluate(SEARCH_PROBE) or 0
        if count:
            break
        time.sleep(0.25)
    problems = [f"search {query!r}: {e}" for e in errors]
    if not count:
        problems.append(f"search {query!r}: no results")
    else:
        print(f"ok: search {query!r}: {count} results")
    return problems


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html", type=Path, default=ROOT / "build" / "docs" / "html")
    parser.add_argument("--screenshots", type=Path,
                        default=ROOT / "build" / "docs" / "screenshots")
    parser.add_argument("--chromium", default="chromium")
    parser.add_argument("--self-test", action="store_true",
                        help="check the PyTorch link check on made-up pages (no browser)")
    args = parser.parse_args(argv)
    if args.self_test:
        return self_test()
    if not (args.html / "index.html").is_file():
        print(f"browser_test: {args.html}/index.html missing (run `make docs`)",
              file=sys.stderr)
        return 1
    executable = shutil.which(args.chromium)
    if executable is None:
        print(f"browser_test: {args.chromium} not found (run `make deps`)", file=sys.stderr)
        return 1
    args.screenshots.mkdir(parents=True, exist_ok=True)
    failed = passed = 0
    broken, checked = check_links.check(args.html)
    if broken:
        failed += 1
        print(f"FAIL: {len(broken)} broken of {checked} internal links")
        for problem in broken:
            print(f"  {problem}")
    else:
        passed += 1
        print(f"ok: {checked} internal links")
    pages = pages_of(args.html)
    stale = stale_tall_pages(pages)
    if stale:
        failed += 1
        print("FAIL: TALL_PAGES")
        for problem in stale:
            print(f"  {problem}")
    server = serve(args.html)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    with tempfile.TemporaryDirectory(prefix="browser_test_") as profile:
        browser = Browser(executable, profile)
        try:
            for width, height in ((WIDTH, HEIGHT), (PHONE, PHONE_HEIGHT)):
                browser.set_window(width, height, mobile=width == PHONE)
                for page in pages:
                    problems = check_page(browser, base, page, width, args.screenshots)
                    if problems:
                        failed += 1
                        print(f"FAIL: {page} at {width} px")
                        for problem in problems:
                            print(f"  {problem}")
                    else:
                        passed += 1
                        print(f"ok: {page} at {width} px")
            browser.set_window(WIDTH, HEIGHT)
            for query in SEARCHES:
                problems = check_search(browser, base, query)
                if problems:
                    failed += 1
                    print("FAIL: " + "\n  ".join(problems))
                else:
                    passed += 1
        finally:
            browser.close()
            server.shutdown()
    if heights:
        print(f"page heights at {WIDTH} px (most {MAX_PAGE_HEIGHT}, tallest first):")
        for page, height in sorted(heights.items(), key=lambda item: -item[1]):
            note = f"  (allowed: {TALL_PAGES[page]})" if page in TALL_PAGES else ""
            print(f"  {height:>6} px  {page}{note}")
    if capacities:
        print(f"output boxes hold {min(capacities)} characters or more; "
              f"tools/generate_outputs.py wraps at {generate_outputs.WIDTH}")
    print(f"screenshots in {args.screenshots}")
    print(f"{passed} passed, {failed} failed: browser test")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
