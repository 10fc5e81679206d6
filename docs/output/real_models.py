# stage: 16
"""The "Real models" table: each workload of tests/workloads, run against
the CPU on the final stage, with what one step of it runs on the CPU
fallback.

Prints a Markdown table (the page includes it as Markdown). Only values that
do not change from run to run are printed: whether every compared value
agrees with the CPU, and the fallback calls of one step (their count and the
operators that take most of them), never times or differences.
"""

import pathlib
import sys

import torch
import torch_accinte  # noqa: F401

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from tests.workloads import workloads  # noqa: E402

print("| Workload | Compared with the CPU | Agrees | Fallback calls in one step | Most frequent |")
print("| --- | --- | --- | ---: | --- |")
for run in workloads.WORKLOADS.values():
    result = run()
    top = sorted(result.fallbacks.items(), key=lambda item: (-item[1], item[0]))[:3]
    most = ", ".join(f"`{op.removeprefix('aten::')}` ({calls})" for op, calls in top) or "none"
    print(f"| {result.name} | {result.compared} | {'yes' if result.agrees else '**no**'} "
          f"| {result.fallback_calls} | {most} |")
