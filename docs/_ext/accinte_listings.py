"""Listings that say where they come from.

Every ``literalinclude`` of the guide gets, unless the page gives its own:

* a caption naming the included file relative to the repository root (the
  Sphinx source directory), so a reader can open the real source; for a
  generated output (``output/X.txt``) the caption names the script that
  printed it and the stage it ran against;
* ``:dedent:`` without a value, which strips the indentation common to all
  lines: a region cut from the middle of a function starts at column 0;
* for a generated output, the class ``accinte-output``, by which
  tools/browser_test.py finds the blocks none of whose lines may be cut.

Doing this once here keeps the pages' include blocks short and uniform, and
tools/check_tags.py keeps parsing them unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from sphinx.application import Sphinx
from sphinx.directives.code import LiteralInclude

#: ``chapters/NN_name/output/X.txt``: a generated output of stage NN.
_OUTPUT_RE = re.compile(r"^chapters/(?P<stage>\d\d)_[^/]+/output/[^/]+\.txt$")
#: A script of ``docs/output/`` names its stage (see tools/generate_outputs.py).
_STAGE_LINE = re.compile(r"^# stage: (\d\d)\s*$", re.MULTILINE)


def is_output(caption: str) -> bool:
    """Whether a caption made by caption_for is that of a generated output."""
    return caption.startswith("Output of ")


def caption_for(rel_path: str, srcdir: Path) -> str:
    """The caption (MyST Markdown) of a listing of ``rel_path``."""
    path = PurePosixPath(rel_path)
    script = path.with_suffix(".py")
    match = _OUTPUT_RE.match(path.as_posix())
    if match:
        return f"Output of `{script}`, run against stage {match['stage']}"
    if path.parent.name == "output" and path.suffix == ".txt":
        source = srcdir / script
        stage = _STAGE_LINE.search(source.read_text()) if source.is_file() else None
        if stage:
            return f"Output of `{script}`, run against stage {stage.group(1)}"
    return f"`{path.as_posix()}`"


class CaptionedLiteralInclude(LiteralInclude):
    """``literalinclude`` with a default caption and ``:dedent:``."""

    def run(self):
        if self.arguments and "caption" not in self.options:
            rel_filename, _ = self.env.relfn2path(self.arguments[0])
            self.options["caption"] = caption_for(rel_filename, Path(self.env.srcdir))
            if is_output(self.options["caption"]):
                self.options["class"] = self.options.get("class", []) + ["accinte-output"]
        # NB: None means "remove the common indentation" (textwrap.dedent).
        self.options.setdefault("dedent", None)
        return super().run()


def setup(app: Sphinx) -> dict:
    app.add_directive("literalinclude", CaptionedLiteralInclude, override=True)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
