#!/usr/bin/env python3
"""Runs make targets one after the other and prints how long each took.

``make test`` is a list of steps (``TEST_STEPS`` in the Makefile); this runs
``MAKE STEP`` for each, in order, stops at the first that fails, as make
would, and in every case ends with a table of the steps, their seconds, the
disk space left after each (a clean clone builds several virtual
environments and trees, and a full disk fails a step with ENOSPC) and their
outcome, naming the step that failed:

    tools/timed_steps.py --make "make --no-print-directory" docs-check build
"""

import argparse
import shlex
import shutil
import subprocess
import sys
import time


def table(rows: list, total: float) -> str:
    """Rows are (step, seconds or None, GiB free after it or None, outcome)."""
    width = max(len(step) for step, *_ in rows)
    lines = [f"  {'step':<{width}}  {'seconds':>7}  {'GiB free':>8}  outcome"]
    for step, seconds, free, outcome in rows:
        shown = "" if seconds is None else f"{seconds:.0f}"
        free_shown = "" if free is None else f"{free:.1f}"
        lines.append(f"  {step:<{width}}  {shown:>7}  {free_shown:>8}  {outcome}")
    lines.append(f"  {'total':<{width}}  {total:>7.0f}")
    return "\n".join(lines)


def gib_free() -> float:
    """Space left on the file system of the working directory (the build's)."""
    return shutil.disk_usage(".").free / 2**30


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
            rows.append((step, None, None, "not run"))
            continue
        print(f"== {args.name}: {step}", flush=True)
        begun = time.monotonic()
        try:
            code = subprocess.call([*shlex.split(args.make), step])
        except KeyboardInterrupt:
            code = "interrupted"
        seconds, free = time.monotonic() - begun, gib_free()
        if code == 0:
            rows.append((step, seconds, free, "ok"))
        else:
            failed = step
            rows.append((step, seconds, free, "FAILED" if code != "interrupted" else "interrupted"))
    print(f"\n== {args.name}: seconds per step", flush=True)
    print(table(rows, time.monotonic() - started))
    if failed is not None:
        print(f"{args.name} FAILED at step {failed}")
        return 1
    print(f"{args.name} passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
