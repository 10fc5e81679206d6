"""Diagrams the guide draws from the repository itself.

``{accinte-stages}`` draws the stages layered on the emulator, as Graphviz
(``sphinx.ext.graphviz``) renders it at build time. The chapters and their
titles are read from ``chapters/NN_name/README.md`` when the guide is built,
so a new chapter appears in the picture without anyone editing it (an
incremental build re-reads the pages that draw it when the chapter list
changes).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Tuple

from sphinx.application import Sphinx
from sphinx.ext.graphviz import graphviz
from sphinx.util.docutils import SphinxDirective

_FONT = 'fontname="Helvetica,Arial,sans-serif", fontsize=11'


def chapters(srcdir: Path) -> List[Tuple[str, str, Path]]:
    """(number, title, README path) of every chapter, in order."""
    result = []
    for readme in sorted(srcdir.glob("chapters/[0-9][0-9]_*/README.md")):
        number = readme.parent.name[:2]
        title = readme.parent.name[3:].replace("_", " ")
        for line in readme.read_text(encoding="utf-8").splitlines():
            if line.startswith("# "):
                # "# Chapter 02 — every operator runs" -> "every operator runs"
                title = re.sub(r"^Chapter \d+\s*[—-]\s*", "", line[2:].strip())
                title = title.replace("`", "")
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
        f"  node [shape=box, style=\"rounded,filled\", fillcolor=\"#eef3fb\", {_FONT}];",
        f"  edge [{_FONT}, color=\"#556070\"];",
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
        lines.append(f"  {stage} -> {chapter} [style=dashed, arrowhead=none];")
        lines.append(f"  {{ rank=same; {chapter}; {stage}; }}")
        below = chapter
    lines.append(
        '  label="An arrow points to what a chapter is built on. Stage NN is the'
        ' emulator and chapters 01 to NN:\\nits own chapter and everything'
        ' below it; no chapter edits one below it.";'
    )
    lines.append(f"  graph [labelloc=b, {_FONT}];")
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
        node["alt"] = "The chapters stacked on the emulator, one stage per chapter"
        node["align"] = "center"
        return [node]


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


def setup(app: Sphinx) -> dict:
    app.setup_extension("sphinx.ext.graphviz")
    app.add_directive("accinte-stages", StagesDiagram)
    app.connect("env-get-outdated", _outdated)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
