"""Listings that say where they come from.

Every ``literalinclude`` of the guide gets, unless the page gives its own:

* a caption naming the included file relative to the repository root (the
  Sphinx source directory), linked to the file in the repository at the
  commit the guide was built from (``accinte_repository_url`` and
  ``accinte_repository_commit``, set by conf.py), at the lines shown when
  the listing is a tagged region, so a reader can open the real source; for
  a generated output (``output/X.txt``) the caption names and links the
  script that printed it and the stage it ran against, and for a chapter's
  test run (``output/test_run.txt``, which no script prints) its tests;
* ``:dedent:`` without a value, which strips the indentation common to all
  lines: a region cut from the middle of a function starts at column 0;
* for a generated output, the class ``accinte-output``, by which
  tools/browser_test.py finds the blocks none of whose lines may be cut;
* emphasis computed from the source, as ``:emphasize-lines:`` would do it,
  with no line number ever counted by hand (see tools/check_tags.py for the
  exact forms). A line of code that ends with a comment holding only the
  tag keyword and ``EMPHASIZE`` (``//`` in C and C++, ``#`` in Python) is
  emphasised and the comment is not shown; a comment line of its own with
  the keyword and ``EMPHASIZE NEXT`` (or ``EMPHASIZE NEXT 2``, ...)
  emphasises the line (or lines) after it and is not shown, for a line too
  long to carry a trailing comment within the 80 columns of clang-format,
  like clang-tidy's ``NOLINTNEXTLINE``. A page's own ``:emphasize-lines:``
  is kept;
* no tag lines of the regions nested in the one shown: a long function can
  be shown whole (folded) and in steps, each a region of its own inside it.

A listing with the option ``:fold: SUMMARY`` is folded: the page shows
SUMMARY and the listing's number of lines on one line (an HTML
``<details>`` element, class ``accinte-fold``), which the reader opens with
a click. A page folds what a reader may skip (the rest of a table whose
first rows it shows, helpers, a whole class whose steps it showed one by
one); tools/browser_test.py fails a page on an unfolded listing longer
than its MAX_LISTING_LINES.

Doing this once here keeps the pages' include blocks short and uniform, and
tools/check_tags.py keeps parsing them unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.directives.code import LiteralInclude

#: ``chapters/NN_name/output/X.txt``: a generated output of stage NN.
_OUTPUT_RE = re.compile(r"^chapters/(?P<stage>\d\d)_[^/]+/output/[^/]+\.txt$")
#: A script of ``docs/output/`` names its stage (see tools/generate_outputs.py).
_STAGE_LINE = re.compile(r"^# stage: (\d\d)\s*$", re.MULTILINE)


#: The keyword of the tags, assembled so that this file holds no tag line.
_KEYWORD = "LITERAL" + "INCLUDE"
#: A trailing emphasis marker, with the blanks before it.
_EMPHASIS_RE = re.compile(r"\s*(?://|#)\s*" + _KEYWORD + r" EMPHASIZE\s*$")
#: A comment line that emphasises the next line, or the next N lines.
_EMPHASIS_NEXT_RE = re.compile(
    r"^\s*(?://|#)\s*" + _KEYWORD + r" EMPHASIZE NEXT(?: (?P<count>[1-9][0-9]*))?\s*$"
)
#: The tag line of a region nested in the one shown.
_TAG_RE = re.compile(r"^\s*(?://|#)\s*" + _KEYWORD + r" (?:START|END): [A-Z0-9_]+\s*$")


def strip_emphasis(text: str):
    """``text`` without emphasis markers and nested tag lines; the 1-based
    numbers (in the text returned) of the lines the markers mark; and, for
    each line of ``text`` that is kept, its new number (a marker line of its
    own, or a tag line, is dropped)."""
    lines, marked, renumber = [], [], {}
    pending = 0
    for number, line in enumerate(text.split("\n"), start=1):
        next_marker = _EMPHASIS_NEXT_RE.match(line)
        if next_marker:
            pending = max(pending, int(next_marker["count"] or 1))
            continue
        if _TAG_RE.match(line):
            continue
        stripped = _EMPHASIS_RE.sub("", line)
        lines.append(stripped)
        renumber[number] = len(lines)
        if stripped != line or pending:
            marked.append(len(lines))
        pending = max(pending - 1, 0)
    return "\n".join(lines), marked, renumber


def _apply_emphasis(node: nodes.literal_block) -> None:
    """Strips the markers of a listing and emphasises the lines they mark."""
    text, marked, renumber = strip_emphasis(node.astext())
    if text == node.astext():
        return
    node.rawsource = text
    node.children = [nodes.Text(text)]
    args = node.setdefault("highlight_args", {})
    # A page's own :emphasize-lines: counts the marker lines; renumber it.
    given = [renumber[n] for n in args.get("hl_lines", []) if n in renumber]
    args["hl_lines"] = sorted(set(given) | set(marked))


def is_output(caption: str) -> bool:
    """Whether a caption made by caption_for is that of a generated output."""
    return caption.startswith("Output of ")


class Repository:
    """Links to files of the repository at one commit (GitHub's URL scheme)."""

    def __init__(self, url: str, commit: str) -> None:
        self.url, self.commit = url.rstrip("/"), commit

    def link(self, rel_path: str, text: str, lines=None, directory=False) -> str:
        """A Markdown link named ``text`` to ``rel_path``, at ``lines``
        (first, last) if given."""
        kind = "tree" if directory else "blob"
        target = f"{self.url}/{kind}/{self.commit}/{rel_path}"
        if lines:
            target += f"#L{lines[0]}-L{lines[1]}"
        return f"[{text}]({target})"


def region_lines(path: Path, start_after: str, end_before: str):
    """The 1-based first and last line numbers of what a ``literalinclude``
    with ``start-after`` and ``end-before`` shows of ``path``, found as
    Sphinx finds them (the first line holding each marker); None if either
    marker is missing or the region is empty."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next((i for i, line in enumerate(lines) if start_after in line), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if end_before in lines[i]), None)
    if end is None or end <= start + 1:
        return None
    return start + 2, end


def caption_for(rel_path: str, srcdir: Path, repository: Repository, lines=None) -> str:
    """The caption (MyST Markdown) of a listing of ``rel_path``, showing
    ``lines`` (first, last) of it if given."""
    path = PurePosixPath(rel_path)
    script = path.with_suffix(".py")
    match = _OUTPUT_RE.match(path.as_posix())
    if match and path.name == "test_run.txt":
        tests = sorted((srcdir / "tests").glob(f"ch{match['stage']}_*"))
        if tests:
            names = ", ".join(
                repository.link(t.relative_to(srcdir).as_posix(),
                                f"`{t.relative_to(srcdir).as_posix()}/`", directory=True)
                for t in tests)
            return f"Output of the tests of {names}, run against stage {match['stage']}"
    if match:
        return (f"Output of {repository.link(script.as_posix(), f'`{script}`')}, "
                f"run against stage {match['stage']}")
    if path.parent.name == "output" and path.suffix == ".txt":
        source = srcdir / script
        stage = _STAGE_LINE.search(source.read_text()) if source.is_file() else None
        if stage:
            return (f"Output of {repository.link(script.as_posix(), f'`{script}`')}, "
                    f"run against stage {stage.group(1)}")
    # NB: GitHub shows a Markdown file rendered, where a line has no anchor.
    shown = lines if path.suffix != ".md" else None
    return repository.link(path.as_posix(), f"`{path.as_posix()}`", shown)


class fold(nodes.General, nodes.Element):
    """A folded listing: ``summary`` shown, the children behind a click."""


def _visit_fold_html(translator, node: fold) -> None:
    summary = translator.encode(node["summary"])
    translator.body.append(
        f'<details class="accinte-fold"><summary>{summary}</summary>\n')


def _depart_fold_html(translator, node: fold) -> None:
    translator.body.append("</details>\n")


def _visit_fold_other(translator, node: fold) -> None:
    """Other builders show a folded listing unfolded."""


def _lines_of(result) -> int:
    return sum(len(block.astext().rstrip("\n").split("\n"))
               for node in result for block in node.findall(nodes.literal_block))


class CaptionedLiteralInclude(LiteralInclude):
    """``literalinclude`` with a default caption and ``:dedent:``, and the
    option ``:fold: SUMMARY``."""

    option_spec = {**LiteralInclude.option_spec, "fold": directives.unchanged_required}

    def run(self):
        summary = self.options.pop("fold", None)
        result = self._run()
        if summary is None:
            return result
        folded = fold(summary=f"{summary.strip()} ({_lines_of(result)} lines)")
        folded.extend(result)
        return [folded]

    def _run(self):
        if self.arguments and "caption" not in self.options:
            rel_filename, filename = self.env.relfn2path(self.arguments[0])
            config = self.env.config
            repository = Repository(config.accinte_repository_url,
                                    config.accinte_repository_commit)
            lines = None
            if "start-after" in self.options and "end-before" in self.options:
                lines = region_lines(Path(filename), self.options["start-after"],
                                     self.options["end-before"])
            self.options["caption"] = caption_for(rel_filename, Path(self.env.srcdir),
                                                  repository, lines)
            if is_output(self.options["caption"]):
                self.options["class"] = self.options.get("class", []) + ["accinte-output"]
        # NB: None means "remove the common indentation" (textwrap.dedent).
        self.options.setdefault("dedent", None)
        result = super().run()
        for node in result:
            for block in node.findall(nodes.literal_block):
                _apply_emphasis(block)
        return result


def setup(app: Sphinx) -> dict:
    # NB: "env": a new URL or commit rereads every page, whose captions hold them.
    app.add_config_value("accinte_repository_url", "", "env")
    app.add_config_value("accinte_repository_commit", "main", "env")
    app.add_directive("literalinclude", CaptionedLiteralInclude, override=True)
    other = (_visit_fold_other, _visit_fold_other)
    app.add_node(fold, html=(_visit_fold_html, _depart_fold_html),
                 latex=other, text=other, man=other, texinfo=other)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
