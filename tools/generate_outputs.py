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

A rendered output block holds WIDTH characters on a 1280 px screen (what
``make docs-browser-test`` measures), and a line longer than that would hide
its end behind a scroll bar, so such a line is wrapped here, by these rules
(:func:`wrap`; ``--self-test`` checks them):

* only at a run of blanks, which the wrap replaces: each piece but the last
  ends with MARKER, the pieces after the first are indented two spaces more
  than the line, and joining the pieces with one blank (:func:`unwrap`)
  gives the line back, up to the length of the runs the wraps replaced.
  A word is never cut, so an identifier or a path copies whole; a line with
  no blank where it would have to break keeps its end past WIDTH;
* never in a line of input: a ``>>>`` or ``...`` line of an interactive
  session, or a ``$`` command. A script prints its input as it would be
  typed, broken with ``...`` or ``\\`` continuation lines where it is
  long; an input line longer than WIDTH is an error;
* never in a table: a run of two or more lines each of which is a rule
  (``-----``) or has columns (two gaps of two blanks or more). Its rows are
  kept whole, and the page lets the block scroll sideways
  (``docs/_static/accinte.css``) rather than break every row in two.

An output that holds a Markdown table (a ``| --- |`` delimiter row) is
Markdown that a page renders with ``{include}``, not a text block, and is
kept whole; so is an SVG picture, which a page embeds as HTML.
"""

import argparse
import difflib
import os
import pathlib
import re
import subprocess
import sys

import hermetic_python

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: Longest line of a stored output, marker included: what a rendered output
#: block holds on a 1280 px screen (tools/browser_test.py fails on a line
#: that is cut there, outside a table).
WIDTH = 90
#: Ends every piece of a wrapped line but the last.
MARKER = " \u21a9"  # " ↩"

#: The delimiter row of a Markdown table: the output is Markdown.
_TABLE_DELIMITER = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+\s*$", re.MULTILINE)

_STAGE_LINE = re.compile(r"^# stage: (\d\d)\s*$", re.MULTILINE)

#: A line of input: an interactive session's prompt or a shell's.
_INPUT_LINE = re.compile(r"^\s*(>>>|\.\.\.|\$)( |$)")
#: A table's rule: dashes or equals signs, maybe with "+" or "|" crossings.
_RULE_LINE = re.compile(r"^\s*[-=+| ]*[-=]{10,}[-=+| ]*$")
#: A gap between two columns of a table: two blanks or more inside a line.
_COLUMN_GAP = re.compile(r"\S {2,}(?=\S)")


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


def is_input(line: str) -> bool:
    """Whether ``line`` is typed input: ``>>>``, ``...`` or ``$``."""
    return bool(_INPUT_LINE.match(line))


def table_lines(lines: list) -> set:
    """The indices of ``lines`` that belong to a table (see the docstring)."""
    def tabular(line: str) -> bool:
        return bool(_RULE_LINE.match(line)) or len(_COLUMN_GAP.findall(line)) >= 2

    found, run = set(), []
    for index, line in enumerate(lines + [""]):
        if line.strip() and tabular(line):
            run.append(index)
            continue
        if len(run) >= 2:
            found.update(run)
        run = []
    return found


def wrap_line(line: str) -> list:
    """``line`` as pieces of at most WIDTH characters where blanks allow,
    MARKER on all but the last (see the docstring)."""
    if len(line) <= WIDTH:
        return [line]
    indent = line[: len(line) - len(line.lstrip())]
    # Words and the runs of blanks between them, kept as they are: a wrap
    # replaces one run, and every other stays in its piece.
    tokens = re.findall(r"\s+|\S+", line[len(indent):].rstrip())
    pieces, current = [], ""
    for token in tokens:
        if token.isspace():
            current += token
            continue
        prefix = indent + ("  " if pieces else "")
        # Every piece but the last carries MARKER, so it must fit too.
        if current.strip() and len(prefix + current + token + MARKER) > WIDTH:
            pieces.append(prefix + current.rstrip())
            current = ""
        current += token
    pieces.append(indent + ("  " if pieces else "") + current)
    return [piece + MARKER for piece in pieces[:-1]] + pieces[-1:]


def wrap(text: str) -> str:
    """``text`` with its long lines wrapped by the rules of the docstring.

    Raises ValueError for a line of input longer than WIDTH.
    """
    if _TABLE_DELIMITER.search(text) or text.lstrip().startswith("<svg"):
        return text
    source = text.splitlines()
    tables = table_lines(source)
    lines = []
    for index, line in enumerate(source):
        if is_input(line):
            if len(line) > WIDTH:
                raise ValueError(
                    f"an input line is longer than {WIDTH} characters; print it as "
                    f"it would be typed, with '...' or '\\\\' continuation lines:\n{line}")
            lines.append(line)
        elif index in tables:
            lines.append(line)
        else:
            lines.extend(wrap_line(line))
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def unwrap(text: str) -> str:
    """``text`` with every wrapped line joined again: the inverse of wrap()."""
    lines = []
    joining = False
    for line in text.splitlines():
        if joining:
            lines[-1] += " " + line.lstrip()
        else:
            lines.append(line)
        joining = lines[-1].endswith(MARKER)
        if joining:
            lines[-1] = lines[-1][: -len(MARKER)]
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
    try:
        return wrap(result.stdout)
    except ValueError as error:
        sys.exit(f"{script}: {error}")


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


def self_test() -> int:
    """Checks the wrapping rules of the docstring; 0 if they hold."""
    failures = 0

    def check(description: str, condition: bool) -> None:
        nonlocal failures
        if not condition:
            failures += 1
            print(f"FAIL: {description}")

    identifier = "torch._C.DispatchKey.AutocastPrivateUse1"
    prose = ("RuntimeError: a message long enough to need two pieces, which "
             "names " + identifier + " near its end, and goes on a little")
    pieces = wrap(prose).splitlines()
    check("a long line is wrapped", len(pieces) > 1)
    check("every piece fits", all(len(p) <= WIDTH for p in pieces))
    check("every piece but the last ends with the marker",
          all(p.endswith(MARKER) for p in pieces[:-1]) and not pieces[-1].endswith(MARKER))
    check("continuations are indented by two", all(p.startswith("  ") for p in pieces[1:]))
    check("unwrap gives the line back", unwrap(wrap(prose)) == prose)
    check("no word is cut", any(identifier in p for p in pieces))
    spaced = "a  b" + " word" * 30
    check("blanks inside a piece are kept", wrap(spaced).startswith("a  b word"))
    check("a word longer than a line is kept whole",
          wrap("x" * (WIDTH + 10)) == "x" * (WIDTH + 10))
    indented = "    " + "word " * 40
    check("an indented line's pieces keep its indentation",
          all(p.startswith("      ") for p in wrap(indented.rstrip()).splitlines()[1:]))
    check("a short input line is kept", wrap(">>> f(1)\n") == ">>> f(1)\n")
    for prompt in (">>> ", "... ", "$ "):
        try:
            wrap(prompt + "f(" + ", ".join(["argument"] * 12) + ")")
        except ValueError:
            pass
        else:
            check(f"a long {prompt.strip()!r} input line is refused", False)
    row = "Allocated memory" + " " * 25 + "    3.0 MiB" * 8
    table = "\n".join(["name" + " " * 20 + "current      peak", "-" * (WIDTH + 10), row, row])
    check("a table's rows are kept whole", wrap(table) == table)
    check("one line with columns alone is no table", table_lines([row, "plain text"]) == set())
    check("a Markdown table is kept whole",
          wrap("| a | b |\n| --- | --- |\n| " + "x " * 60 + "| y |\n")
          == "| a | b |\n| --- | --- |\n| " + "x " * 60 + "| y |\n")
    print(f"generate_outputs: {'ok' if not failures else f'{failures} failed'}: wrapping rules")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="fail if a stored output is out of date")
    parser.add_argument("--test-logs", type=pathlib.Path, metavar="DIR",
                        help="take each chapter's test run from DIR/NN.txt, "
                        "written by `make test-stages`, instead of running it")
    parser.add_argument("--self-test", action="store_true",
                        help="check the wrapping rules, and nothing else")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
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
