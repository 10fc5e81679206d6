"""The results of ``make bench``, rendered when the guide is built.

Benchmarks cannot run during a docs build (too slow, and too noisy to
reproduce), so a page names a committed results file, a copy of
``build/bench/results.json`` that ``make bench-snapshot`` makes:

``{accinte-bench-table} output/bench_results.json``
    what was measured, where and how busy the machine was (in a note when it
    was too busy for the numbers to be more than preliminary), then the
    results as a table, without the goal columns when no benchmark shown
    has a goal, what its columns hold, and the operators behind the
    workloads' CPU fallback calls;
``{accinte-bench-chart} output/bench_results.json``
    the ratios as an SVG bar chart, with each benchmark's goal.

and a number in prose, taken from the guide's snapshot
(``accinte_bench_snapshot``, ``docs/output/bench_results.json``) by the
benchmark's name, so that the sentence and the table cannot disagree:

``{bench-time}`name```
    the benchmark's time on accinte (``1.32 µs``), as the table prints it;
``{bench-cpu-time}`name```
    its time on the CPU;
``{bench-ratio}`name```
    its ratio against the CPU (``65×``, ``2.55×``).

A role may read another snapshot, named after ``@`` by a path relative to
the page: ``{bench-ratio}`name @ output/bench_before.json```. And a number
that prose states as written ("about 60 µs") but checks against a snapshot:

``{measured}`text <field: name>```
    ``text`` as written, checked against the benchmark's ``field`` (``time``,
    ``cpu-time``, ``ratio`` or ``bandwidth``);
``{as-written}`text```
    ``text`` as written: a number that is not the snapshot's (a goal, an
    earlier run's result, a setting).

``tools/check_numbers.py`` (``make docs-check``) checks these roles without
building the guide, says how close ``{measured}``'s text must be, and
requires one of them for a number with a unit on most pages.

A name the snapshot lacks, or a value it does not have, is a build error.
The path is relative to the page, as a ``literalinclude``'s is; the page
must be MyST Markdown, since the table is parsed as Markdown. Both render
with ``benchmarks/bench_report.py``, which also writes ``results.md``, so
the page and ``make bench`` show the same table; ``make docs-check`` runs
that module's self-test.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

import bench_report

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import check_numbers  # noqa: E402  (standard library and bench_report only)


class _ResultsDirective(SphinxDirective):
    """Reads the results file named by the directive's argument."""

    required_arguments = 1
    has_content = False

    def results(self) -> dict:
        """The file's results, validated; a directive error if it has none."""
        rel_path, path = self.env.relfn2path(self.arguments[0])
        # A new snapshot rebuilds the pages that show it.
        self.env.note_dependency(rel_path)
        try:
            results = json.loads(Path(path).read_text(encoding="utf-8"))
            bench_report.validate(results)
        except (OSError, ValueError) as error:  # NB: JSONDecodeError is a ValueError
            raise self.error(f"{rel_path}: {error}") from None
        return results


class BenchTable(_ResultsDirective):
    """``{accinte-bench-table}``: the run and its results table; with
    ``:rows:``, only the benchmarks whose names it lists (one per line)."""

    option_spec = {"rows": directives.unchanged_required}

    def run(self):
        results = self.results()
        if "rows" in self.options:
            wanted = [name.strip() for name in self.options["rows"].splitlines() if name.strip()]
            by_name = {item["name"]: item for item in results["benchmarks"]}
            missing = [name for name in wanted if name not in by_name]
            if missing:
                raise self.error(f"{self.arguments[0]} has no benchmark {missing[0]!r}")
            results = dict(results, benchmarks=[by_name[name] for name in wanted])
        run = bench_report.describe_run(results)
        if bench_report.is_preliminary(results):
            run = f":::{{note}}\n{run}\n:::"
        return self.parse_text_to_nodes(f"{run}\n\n{bench_report.markdown_table(results)}"
                                        f"\n{bench_report.legend(results)}\n\n"
                                        f"{bench_report.fallback_summary(results)}")


class BenchChart(_ResultsDirective):
    """``{accinte-bench-chart}``: the ratios as an inline SVG."""

    def run(self):
        svg = bench_report.svg_chart(self.results())
        return [nodes.raw("", f'<div class="accinte-bench-chart">\n{svg}</div>\n',
                          format="html")]


#: Each role's field of a benchmark and how it is printed.
_VALUE_ROLES = {
    "bench-time": ("accinte_seconds", lambda item, value: bench_report.format_seconds(value)),
    "bench-cpu-time": ("cpu_seconds", lambda item, value: bench_report.format_seconds(value)),
    "bench-ratio": ("ratio", lambda item, value: bench_report.format_ratio(item["measure"], value)),
}


def _role_error(name, rawtext, lineno, inliner, message):
    error = inliner.reporter.error(f"{{{name}}}: {message}", line=lineno)
    return [inliner.problematic(rawtext, rawtext, error)], [error]


def _benchmark(inliner, target):
    """The benchmark a role's ``name`` or ``name @ path`` names (ValueError if
    none), from the snapshot that the path, or conf.py, names."""
    env = inliner.document.settings.env
    page_dir = Path(env.doc2path(env.docname)).parent
    name, path = check_numbers.split_target(target, page_dir, Path(env.srcdir))
    if " @ " not in target:
        path = Path(env.srcdir) / env.config.accinte_bench_snapshot
    # A new snapshot rebuilds the pages that quote it.
    env.note_dependency(str(path))
    return name, check_numbers.Snapshots().benchmark(path, name)


def _snapshot_value_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{bench-time}`benchmark name```: see the module's docstring."""
    field, render = _VALUE_ROLES[name]
    try:
        benchmark, item = _benchmark(inliner, text)
        if item[field] is None:
            raise ValueError(f"benchmark {benchmark!r} has no {field}")
    except ValueError as error:
        return _role_error(name, rawtext, lineno, inliner, error)
    return [nodes.Text(render(item, item[field]))], []


def _measured_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{measured}`text <field: name>```: see the module's docstring."""
    parts = check_numbers.MEASURED.match(text)
    try:
        if parts is None or parts["field"] not in check_numbers.FIELDS:
            raise ValueError(f"not `text <field: name>` with a field of "
                             f"{', '.join(check_numbers.FIELDS)}: {text!r}")
        benchmark, item = _benchmark(inliner, parts["target"])
        value = check_numbers.FIELDS[parts["field"]](item)
        if value is None:
            raise ValueError(f"benchmark {benchmark!r} has no {parts['field']}")
        why = check_numbers.check_quantity(parts["text"], parts["field"], value)
        if why:
            raise ValueError(f"{why} ({benchmark!r})")
    except ValueError as error:
        return _role_error(name, rawtext, lineno, inliner, error)
    return [nodes.Text(" ".join(parts["text"].split()))], []


def _as_written_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{as-written}`text```: the text, as written."""
    return [nodes.Text(" ".join(text.split()))], []


def setup(app: Sphinx) -> dict:
    app.add_directive("accinte-bench-table", BenchTable)
    app.add_directive("accinte-bench-chart", BenchChart)
    app.add_config_value("accinte_bench_snapshot", "docs/output/bench_results.json", "env")
    for role in _VALUE_ROLES:
        app.add_role(role, _snapshot_value_role)
    app.add_role("measured", _measured_role)
    app.add_role("as-written", _as_written_role)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
