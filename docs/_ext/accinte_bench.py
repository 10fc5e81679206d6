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

A name the snapshot lacks, or a value it does not have, is a build error.
The path is relative to the page, as a ``literalinclude``'s is; the page
must be MyST Markdown, since the table is parsed as Markdown. Both render
with ``benchmarks/bench_report.py``, which also writes ``results.md``, so
the page and ``make bench`` show the same table; ``make docs-check`` runs
that module's self-test.
"""

from __future__ import annotations

import json
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

import bench_report


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


def _snapshot_value_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{bench-time}`benchmark name```: see the module's docstring."""
    env = inliner.document.settings.env
    path = Path(env.srcdir) / env.config.accinte_bench_snapshot
    env.note_dependency(str(path))
    field, render = _VALUE_ROLES[name]
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
        bench_report.validate(results)
        item = next((item for item in results["benchmarks"] if item["name"] == text), None)
        if item is None:
            raise ValueError(f"no benchmark named {text!r}")
        if item[field] is None:
            raise ValueError(f"benchmark {text!r} has no {field}")
    except (OSError, ValueError) as error:
        message = inliner.reporter.error(
            f"{{{name}}}: {env.config.accinte_bench_snapshot}: {error}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    return [nodes.Text(render(item, item[field]))], []


def setup(app: Sphinx) -> dict:
    app.add_directive("accinte-bench-table", BenchTable)
    app.add_directive("accinte-bench-chart", BenchChart)
    app.add_config_value("accinte_bench_snapshot", "docs/output/bench_results.json", "env")
    for role in _VALUE_ROLES:
        app.add_role(role, _snapshot_value_role)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
