"""The guide's diagrams: one style, figures that stay readable, and the
diagrams it draws from the repository itself.

Every diagram is a ``{graphviz}`` block (``sphinx.ext.graphviz``, drawn at
build time). This extension makes them one family:

* **One style.** The fonts, the default node (a rounded, filled box) and the
  edge colour are Graphviz command-line defaults, DOT_ARGS below, which
  conf.py passes as ``graphviz_dot_args``. A block sets only what differs
  from them, per node: a role's shape and colour from PALETTE. The build
  fails (a Sphinx warning, and warnings are errors) on a block that sets a
  font, a ``node [...]``/``edge [...]`` default (the command line's would
  override it silently), a colour outside PALETTE, or a literal ``\\n``
  (which Graphviz prints as a backslash and an n).
* **Figures.** Every diagram has a ``:caption:`` and an ``:alt:`` (the build
  fails without them). The caption ends with a link to the SVG file, full
  size; the diagram is an ``<object>`` with ``role="img"`` and the alt text
  as its label.
* **Readable on a phone.** A diagram is shown at its natural size (Graphviz's
  points, as CSS points), shrinks to its column down to MIN_SCALE of it, and
  below that scrolls sideways in its own box: its text never drops under
  10 px. tools/browser_test.py checks this at 1280 and 400 px.

``{accinte-stages}`` draws the stages layered on the emulator. The chapters
and their titles are read from ``chapters/NN_name/README.md`` when the guide
is built, so a new chapter appears in the picture without anyone editing it
(an incremental build re-reads the pages that draw it when the chapter list
changes).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import List, Tuple

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.ext.graphviz import GraphvizError, figure_wrapper, graphviz, render_dot
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

FONT = "Helvetica,Arial,sans-serif"
#: Graphviz defaults of every diagram (conf.py: graphviz_dot_args). NB: a
#: command-line default beats a ``node [...]`` statement of the graph, which
#: is why blocks may not use one; an attribute of a single node still wins.
DOT_ARGS = [
    f"-Gfontname={FONT}", "-Gfontsize=11",
    "-Gnodesep=0.3", "-Granksep=0.35",
    # NB: clusters inherit it; a label on the left keeps clear of the edges
    # that enter a cluster in the middle.
    "-Glabeljust=l",
    f"-Nfontname={FONT}", "-Nfontsize=11",
    "-Nshape=box", "-Nstyle=rounded,filled", "-Nfillcolor=#eef3fb",
    "-Ncolor=#556070", "-Nmargin=0.12,0.06",
    f"-Efontname={FONT}", "-Efontsize=10", "-Ecolor=#556070",
]
#: The colours a diagram may use, by role.
PALETTE = {
    "#eef3fb": "a step (the default fill)",
    "#e8e8e8": "where the story starts or ends: the caller, the result",
    "#fff8e0": "a decision (shape=diamond), a note or data (shape=note), or the "
               "step the diagram is about",
    "#fbe9e9": "an error, or what goes wrong",
    "#f4f4f4": "something outside the device: another process, a file",
    "#ffffff": "free space (chapter 07's memory segments)",
    "#556070": "lines and arrows (the default)",
    "#8090a0": "the dashed frame of a cluster",
}
#: How far a diagram shrinks to fit its column before it scrolls instead:
#: 11-point labels stay near 12 CSS pixels, 10-point ones above 10.
MIN_SCALE = 0.8

_FORBIDDEN = [
    (re.compile(r"\bfont(name|size|color)\s*="), "sets a font (conf.py sets them for all)"),
    (re.compile(r"(^|[;{\s])(node|edge)\s*\["),
     "sets node [...] or edge [...] defaults (set attributes per node; the defaults "
     "are DOT_ARGS in docs/_ext/accinte_diagrams.py)"),
    (re.compile(r"\\\\[nlr]"), "has \\\\n, which Graphviz draws as a backslash and an n (a line break is \\n)"),
]
_COLOUR = re.compile(r"#[0-9a-fA-F]{6}\b")


def diagram_problems(code: str) -> List[str]:
    """How a diagram's DOT source breaks the guide's one style."""
    problems = [what for pattern, what in _FORBIDDEN if pattern.search(code)]
    for colour in sorted({c.lower() for c in _COLOUR.findall(code)}):
        if colour not in PALETTE:
            problems.append(f"uses the colour {colour}, not one of PALETTE in "
                            "docs/_ext/accinte_diagrams.py")
    return problems


def chapters(srcdir: Path) -> List[Tuple[str, str, Path]]:
    """(number, title, README path) of every chapter, in order."""
    result = []
    for readme in sorted(srcdir.glob("chapters/[0-9][0-9]_*/README.md")):
        number = readme.parent.name[:2]
        title = readme.parent.name[3:].replace("_", " ")
        for line in readme.read_text(encoding="utf-8").splitlines():
            if line.startswith("# "):
                # "# Chapter 02 — The CPU fallback: every operator runs"
                # -> "The CPU fallback", the mechanism
                title = re.sub(r"^Chapter \d+\s*[—-]\s*", "", line[2:].strip())
                title = title.split(": ", 1)[0].replace("`", "")
                break
        result.append((number, title, readme))
    return result


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def stages_dot(items: List[Tuple[str, str, Path]]) -> str:
    """DOT source: chapters stacked on the emulator, one stage per chapter."""
    lines = [
        "digraph stages {",
        "  rankdir=TB; nodesep=0.35; ranksep=0.25;",
        '  emulator [label="common/: the emulator, libaccinte.so\\n'
        'runtime C API, device memory, streams, events\\n(knows nothing of PyTorch)",'
        ' fillcolor="#e8e8e8"];',
    ]
    below = "emulator"
    for number, title, _ in items:
        chapter, stage = f"ch{number}", f"stage{number}"
        lines.append(f"  {chapter} [label={_quote(f'chapter {number}: {title}')}];")
        lines.append(f"  {chapter} -> {below};")
        lines.append(
            f"  {stage} [label={_quote(f'build/stage{number}/python')}, shape=note,"
            ' style=filled, fillcolor="#fff8e0"];'
        )
        # NB: chapter -> stage puts the stage on the right, so that on a
        # narrow screen the chapters are what shows before scrolling.
        lines.append(f"  {chapter} -> {stage} [style=dashed, arrowhead=none];")
        lines.append(f"  {{ rank=same; {chapter}; {stage}; }}")
        below = chapter
    lines.append("}")
    return "\n".join(lines)


class StagesDiagram(SphinxDirective):
    """``{accinte-stages}``: the stages layered on the emulator."""

    has_content = False

    def run(self):
        srcdir = Path(self.env.srcdir)
        items = chapters(srcdir)
        for _, _, readme in items:
            self.env.note_dependency(str(readme))
        _drawing_docs(self.env).add(self.env.docname)
        node = graphviz()
        node["code"] = stages_dot(items)
        node["options"] = {"docname": self.env.current_document.docname}
        node["alt"] = (
            "The chapters stacked on the emulator, each on the one before it, "
            "and beside each chapter the stage directory it builds: "
            + "; ".join(f"chapter {number}, {title}" for number, title, _ in items)
        )
        return [figure_wrapper(self, node, "The stages. An arrow points to what a "
                               "chapter is built on; stage NN is the emulator and "
                               "chapters 01 to NN, and no chapter edits one below it.")]


def _drawing_docs(env) -> set:
    """Names of the pages that draw the stages."""
    if not hasattr(env, "accinte_stage_docs"):
        env.accinte_stage_docs = set()
    return env.accinte_stage_docs


def _outdated(app, env, added, changed, removed):
    """The pages that draw the stages, if a chapter came or went."""
    current = [number for number, _, _ in chapters(Path(env.srcdir))]
    if getattr(env, "accinte_chapter_list", None) == current:
        return []
    env.accinte_chapter_list = current
    return sorted(_drawing_docs(env))


def _purge(app, env, docname):
    _drawing_docs(env).discard(docname)


def _merge(app, env, docnames, other):
    _drawing_docs(env).update(_drawing_docs(other) & set(docnames))


def _check_diagrams(app: Sphinx, doctree: nodes.document) -> None:
    """Every diagram of a page: a figure with a caption, alt text, one style."""
    for node in doctree.findall(graphviz):
        figure = node.parent
        if not isinstance(figure, nodes.figure) or not any(
                isinstance(child, nodes.caption) for child in figure.children):
            logger.warning("diagram without a :caption:", location=node)
        if not node.get("alt"):
            logger.warning("diagram without an :alt: text", location=node)
        for problem in diagram_problems(node["code"]):
            logger.warning("diagram %s", problem, location=node)


_SVG_SIZE = re.compile(r'<svg[^>]*?\bwidth="([\d.]+)pt"[^>]*?\bheight="([\d.]+)pt"', re.S)


def html_visit_graphviz(self, node: graphviz) -> None:
    """A diagram as an ``<object>`` at its natural size that shrinks to
    MIN_SCALE at most, in a box that scrolls sideways below that; the
    caption gets a link to the SVG (see the module's docstring)."""
    try:
        relfn, outfn = render_dot(self, node["code"], node["options"], "svg")
    except GraphvizError as exc:
        logger.warning("dot code %r: %s", node["code"], exc, location=node)
        raise nodes.SkipNode from exc
    if relfn is None:
        raise nodes.SkipNode
    src = html.escape(Path(relfn).as_posix())
    alt = html.escape(node.get("alt", ""), quote=True)
    style = ""
    match = _SVG_SIZE.search(Path(outfn).read_text(encoding="utf-8")[:2000])
    if match:
        # NB: Graphviz sizes its SVG in points, 4/3 of a CSS pixel each.
        width = float(match.group(1)) * 4 / 3
        style = f' style="width: {width:.0f}px; min-width: {width * MIN_SCALE:.0f}px"'
    classes = " ".join(["graphviz", *node.get("classes", [])])
    self.body.append(
        '<div class="graphviz accinte-diagram">'
        f'<object data="{src}" type="image/svg+xml" class="{classes}" role="img" '
        f'aria-label="{alt}"{style}><p class="warning">{alt}</p></object></div>\n'
    )
    figure = node.parent
    caption = next((c for c in figure.children if isinstance(c, nodes.caption)), None) \
        if isinstance(figure, nodes.figure) else None
    if caption is not None and not caption.get("accinte_svg_link"):
        caption["accinte_svg_link"] = True
        caption += nodes.Text(" ")
        caption += nodes.reference("", "Full-size diagram (SVG)", refuri=Path(relfn).as_posix(),
                                   classes=["accinte-diagram-full"])
    raise nodes.SkipNode


def setup(app: Sphinx) -> dict:
    app.setup_extension("sphinx.ext.graphviz")
    app.add_node(graphviz, override=True, html=(html_visit_graphviz, None))
    app.connect("doctree-read", _check_diagrams)
    app.add_directive("accinte-stages", StagesDiagram)
    app.connect("env-get-outdated", _outdated)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
