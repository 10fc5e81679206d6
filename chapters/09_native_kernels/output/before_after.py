"""The benchmarks before and after chapter 09, as a Markdown table.

Both columns are `make bench` runs on the same idle machine, one after the
other: ``bench_before.json`` (beside this script) of stage 08, the stage
before this chapter, ``docs/output/bench_results.json`` (the performance
page's snapshot) of the final stage. Each cell is the accinte/CPU ratio: time ratios (×) lower is better,
bandwidth ratios higher.
"""

import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent

#: The rows chapter 09 changes: operators that now run as native kernels.
ROWS = [
    "a + b, 1 element (latency)",
    "a + b, 16M float32",
    "a @ b, 1024² float32",
    "MLP training step (3 × 1024, batch 256, SGD)",
    "10 elementwise ops on 1K elements",
]


def load(path: pathlib.Path) -> dict:
    data = json.loads(path.read_text())
    return {row["name"]: row for row in data["benchmarks"]}, data


def cell(row: dict) -> str:
    if row.get("ratio") is None:
        return "not measured"
    unit = "×" if row["measure"] == "time" else ""
    return f"{row['ratio']:.3g}{unit}"


def goal(row: dict) -> str:
    if not row.get("goal"):
        return ""
    sign = "≤" if row["goal"]["direction"] == "<=" else "≥"
    held = "held" if row["held"] else "missed"
    return f"{sign} {row['goal']['value']}, {held}"


before, before_run = load(HERE / "bench_before.json")
after, after_run = load(ROOT / "docs" / "output" / "bench_results.json")
assert "09_native_kernels" not in before_run["chapters"]
assert "09_native_kernels" in after_run["chapters"]
print("| benchmark (accinte/CPU) | without chapter 09 | with chapter 09 | goal |")
print("| --- | --- | --- | --- |")
for name in ROWS:
    print(f"| {name} | {cell(before[name])} | {cell(after[name])} | {goal(after[name])} |")
