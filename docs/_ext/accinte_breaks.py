"""Where inline code may break across lines: between its parts, never inside one.

Docutils renders inline code unbreakable (each word in a ``span.pre`` that
does not wrap), so a long path or qualified name in a narrow table column,
on a phone, either widens the table or, with CSS that lets it wrap
anywhere, breaks in the middle of a word: ``accinteMal`` on one line,
``loc`` on the next. This HTML post-transform gives every long word of
inline code break opportunities (``<wbr>``, which copies as nothing) where
a reader expects a name to break: after ``/``, ``.``, ``::``, ``_`` and
``,``, before ``(``, and between a lower-case letter and an upper-case one
(``accinteMalloc`` may break as ``accinte`` / ``Malloc``). The browser
takes one only where the line is full; docs/_static/accinte.css lets inline
code in table cells wrap at them and nowhere else.

Declarations rendered by Breathe and autodoc (``desc_signature``) are left
as they are.
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform

#: Words of inline code shorter than this never need a break.
MIN_LENGTH = 12
#: The positions of a word where a break is allowed (zero-width matches).
_BREAK = re.compile(r"(?<=[/.,_])(?=[^/.,_])|(?<=::)(?=[^:])|(?=\()|(?<=[a-z])(?=[A-Z])")


def break_points(word: str) -> list:
    """``word`` cut at its break opportunities (no piece is empty)."""
    if len(word) < MIN_LENGTH:
        return [word]
    pieces, start = [], 0
    for match in _BREAK.finditer(word):
        if 0 < match.start() < len(word) and match.start() > start:
            pieces.append(word[start:match.start()])
            start = match.start()
    pieces.append(word[start:])
    return pieces


class InlineCodeBreaks(SphinxPostTransform):
    """Puts ``<wbr>`` between the parts of every long word of inline code."""

    default_priority = 900
    formats = ("html",)

    def run(self, **kwargs) -> None:
        for literal in list(self.document.findall(nodes.literal)):
            if any(isinstance(a, addnodes.desc_signature) for a in _ancestors(literal)):
                continue
            if len(literal.children) != 1 or not isinstance(literal[0], nodes.Text):
                continue
            text = literal.astext()
            children = []
            for token in re.split(r"(\s+)", text):
                for index, piece in enumerate(break_points(token) if token.strip() else [token]):
                    if index:
                        children.append(nodes.raw("", "<wbr>", format="html"))
                    children.append(nodes.Text(piece))
            if len(children) > 1:
                literal.children = []
                literal.extend(children)


def _ancestors(node: nodes.Node):
    while node.parent is not None:
        node = node.parent
        yield node


def setup(app: Sphinx) -> dict:
    app.add_post_transform(InlineCodeBreaks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
