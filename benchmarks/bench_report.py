#!/usr/bin/env python3
"""The results of ``make bench``: goals, the Markdown table, the SVG chart.

Standard library only. The driver (``benchmarks/bench.py``) builds its
results with these functions and writes ``build/bench/results.json`` and
``results.md``; the guide's extension (``docs/_ext/accinte_bench.py``)
renders the committed snapshot ``docs/output/bench_results.json`` with the
same functions when the guide is built, where no benchmark may run and
torch need not be installed.

A results file is one JSON object: the run (``stage``, ``chapters``,
``torch``, ``date``, ``cpu_count``, ``torch_threads``, ``other_load``,
``repeats``) and ``benchmarks``, one entry each (see :func:`entry`).
``other_load`` is how many CPUs other processes kept busy, on average,
while the benchmarks ran.

``python3 benchmarks/bench_report.py --self-test`` runs this module's own
tests; ``make docs-check`` runs them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import xml.etree.ElementTree as ElementTree
from typing import Dict, List, Optional
from xml.sax.saxutils import escape

SCHEMA = 1

# What a benchmark's ratio means, which decides how a goal is read.
#: accinte seconds / CPU seconds: lower is better, goals are "<=".
TIME = "time"
#: CPU seconds / accinte seconds for the same bytes, that is accinte's
#: bandwidth relative to a CPU ``copy_``: higher is better, goals are ">=".
BANDWIDTH = "bandwidth"
#: Seconds of accinte's own work (a build, a test run): no CPU side, no ratio.
DURATION = "duration"
MEASURES = (TIME, BANDWIDTH, DURATION)

#: The direction of a goal, by measure.
DIRECTION = {TIME: "<=", BANDWIDTH: ">="}

ENTRY_KEYS = ("name", "measure", "accinte_seconds", "cpu_seconds", "ratio",
              "goal", "held")
RUN_KEYS = ("schema", "stage", "chapters", "torch", "date", "cpu_count",
            "torch_threads", "other_load", "repeats", "benchmarks")
#: Above this ``other_load`` the machine was busy, and a run is preliminary:
#: on 2 cores, a tenth of a CPU taken by others already delays the second
#: thread of PyTorch's CPU kernels and the emulator's workers.
BUSY = 0.1


# -- Goals ---------------------------------------------------------------------

def goal(measure: str, value: float) -> Dict[str, object]:
    """A goal for a benchmark of ``measure``, in the direction that measure has."""
    return {"direction": DIRECTION[measure], "value": value}


def ratio_of(measure: str, accinte_seconds: Optional[float],
             cpu_seconds: Optional[float]) -> Optional[float]:
    """The ratio reported for ``measure``; None where there is none."""
    if measure == DURATION or accinte_seconds is None or cpu_seconds is None:
        return None
    if measure == TIME:
        return accinte_seconds / cpu_seconds
    return cpu_seconds / accinte_seconds


def is_held(ratio: Optional[float], the_goal: Optional[dict]) -> Optional[bool]:
    """Whether ``ratio`` meets ``the_goal``; None without a ratio or a goal."""
    if ratio is None or the_goal is None:
        return None
    if the_goal["direction"] == "<=":
        return ratio <= the_goal["value"]
    return ratio >= the_goal["value"]


def shortfall(ratio: float, the_goal: dict) -> float:
    """How many times faster accinte must get for ``the_goal`` to hold.

    One number for both directions, so that "2× too slow" means the same for
    a time goal and for a bandwidth goal.
    """
    if the_goal["direction"] == "<=":
        return ratio / the_goal["value"]
    return the_goal["value"] / ratio


def entry(name: str, measure: str, accinte_seconds: Optional[float],
          cpu_seconds: Optional[float] = None, the_goal: Optional[dict] = None,
          nbytes: Optional[int] = None, skipped: Optional[str] = None,
          baseline: Optional[str] = None,
          fallbacks: Optional[Dict[str, int]] = None,
          subject: Optional[str] = None) -> dict:
    """One benchmark's result, as the results file stores it.

    ``accinte_seconds`` and ``cpu_seconds`` are medians per call; ``ratio``
    and ``held`` follow from them and ``measure``. ``nbytes`` (copies) lets
    the table show bandwidth; ``skipped`` says why nothing was measured;
    ``baseline`` names what the second side ran when it was not the CPU (it
    is then in ``cpu_seconds``, and the table says so), and ``subject`` what
    the first side ran when it was not accinte (in ``accinte_seconds``: the
    CPU's own floor for a ratio, say); ``fallbacks`` counts,
    by operator, the calls of one accinte step that took the CPU fallback
    (a workload's; the table gives their number).
    """
    ratio = ratio_of(measure, accinte_seconds, cpu_seconds)
    result = {
        "name": name,
        "measure": measure,
        "accinte_seconds": accinte_seconds,
        "cpu_seconds": cpu_seconds,
        "ratio": ratio,
        "goal": the_goal,
        "held": is_held(ratio, the_goal),
    }
    if nbytes is not None:
        result["bytes"] = nbytes
    if skipped is not None:
        result["skipped"] = skipped
    if baseline is not None:
        result["baseline"] = baseline
    if subject is not None:
        result["subject"] = subject
    if fallbacks is not None:
        result["fallbacks"] = dict(fallbacks)
    return result


def validate(results: dict) -> None:
    """Raises ValueError, naming what is wrong, unless ``results`` has the shape
    that :func:`entry` and the driver write."""
    missing = [key for key in RUN_KEYS if key not in results]
    if missing:
        raise ValueError(f"results lack {', '.join(missing)}")
    if results["schema"] != SCHEMA:
        raise ValueError(f"results have schema {results['schema']}, expected {SCHEMA}")
    for item in results["benchmarks"]:
        missing = [key for key in ENTRY_KEYS if key not in item]
        if missing:
            raise ValueError(f"{item.get('name', 'a benchmark')} lacks {', '.join(missing)}")
        if item["measure"] not in MEASURES:
            raise ValueError(f"{item['name']}: unknown measure {item['measure']!r}")
        fallbacks = item.get("fallbacks", {})
        if not (isinstance(fallbacks, dict) and all(
                isinstance(op, str) and isinstance(calls, int) and calls >= 0
                for op, calls in fallbacks.items())):
            raise ValueError(f"{item['name']}: fallbacks must map operators to "
                             f"numbers of calls, not {fallbacks!r}")
        expected = is_held(item["ratio"], item["goal"])
        if item["held"] != expected:
            raise ValueError(f"{item['name']}: held is {item['held']}, "
                             f"its ratio and goal say {expected}")


# -- Text ------------------------------------------------------------------------

def format_seconds(seconds: float) -> str:
    """``seconds`` to three significant digits, in a unit that suits it."""
    if seconds >= 120:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes} min {rest} s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            break
    value = seconds / scale
    digits = 0 if value >= 100 else 1 if value >= 10 else 2
    return f"{value:.{digits}f} {unit}"


def format_ratio(measure: str, ratio: float) -> str:
    """``ratio`` as the table and the chart print it: ``83×``, ``1.23×``, ``0.62``."""
    if measure == BANDWIDTH:
        return f"{ratio:.2f}"
    return f"{ratio:.0f}×" if ratio >= 10 else f"{ratio:.2f}×"


def format_shortfall(factor: float) -> str:
    """A missed goal's :func:`shortfall`: ``37%`` below twice, ``2.3×`` from there,
    so that a near miss does not read ``1.00×``."""
    if factor >= 2:
        return format_ratio(TIME, factor)
    percent = (factor - 1) * 100
    return f"{percent:.0f}%" if percent >= 10 else f"{percent:.2g}%"


def format_goal_value(value: float) -> str:
    """A goal's bound with at most two decimals and no trailing zero: ``3``,
    ``1.15``, ``0.8``; a goal set as a fraction (``1 / 1.5``, "at least 1.5×
    faster") reads ``0.67``, not ``0.666667``."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def format_goal(measure: str, the_goal: dict) -> str:
    """``≤ 3×`` or ``≥ 0.8``, with a no-break space: a narrow table column
    must not split the sign from its value."""
    sign = "≤" if the_goal["direction"] == "<=" else "≥"
    value = format_goal_value(the_goal["value"])
    return f"{sign}\u00a0{value}×" if measure == TIME else f"{sign}\u00a0{value}"


def _timing(seconds: Optional[float], nbytes: Optional[int]) -> str:
    if seconds is None:
        return "—"
    if nbytes is None:
        return format_seconds(seconds)
    return f"{format_seconds(seconds)} ({nbytes / seconds / 1e9:.2f} GB/s)"


HEADER = ("benchmark", "accinte", "CPU", "ratio", "goal", "held")


def fallback_note(item: dict) -> str:
    """What the benchmark cell adds to the name of a step whose fallback
    calls were counted: ``, 27 fallback calls``; nothing otherwise."""
    if "fallbacks" not in item:
        return ""
    calls = sum(item["fallbacks"].values())
    return (", no fallback call" if calls == 0 else
            f", {calls} fallback call{'s' if calls > 1 else ''}")


def table_row(item: dict) -> List[str]:
    """The cells of ``item``'s row, in the order of HEADER."""
    measure, nbytes = item["measure"], item.get("bytes")
    if "skipped" in item:
        return [item["name"], f"not measured: {item['skipped']}", "—", "—",
                format_goal(measure, item["goal"]) if item["goal"] else "—", "—"]
    ratio = "—" if item["ratio"] is None else format_ratio(measure, item["ratio"])
    if item["held"] is None:
        held = "—"
    elif item["held"]:
        held = "yes"
    else:
        held = f"no: {format_shortfall(shortfall(item['ratio'], item['goal']))} too slow"
    return [
        item["name"] + fallback_note(item),
        _timing(item["accinte_seconds"], nbytes)
        + (f" ({item['subject']})" if "subject" in item else ""),
        _timing(item["cpu_seconds"], nbytes)
        + (f" ({item['baseline']})" if "baseline" in item else ""),
        ratio,
        format_goal(measure, item["goal"]) if item["goal"] else "—",
        held,
    ]


def _cell(text: str) -> str:
    # A "|" would end the cell early in Markdown.
    return text.replace("|", "\\|")


def columns(results: dict) -> List[str]:
    """The columns of HEADER that ``results`` fill: "goal" and "held" only
    when some benchmark has a goal."""
    if any(item["goal"] for item in results["benchmarks"]):
        return list(HEADER)
    return [name for name in HEADER if name not in ("goal", "held")]


def markdown_table(results: dict) -> str:
    """All benchmarks as one Markdown (GitHub and MyST) table."""
    shown = columns(results)
    lines = ["| " + " | ".join(shown) + " |",
             "| " + " | ".join("---" for _ in shown) + " |"]
    for item in results["benchmarks"]:
        cells = dict(zip(HEADER, table_row(item)))
        lines.append("| " + " | ".join(_cell(cells[name]) for name in shown) + " |")
    return "\n".join(lines) + "\n"


def legend(results: dict) -> str:
    """What each column of :func:`markdown_table` holds, one sentence."""
    measures = {item["measure"] for item in results["benchmarks"]}
    parts = ["*accinte* and *CPU* are the median time of one call on each side"
             + (" (for a copy, with the bandwidth it reaches)" if BANDWIDTH in measures else "")
             + ("; a row with no CPU side times accinte's own work"
                if DURATION in measures else "")
             + ("; where the CPU column names another baseline in parentheses, the "
                "second side ran that instead, and the ratio is to it"
                if any("baseline" in item for item in results["benchmarks"]) else "")
             + ("; where the accinte column names something else in parentheses, "
                "the first side ran that instead"
                if any("subject" in item for item in results["benchmarks"]) else "")]
    ratios = []
    if TIME in measures:
        ratios.append("accinte's time over the CPU's for a computation (lower is better)")
    if BANDWIDTH in measures:
        ratios.append("accinte's bandwidth over the CPU's `copy_` for a copy "
                      "(higher is better)")
    if ratios:
        parts.append("*ratio* is " + ", and ".join(ratios))
    if any("fallbacks" in item for item in results["benchmarks"]):
        parts.append("a number of *fallback calls* after a benchmark's name counts the "
                     "operator calls of one accinte step (one call of what is timed) that "
                     "took the CPU fallback, each a round trip through the host")
    if "goal" in columns(results):
        parts.append("*goal* is the ratio the benchmark must reach for the backend "
                     "to count as fast enough, and *held* whether this run reached it, "
                     "or how much faster accinte must get")
    return "Columns: " + "; ".join(parts) + "."


def fallback_summary(results: dict) -> str:
    """The operators behind the *fallback calls* of :func:`markdown_table`,
    one Markdown list item per counted benchmark that has any, the most
    calls first; an empty string when there is none."""
    lines = []
    for item in results["benchmarks"]:
        calls = item.get("fallbacks") or {}
        if not any(calls.values()):
            continue
        ranked = sorted(calls.items(), key=lambda op_calls: (-op_calls[1], op_calls[0]))
        listed = ", ".join(f"`{op}` {count}" for op, count in ranked if count)
        lines.append(f"- {item['name']}: {listed}")
    if not lines:
        return ""
    return "CPU fallback calls in one step, by operator:\n\n" + "\n".join(lines) + "\n"


def is_preliminary(results: dict) -> bool:
    """Whether other processes were busy enough to distort the run."""
    return results["other_load"] >= BUSY


def describe_run(results: dict) -> str:
    """What was measured, where, and how busy the machine was."""
    chapters = results["chapters"]
    scope = (f"the emulator and chapters {chapters[0][:2]} to {chapters[-1][:2]}"
             if len(chapters) > 1 else
             f"the emulator and chapter {chapters[0][:2]}" if chapters else "the emulator")
    text = (f"Measured on stage {results['stage']} ({scope}), torch {results['torch']}, "
            f"{results['cpu_count']} CPUs ({results['torch_threads']} torch threads), "
            f"{results['date']}; medians of {results['repeats']} alternating samples. "
            f"Other processes kept {results['other_load']:.2f} CPUs busy on average.")
    if is_preliminary(results):
        text += " The machine was busy: these numbers are preliminary."
    return text


# -- Chart -------------------------------------------------------------------------

WIDTH = 720
LABEL_WIDTH = 290
VALUE_WIDTH = 60
ROW = 22
BAR = 14
PANEL_TOP = 34
AXIS_HEIGHT = 30
LEGEND_HEIGHT = 34

#: Pixels kept free between a goal mark and a value's label.
GAP = 3
#: An upper bound of the width of a character of the chart's 12 px sans-serif
#: text, for a label's extent.
CHAR_WIDTH = 7.5


def text_width(text: str) -> float:
    """At least the width of ``text`` on the chart."""
    return CHAR_WIDTH * len(text)


#: Pixels between the lines of a label that takes more than one.
LINE = 14


def label_lines(text: str, width: float = LABEL_WIDTH - 8) -> List[str]:
    """``text`` broken at spaces into lines that each fit ``width`` pixels
    (by :func:`text_width`, an upper bound), so that a long benchmark name
    is never cut at the chart's left edge; a single word longer than the
    width keeps a line of its own."""
    lines: List[str] = []
    for word in text.split(" "):
        if lines and text_width(f"{lines[-1]} {word}") <= width:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return lines


def row_height(text: str) -> float:
    """The height of the row of a bar labelled ``text``."""
    return max(ROW, LINE * len(label_lines(text)) + 8)


COLOURS = {True: "#2e8b57", False: "#c0392b", None: "#8391a5"}
CSS_CLASS = {True: "held", False: "missed", None: "no-goal"}

PANELS = (
    (TIME, "Time, accinte / CPU (log scale; 1× is the CPU, lower is better)"),
    (BANDWIDTH, "Copy bandwidth relative to a CPU copy_ (1 is the CPU, higher is better)"),
)


def _log_ticks(low: float, high: float) -> List[float]:
    """1, 2, 5 times the powers of ten from the tick at or below ``low`` to
    the tick at or above ``high``."""
    candidates = [m * 10.0 ** e for e in range(-3, 7) for m in (1, 2, 5)]
    below = [t for t in candidates if t <= low]
    above = [t for t in candidates if t >= high]
    first = below[-1] if below else candidates[0]
    last = above[0] if above else candidates[-1]
    return [t for t in candidates if first <= t <= last]


def _linear_ticks(high: float) -> List[float]:
    step = 0.2 if high <= 2 else 0.5 if high <= 5 else 1.0
    count = math.ceil(high / step - 1e-9)
    return [round(i * step, 6) for i in range(count + 1)]


def _panel(measure: str, title: str, items: List[dict], top: float) -> List[str]:
    """SVG elements of one panel of bars, whose top edge is at ``top``."""
    values = [item["ratio"] for item in items]
    values += [item["goal"]["value"] for item in items if item["goal"]]
    if measure == TIME:
        ticks = _log_ticks(min(values + [1.0]) / 1.3, max(values + [1.0]) * 1.3)
        low, high = math.log10(ticks[0]), math.log10(ticks[-1])

        def position(value: float) -> float:
            return math.log10(value)
        origin = 1.0  # bars grow from the CPU's 1×, left if faster
    else:
        ticks = _linear_ticks(max(values + [1.0]) * 1.1)
        low, high = ticks[0], ticks[-1]

        def position(value: float) -> float:
            return value
        origin = 0.0
    plot_left, plot_right = LABEL_WIDTH, WIDTH - VALUE_WIDTH

    def x(value: float) -> float:
        share = (position(value) - low) / (high - low)
        return plot_left + share * (plot_right - plot_left)

    plot_top = top + PANEL_TOP
    heights = [row_height(item["name"]) for item in items]
    plot_bottom = plot_top + sum(heights)
    out = [f'<text x="{plot_left}" y="{top + 18}" font-weight="bold">{escape(title)}</text>']
    # Over more than two decades, labels at 2 and 5 would run into each other.
    sparse = measure == TIME and high - low > 2
    for tick in ticks:
        out.append(f'<line class="tick" x1="{x(tick):.1f}" x2="{x(tick):.1f}" '
                   f'y1="{plot_top}" y2="{plot_bottom}" stroke="#e3e3e3"/>')
        if sparse and not math.isclose(math.log10(tick), round(math.log10(tick))):
            continue
        label = f"{tick:g}×" if measure == TIME else f"{tick:g}"
        out.append(f'<text class="tick-label" x="{x(tick):.1f}" y="{plot_bottom + 16}" '
                   f'text-anchor="middle">{label}</text>')
    # The CPU's own value: where a bar would end if accinte matched the CPU.
    out.append(f'<line class="parity" x1="{x(1.0):.1f}" x2="{x(1.0):.1f}" '
               f'y1="{plot_top - 4}" y2="{plot_bottom}" stroke="#555"/>')
    y = plot_top
    for item, height in zip(items, heights):
        middle = y + height / 2
        start, end = sorted((x(origin), x(item["ratio"])))
        # NB: a name wider than the label column is broken into lines (one
        # <tspan> each), centred on the bar, instead of running off the
        # chart's left edge.
        lines = label_lines(item["name"])
        first = middle + 4 - LINE * (len(lines) - 1) / 2
        spans = "".join(f'<tspan x="{plot_left - 8}" y="{first + LINE * i:.1f}">'
                        f'{escape(line)}</tspan>' for i, line in enumerate(lines))
        out.append(f'<text class="label" x="{plot_left - 8}" y="{first:.1f}" '
                   f'text-anchor="end">{spans}</text>')
        out.append(f'<rect class="bar {CSS_CLASS[item["held"]]}" x="{start:.1f}" '
                   f'y="{middle - BAR / 2:.1f}" width="{max(end - start, 1.0):.1f}" '
                   f'height="{BAR}" fill="{COLOURS[item["held"]]}"/>')
        value = format_ratio(measure, item["ratio"])
        label_x = max(end, x(origin)) + 4
        # NB: a goal mark or the CPU's line where the value's label would be,
        # just right of the bar, would print over it: the label moves past.
        marks = sorted([x(1.0)] + ([x(item["goal"]["value"])] if item["goal"] else []))
        for mark in marks:
            if label_x - GAP <= mark <= label_x + text_width(value) + GAP:
                label_x = mark + GAP + 1
        out.append(f'<text class="value" x="{label_x:.1f}" y="{middle + 4:.1f}">'
                   f'{escape(value)}</text>')
        if item["goal"]:
            at = x(item["goal"]["value"])
            out.append(f'<line class="goal" x1="{at:.1f}" x2="{at:.1f}" '
                       f'y1="{y + 1}" y2="{y + height - 1}" stroke="#111" '
                       'stroke-width="2" stroke-dasharray="3,2"/>')
        y += height
    return out


def _legend(top: float) -> List[str]:
    out = []
    x = LABEL_WIDTH
    for held, label in ((True, "goal held"), (False, "goal missed"), (None, "no goal")):
        out.append(f'<rect x="{x}" y="{top + 8}" width="12" height="12" '
                   f'fill="{COLOURS[held]}"/>')
        out.append(f'<text x="{x + 17}" y="{top + 18}">{label}</text>')
        x += 100
    out.append(f'<line x1="{x + 6}" x2="{x + 6}" y1="{top + 6}" y2="{top + 22}" '
               'stroke="#111" stroke-width="2" stroke-dasharray="3,2"/>')
    out.append(f'<text x="{x + 14}" y="{top + 18}">goal</text>')
    return out


def svg_chart(results: dict) -> str:
    """A bar chart of every ratio with its goal, as one SVG document.

    Time ratios and bandwidth ratios read in opposite directions, so each
    has a panel of its own; benchmarks without a ratio are left out, and so
    are those measured against another baseline than the CPU, whose axis it
    is.
    """
    panels = []
    for measure, title in PANELS:
        items = [item for item in results["benchmarks"]
                 if item["measure"] == measure and item["ratio"] is not None
                 and "baseline" not in item and "subject" not in item]
        if items:
            panels.append((measure, title, items))
    body: List[str] = []
    top = 0.0
    for measure, title, items in panels:
        body += _panel(measure, title, items, top)
        top += PANEL_TOP + sum(row_height(item["name"]) for item in items) + AXIS_HEIGHT
    if panels:
        body += _legend(top)
        top += LEGEND_HEIGHT
    else:
        body.append('<text x="10" y="24">No benchmark of this run has a ratio.</text>')
        top = 40
    height = math.ceil(top)
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" '
            f'width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
            'font-family="sans-serif" font-size="12">')
    summary = (f"Ratios of accinte to the CPU, stage {results['stage']}, "
               f"with the goal of each benchmark")
    return "\n".join([head, f"<title>{escape(summary)}</title>",
                      f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
                      *body, "</svg>"]) + "\n"


# -- Self-test --------------------------------------------------------------------

def _sample_results() -> dict:
    """A run with one benchmark of every kind the driver writes."""
    return {
        "schema": SCHEMA, "stage": "08", "chapters": ["01_minimal_ops"],
        "torch": "2.13.0+cpu", "date": "2026-01-01T00:00:00Z", "cpu_count": 2,
        "torch_threads": 2, "other_load": 0.02,
        "repeats": 5,
        "benchmarks": [
            entry("latency", TIME, 80e-6, 1e-6, goal(TIME, 3)),
            entry("matmul", TIME, 1.1e-3, 1e-3, goal(TIME, 1.15)),
            entry("chain", TIME, 0.5e-3, 1e-3),
            entry("pinned | copy", BANDWIDTH, 0.02, 0.01, goal(BANDWIDTH, 0.8), nbytes=1 << 26),
            entry("pageable", BANDWIDTH, 0.008, 0.01, nbytes=1 << 26),
            entry("not in this stage", BANDWIDTH, None, None, goal(BANDWIDTH, 0.8),
                  skipped="pin_memory needs chapter 07"),
            entry("build", DURATION, 250.0),
        ],
    }


def _check_goals() -> None:
    time_goal, bandwidth_goal = goal(TIME, 3), goal(BANDWIDTH, 0.8)
    assert time_goal == {"direction": "<=", "value": 3}
    assert bandwidth_goal == {"direction": ">=", "value": 0.8}
    assert ratio_of(TIME, 3e-6, 1e-6) == 3.0
    assert ratio_of(BANDWIDTH, 2.0, 1.0) == 0.5
    assert ratio_of(DURATION, 2.0, None) is None
    assert is_held(3.0, time_goal) is True      # the bound itself holds
    assert is_held(3.1, time_goal) is False
    assert is_held(0.8, bandwidth_goal) is True
    assert is_held(0.5, bandwidth_goal) is False
    assert is_held(0.5, None) is None and is_held(None, time_goal) is None
    assert math.isclose(shortfall(6.0, time_goal), 2.0)
    # A goal set as a fraction prints as two decimals, not as %g's six digits.
    assert format_goal(TIME, goal(TIME, 1 / 1.5)) == "≤\u00a00.67×"
    assert format_goal(TIME, goal(TIME, 1.15)) == "≤\u00a01.15×"
    assert format_goal(BANDWIDTH, goal(BANDWIDTH, 0.8)) == "≥\u00a00.8"
    assert math.isclose(shortfall(0.4, bandwidth_goal), 2.0)


def _check_entries_and_table() -> None:
    results = _sample_results()
    validate(json.loads(json.dumps(results)))  # survives the file round trip
    latency, matmul, chain, pinned, pageable, skipped, build = results["benchmarks"]
    assert latency["held"] is False and math.isclose(latency["ratio"], 80)
    assert matmul["held"] is True and chain["held"] is None
    assert pinned["ratio"] == 0.5 and pinned["held"] is False
    assert skipped["ratio"] is None and skipped["held"] is None
    assert build["ratio"] is None and build["cpu_seconds"] is None
    for broken, message in ((dict(results, schema=0), "schema"),
                            ({k: v for k, v in results.items() if k != "torch"}, "torch"),
                            (dict(results, benchmarks=[dict(matmul, held=False)]), "held")):
        try:
            validate(broken)
        except ValueError as error:
            assert message in str(error), error
        else:
            raise AssertionError(f"validate accepted results with a wrong {message}")

    assert format_seconds(84.7e-6) == "84.7 µs"
    assert format_seconds(0.0123) == "12.3 ms"
    assert format_seconds(250.0) == "4 min 10 s"
    assert table_row(latency)[3:] == ["80×", "≤\u00a03×", "no: 27× too slow"]
    assert table_row(entry("x", TIME, 1.52, 1.0, goal(TIME, 1.5)))[5] == "no: 1.3% too slow"
    assert table_row(entry("x", TIME, 9.0, 1.0, goal(TIME, 4)))[5] == "no: 2.25× too slow"
    assert format_shortfall(1.999) == "100%" and format_shortfall(1.0009) == "0.09%"
    assert table_row(matmul)[3:] == ["1.10×", "≤\u00a01.15×", "yes"]
    assert table_row(pinned)[1] == "20.0 ms (3.36 GB/s)"
    assert table_row(pinned)[3:] == ["0.50", "≥\u00a00.8", "no: 60% too slow"]
    assert table_row(pageable)[4:] == ["—", "—"]
    assert table_row(skipped)[1] == "not measured: pin_memory needs chapter 07"
    assert table_row(build)[1:] == ["4 min 10 s", "—", "—", "—", "—"]

    lines = markdown_table(results).splitlines()
    assert len(lines) == 2 + len(results["benchmarks"])
    assert lines[1] == "| --- | --- | --- | --- | --- | --- |"
    assert "pinned \\| copy" in lines[5]  # a "|" in a name stays in its cell
    for line in lines:
        cells = line.replace("\\|", "").split("|")
        assert len(cells) == len(HEADER) + 2, line
    # The second side is named when it is not the CPU.
    eager = entry("compiled", TIME, 1e-3, 2e-3, baseline="eager accinte")
    assert table_row(eager)[2].endswith(" (eager accinte)"), table_row(eager)
    # And the first side, when it is not accinte.
    floor = entry("compiled vs eager", TIME, 1e-3, 2e-3, baseline="eager CPU",
                  subject="compiled CPU")
    assert table_row(floor)[1].endswith(" (compiled CPU)"), table_row(floor)
    assert "the first side ran that" in legend(dict(results, benchmarks=[floor]))
    assert "the first side ran that" not in legend(results)
    # A workload's step: the fallback calls counted are in the benchmark's
    # cell, the legend and the list below the table, never in the chart.
    workload = entry("GPT-2 step", TIME, 3e-3, 2e-3, goal(TIME, 1.2),
                     fallbacks={"aten::tril.out": 1, "aten::native_batch_norm": 5,
                                "aten::isin": 0})
    clean = entry("CNN step", TIME, 1e-3, 1e-3, fallbacks={})
    assert table_row(workload)[0] == "GPT-2 step, 6 fallback calls", table_row(workload)
    assert table_row(workload)[5] == "no: 25% too slow"
    assert table_row(clean)[0] == "CNN step, no fallback call"
    assert table_row(entry("x", TIME, 1.0, 1.0, fallbacks={"aten::x": 1}))[0] == \
        "x, 1 fallback call"
    assert table_row(matmul)[0] == "matmul"  # not counted: no note
    with_workloads = dict(results, benchmarks=[matmul, workload, clean])
    validate(json.loads(json.dumps(with_workloads)))
    assert "*fallback calls*" in legend(with_workloads)
    assert "*fallback calls*" not in legend(results)
    assert fallback_summary(results) == ""
    assert fallback_summary(with_workloads) == (
        "CPU fallback calls in one step, by operator:\n\n"
        "- GPT-2 step: `aten::native_batch_norm` 5, `aten::tril.out` 1\n")
    assert "fallback" not in svg_chart(with_workloads)
    for calls in ({"aten::x": -1}, {"aten::x": 1.5}, ["aten::x"]):
        try:
            validate(dict(results, benchmarks=[dict(workload, fallbacks=calls)]))
        except ValueError as error:
            assert "fallbacks must map operators" in str(error), error
        else:
            raise AssertionError(f"validate accepted fallbacks {calls!r}")
    quiet = describe_run(results)
    assert "kept 0.02 CPUs busy" in quiet and "preliminary" not in quiet
    assert quiet.startswith("Measured on stage 08 (the emulator and chapter 01)"), quiet
    assert "*goal*" in legend(results) and "*ratio*" in legend(results)
    # Without any goal, the table has neither a goal nor a held column, and
    # the legend does not explain them.
    no_goals = dict(results, benchmarks=[chain, pageable])
    assert markdown_table(no_goals).splitlines()[0] == "| benchmark | accinte | CPU | ratio |"
    assert all(line.count("|") == 5 for line in markdown_table(no_goals).splitlines())
    assert "goal" not in legend(no_goals) and "bandwidth" in legend(no_goals)
    assert "bandwidth" not in legend(dict(results, benchmarks=[chain]))
    assert describe_run(dict(results, other_load=0.5)).endswith("numbers are preliminary.")


def _check_chart() -> None:
    results = _sample_results()
    svg = ElementTree.fromstring(svg_chart(results))  # well-formed XML
    namespace = "{http://www.w3.org/2000/svg}"
    bars = svg.findall(f"{namespace}rect[@class]")
    classes = [bar.get("class") for bar in bars]
    # Every benchmark with a ratio has a bar, coloured by its goal; the
    # skipped one and the build have none.
    assert classes == ["bar missed", "bar held", "bar no-goal", "bar missed", "bar no-goal"]
    assert len(svg.findall(f"{namespace}line[@class='goal']")) == 3
    assert len(svg.findall(f"{namespace}line[@class='parity']")) == 2
    width = {bar.get("class"): float(bar.get("width")) for bar in bars[:3]}
    # On the log axis, 80× lies further from 1× than 1.1× does.
    assert width["bar missed"] > width["bar held"] > 0
    # Faster than the CPU: the bar grows left of the 1× line.
    chain_bar = bars[2]
    parity = float(svg.findall(f"{namespace}line[@class='parity']")[0].get("x1"))
    assert math.isclose(float(chain_bar.get("x")) + float(chain_bar.get("width")), parity,
                        abs_tol=0.2)
    assert svg.get("height") == svg.get("viewBox").split()[3]
    # A name too long for the label column is broken into lines that each
    # fit it, and none starts left of the chart's edge.
    long_name = ("transformer block training step (d 128, dropout 0.1, 8 × 32 tokens), "
                 "compiled on both")
    wide = ElementTree.fromstring(svg_chart(dict(results, benchmarks=[
        entry(long_name, TIME, 1e-3, 1e-3, goal(TIME, 1.3))])))
    labels = wide.findall(f"{namespace}text[@class='label']")
    assert len(labels) == 1
    spans = [span.text for span in labels[0]]
    assert " ".join(spans) == long_name and len(spans) > 1, spans
    for span in labels[0]:
        assert float(span.get("x")) - text_width(span.text) >= 0, span.text
    # A ratio to another baseline than the CPU has no bar on the CPU's axis.
    eager = entry("compiled vs eager", TIME, 1e-3, 2e-3, goal(TIME, 0.67),
                  baseline="eager accinte")
    floor = entry("compiled vs eager on the CPU", TIME, 1e-3, 2e-3, subject="compiled CPU")
    assert len(ElementTree.fromstring(svg_chart(dict(
        results, benchmarks=results["benchmarks"] + [eager, floor]))).findall(
            f"{namespace}rect[@class]")) == len(bars)
    empty = dict(results, benchmarks=[entry("build", DURATION, 1.0)])
    assert "No benchmark" in svg_chart(empty)
    assert _log_ticks(0.7, 80) == [0.5, 1, 2, 5, 10, 20, 50, 100]
    # The sample's time axis spans 0.2× to 200×: labels at powers of ten only.
    time_labels = [label.text for label in svg.findall(f"{namespace}text[@class='tick-label']")]
    assert time_labels[:4] == ["1×", "10×", "100×", "0"], time_labels
    assert _linear_ticks(1.1) == [0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2]
    # No goal mark and no CPU line crosses a value's label: a bar that ends
    # left of the CPU's line with its goal just right of it, where the label
    # starts, a goal just past a bar's end, a bandwidth bar ending just
    # short of the CPU's 1.
    near = dict(results, benchmarks=results["benchmarks"] + [
        entry("faster, goal just past 1x", TIME, 0.3e-3, 1e-3, goal(TIME, 1.2)),
        entry("goal just past the bar", TIME, 5e-3, 1e-3, goal(TIME, 5.5)),
        entry("just short of the CPU", BANDWIDTH, 1.05, 1.0, goal(BANDWIDTH, 0.8))])
    chart = ElementTree.fromstring(svg_chart(near))
    values = chart.findall(f"{namespace}text[@class='value']")
    marks = (chart.findall(f"{namespace}line[@class='goal']")
             + chart.findall(f"{namespace}line[@class='parity']"))
    assert len(values) == 8 and len(marks) == 6 + 2
    # The goals 0.8 and 1.0 (the parity line) of the bandwidth panel: a goal
    # mark stays at its goal whatever its label does.
    bandwidth_goals = [float(mark.get("x1")) for mark in marks[:6]][-2:]
    parity = float(marks[-1].get("x1"))
    assert all(goal_x < parity - 20 for goal_x in bandwidth_goals), (bandwidth_goals, parity)
    for label in values:
        start = float(label.get("x"))
        end = start + text_width(label.text)
        row = float(label.get("y"))
        for mark in marks:
            if float(mark.get("y1")) <= row <= float(mark.get("y2")) + 4:
                assert not start - GAP < float(mark.get("x1")) < end + GAP, label.text


def self_test() -> int:
    """Runs every check; 0 if all pass."""
    checks = [("goals: held, missed and by how much", _check_goals),
              ("entries, validation and the Markdown table", _check_entries_and_table),
              ("the SVG chart", _check_chart)]
    failures = 0
    for description, check in checks:
        try:
            check()
        except AssertionError as error:
            failures += 1
            print(f"FAIL: {description}: {error}", file=sys.stderr)
        else:
            print(f"ok: {description}")
    print(f"bench_report: {len(checks) - failures} passed, {failures} failed")
    return 1 if failures else 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--self-test", action="store_true", help="run this module's tests")
    args = parser.parse_args(argv)
    if args.self_test:
        return self_test()
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
