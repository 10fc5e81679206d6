#!/usr/bin/env python3
"""Runs make targets one after the other and prints how long each took.

``make test`` is a list of steps (``TEST_STEPS`` in the Makefile); this runs
``MAKE STEP`` for each, in order, stops at the first that fails, as make
would, and in every case ends with a table of the steps, their seconds and
their outcome, naming the step that failed:

    tools/timed_steps.py --make "make --no-print-directory" docs-check build
"""

import argparse
import shlex
import subprocess
import sys
import time


def table(rows: list, total: float) -> str:
    width = max(len(step) for step, _, _ in rows)
    lines = [f"  {'step':<{width}}  {'seconds':>7}  outcome"]
    for step, seconds, outcome in rows:
        shown = "" if seconds is None else f"{seconds:.0f}"
        lines.append(f"  {step:<{width}}  {shown:>7}  {outcome}")
    lines.append(f"  {'total':<{width}}  {total:>7.0f}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--make", default="make --no-print-directory",
                        help="the command a step is appended to")
    parser.add_argument("--name", default="make test", help="what the steps make up")
    parser.add_argument("steps", nargs="+", metavar="STEP")
    args = parser.parse_args()

    rows, failed = [], None
    started = time.monotonic()
    for step in args.steps:
        if failed is not None:
            rows.append((step, None, "not run"))
            continue
        print(f"== {args.name}: {step}", flush=True)
        begun = time.monotonic()
        try:
            code = subprocess.call([*shlex.split(args.make), step])
        except KeyboardInterrupt:
            code = "interrupted"
        seconds = time.monotonic() - begun
        if code == 0:
            rows.append((step, seconds, "ok"))
        else:
            failed = step
            rows.append((step, seconds, "FAILED" if code != "interrupted" else "interrupted"))
    print(f"\n== {args.name}: seconds per step", flush=True)
    print(table(rows, time.monotonic() - started))
    if failed is not None:
        print(f"{args.name} FAILED at step {failed}")
        return 1
    print(f"{args.name} passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
