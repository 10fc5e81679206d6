#!/usr/bin/env python3
"""Runs every chapter's output scripts and stores what they print.

The guide never shows typed output: each ``chapters/NN_name/output/X.py`` is
run against stage NN (``build/stageNN/python``) and its standard output is
written to ``X.txt`` beside it, which the chapter's page includes. A script
of a page that is not a chapter's, ``docs/output/X.py``, names its stage in
a line of its own, ``# stage: NN``. With ``--check`` nothing is written; the
run fails if a stored output differs from a fresh one, so the pages cannot
drift from the code.

Each chapter's ``output/test_run.txt`` is generated too, without a script:
it is what its "Build and test" section's command prints when the
chapter's own tests run against its stage, exactly as ``make test-stages``
runs them, abridged to the command and pytest's summary line without its
duration, which changes from run to run. ``--test-logs DIR`` takes that run
from the logs ``make test-stages`` keeps instead of running the tests a
second time (``make test`` does so).

A rendered output block is about 86 characters wide on a 1280 px screen and
a line longer than that would hide its end behind a scroll bar, so lines
longer than WIDTH are wrapped here: each piece but the last ends with
MARKER, and the pieces after the first are indented two spaces more than
the line. An output that holds a Markdown table (a ``| --- |`` delimiter
row) is Markdown that a page renders with ``{include}``, not a text block,
and is kept whole; so is an SVG picture, which a page embeds as HTML.
"""

import argparse
import difflib
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import hermetic_python

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: Longest line of a stored output, marker included.
WIDTH = 80
#: Ends every piece of a wrapped line but the last.
MARKER = " \u21a9"  # " ↩"

#: The delimiter row of a Markdown table: the output is Markdown.
_TABLE_DELIMITER = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+\s*$", re.MULTILINE)

_STAGE_LINE = re.compile(r"^# stage: (\d\d)\s*$", re.MULTILINE)


def stage_of(script: pathlib.Path) -> str:
    """The stage a script runs against: its chapter's, or its ``# stage:``."""
    chapter = script.parent.parent.name
    if script.parent.name == "output" and re.match(r"^\d\d_", chapter) \
            and script.parent.parent.parent.name == "chapters":
        return chapter[:2]
    match = _STAGE_LINE.search(script.read_text())
    if match is None:
        sys.exit(f"{script}: no '# stage: NN' line says which stage runs it")
    return match.group(1)


def wrap_line(line: str) -> list:
    """``line`` as pieces of at most WIDTH characters, MARKER on all but the last."""
    if len(line) <= WIDTH:
        return [line]
    indent = line[: len(line) - len(line.lstrip())]
    pieces = textwrap.wrap(
        line.strip(), width=WIDTH - len(MARKER) - len(indent) - 2,
        initial_indent="", subsequent_indent="", break_on_hyphens=False,
        break_long_words=True, drop_whitespace=True,
    )
    return [indent + ("  " if i else "") + piece + (MARKER if i < len(pieces) - 1 else "")
            for i, piece in enumerate(pieces)]


def wrap(text: str) -> str:
    """``text`` with every line longer than WIDTH wrapped (see the docstring)."""
    if _TABLE_DELIMITER.search(text) or text.lstrip().startswith("<svg"):
        return text
    lines = []
    for line in text.splitlines():
        lines.extend(wrap_line(line))
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def script_run(script: pathlib.Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """One run of an output script against its stage, as the pages show it."""
    stage = stage_of(script)
    stage_python = ROOT / "build" / f"stage{stage}" / "python"
    if not stage_python.is_dir():
        sys.exit(f"{script}: stage {stage} is not built (run `make build`)")
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(stage_python),
        ACCINTE_DEVICE_COUNT="2",
        ACCINTE_DEVICE_MEMORY="8G",
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )
    # NB: an installed torch_accinte must not stand in for the stage.
    return subprocess.run(
        [hermetic_python.python(), script.name], cwd=script.parent, env=env,
        capture_output=True, text=True, timeout=timeout,
    )


def run_script(script: pathlib.Path) -> str:
    result = script_run(script)
    if result.returncode != 0:
        sys.exit(f"{script} failed:\n{result.stderr}")
    return wrap(result.stdout)


#: pytest's closing line, whose duration (" in 1.23s (0:00:01)") is dropped.
_SUMMARY = re.compile(r"^(?P<counts>\d+ passed.*?) in [\d.]+s( \([\d:]+\))?$")


def run_chapter_tests(chapter: pathlib.Path, logs: pathlib.Path | None = None) -> str:
    """What the chapter's own tests print against its stage, abridged.

    With ``logs``, the tests are not run again: ``make test-stages`` ran
    exactly this command and kept its standard output in ``logs/NN.txt``
    (and its exit status in ``logs/NN.status``).
    """
    stage = chapter.name[:2]
    tests = sorted(ROOT.glob(f"tests/ch{stage}_*"))
    stage_python = f"build/stage{stage}/python"
    command = ["-m", "pytest", "-q", *[str(t.relative_to(ROOT)) for t in tests]]
    if logs is None:
        env = dict(os.environ, PYTHONPATH=str(ROOT / stage_python))
        result = subprocess.run([sys.executable, *command], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=900)
        stdout, stderr, returncode = result.stdout, result.stderr, result.returncode
    else:
        log, status = logs / f"{stage}.txt", logs / f"{stage}.status"
        if not (log.exists() and status.exists()):
            sys.exit(f"{log} or its .status is missing: --test-logs needs a "
                     "complete `make test-stages` run")
        stdout, stderr = log.read_text(), f"(from {log})\n"
        returncode = int(status.read_text())
    lines = stdout.strip().splitlines()
    summary = _SUMMARY.match(lines[-1]) if lines else None
    if returncode != 0 or summary is None:
        sys.exit(f"{chapter.name}'s tests failed against stage {stage}:\n"
                 f"{stdout}{stderr}")
    shown = " ".join(["python", *command])
    return wrap(f"$ PYTHONPATH={stage_python} {shown}\n...\n{summary['counts']}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="fail if a stored output is out of date")
    parser.add_argument("--test-logs", type=pathlib.Path, metavar="DIR",
                        help="take each chapter's test run from DIR/NN.txt, "
                        "written by `make test-stages`, instead of running it")
    args = parser.parse_args()
    logs = args.test_logs.resolve() if args.test_logs else None
    stale = 0
    scripts = sorted(ROOT.glob("chapters/[0-9][0-9]_*/output/*.py"))
    scripts += sorted(ROOT.glob("docs/output/*.py"))
    outputs = [(script.with_suffix(".txt"), run_script, script) for script in scripts]
    outputs += [(chapter / "output" / "test_run.txt",
                 lambda chapter: run_chapter_tests(chapter, logs), chapter)
                for chapter in sorted(ROOT.glob("chapters/[0-9][0-9]_*"))
                if chapter.is_dir()]
    for stored, generate, source in outputs:
        fresh = generate(source)
        if args.check:
            old = stored.read_text() if stored.exists() else ""
            if old != fresh:
                stale += 1
                print(f"{stored.relative_to(ROOT)} is out of date "
                      "(run `make outputs`):")
                sys.stdout.writelines(difflib.unified_diff(
                    old.splitlines(True), fresh.splitlines(True),
                    "stored", "fresh"))
        else:
            stored.parent.mkdir(exist_ok=True)
            stored.write_text(fresh)
            print(f"wrote {stored.relative_to(ROOT)}")
    if args.check:
        print(f"{len(outputs) - stale} passed, {stale} failed: example outputs")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
