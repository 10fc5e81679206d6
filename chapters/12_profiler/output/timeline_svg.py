"""Draws the timeline of the profiled training step as an SVG.

The picture is drawn from ``trace_snapshot.json`` (a trimmed Chrome trace
that ``profile_step.py --snapshot`` wrote from a real profile), the way
Perfetto or chrome://tracing would show it: the host's threads above, with
their operators nested by depth, and one row per accinte stream below. No
plotting library: boxes and text, written as SVG.
"""

import html
import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent

WIDTH = 760
LABEL_W = 150
ROW_H = 14
GAP = 8
COLOURS = {"cpu_op": "#9ecae1", "user_annotation": "#fdd0a2", "kernel": "#31a354",
           "gpu_memcpy": "#e6550d", "gpu_memset": "#756bb1",
           "gpu_user_annotation": "#fdae6b"}


LEGEND = (("cpu_op", "operator"), ("user_annotation", "record_function"),
          ("gpu_user_annotation", "its device range"), ("kernel", "kernel"),
          ("gpu_memcpy", "copy"))


def rows_of(events):
    """(row label, [(start, end, name, category, depth)]) per row, host rows first."""
    names = {}
    for event in events:
        # NB: the first name a row was given: Kineto's own names for device
        # indices 0-15 come after the device's (see the chapter's page).
        if event.get("ph") == "M" and event.get("name") == "process_name":
            names.setdefault((event["pid"], None), event["args"]["name"])
        elif event.get("ph") == "M" and event.get("name") == "thread_name":
            names.setdefault((event["pid"], event["tid"]), event["args"]["name"])
    rows = {}
    for event in events:
        if event.get("ph") != "X" or event.get("cat") not in COLOURS:
            continue
        device = event.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset",
                                       "gpu_user_annotation")
        rows.setdefault((device, event["pid"], event["tid"]), []).append(
            (event["ts"], event["ts"] + event["dur"], event["name"], event["cat"]))
    labelled = []
    for (device, pid, tid), boxes in sorted(rows.items(), key=lambda item: item[0]):
        if device:
            label = f"{names.get((pid, None), pid)}, {names.get((pid, tid), tid)}"
        else:
            label = "host thread" if len([r for r in rows if not r[0]]) == 1 \
                else f"host thread {tid}"
        labelled.append((label, nest(boxes)))
    return labelled


def nest(boxes):
    """Each box with its depth: the number of open boxes that contain it."""
    boxes = sorted(boxes, key=lambda box: (box[0], -box[1]))
    stack, placed = [], []
    for start, end, name, category in boxes:
        while stack and stack[-1] <= start:
            stack.pop()
        placed.append((start, end, name, category, len(stack)))
        stack.append(end)
    return placed


def draw(events) -> str:
    rows = rows_of(events)
    spans = [box for _, boxes in rows for box in boxes]
    t0 = min(box[0] for box in spans)
    t1 = max(box[1] for box in spans)
    scale = (WIDTH - LABEL_W - 10) / (t1 - t0)
    heights = [(max(box[4] for box in boxes) + 1) * ROW_H for _, boxes in rows]
    height = sum(heights) + GAP * (len(rows) + 1) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
           f'style="max-width: {WIDTH}px; width: 100%" font-family="sans-serif" '
           'font-size="10" role="img" aria-label="Timeline of one profiled training '
           'step: host threads above, the device stream below">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>']
    y = GAP
    for (label, boxes), row_h in zip(rows, heights):
        out.append(f'<text x="4" y="{y + 10}">{html.escape(label)}</text>')
        out.append(f'<line x1="0" x2="{WIDTH}" y1="{y + row_h + GAP / 2}" '
                   f'y2="{y + row_h + GAP / 2}" stroke="#eee"/>')
        for start, end, name, category, depth in boxes:
            x = LABEL_W + (start - t0) * scale
            w = max((end - start) * scale, 0.5)
            top = y + depth * ROW_H
            out.append(f'<rect x="{x:.1f}" y="{top}" width="{w:.1f}" height="{ROW_H - 1}" '
                       f'fill="{COLOURS[category]}"><title>{html.escape(name)} '
                       f'({end - start:.0f} us)</title></rect>')
            if w > 6 * len(name):
                out.append(f'<text x="{x + 2:.1f}" y="{top + 10}">{html.escape(name)}</text>')
        y += row_h + GAP
    x = LABEL_W + 60
    for category, label in LEGEND:
        out.append(f'<rect x="{x}" y="{height - 21}" width="10" height="10" '
                   f'fill="{COLOURS[category]}"/>')
        out.append(f'<text x="{x + 14}" y="{height - 12}">{label}</text>')
        x += 20 + 6 * len(label)
    out.append(f'<text x="{LABEL_W}" y="{height - 12}">0 us</text>')
    out.append(f'<text x="{WIDTH - 10}" y="{height - 12}" text-anchor="end">'
               f'{t1 - t0:.0f} us</text>')
    out.append("</svg>")
    return "\n".join(out)


def main() -> None:
    snapshot = json.loads((HERE / "trace_snapshot.json").read_text())
    print(draw(snapshot["traceEvents"]))


if __name__ == "__main__":
    main()
