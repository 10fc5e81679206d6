#!/usr/bin/env python3
"""Runs tests or output scripts many times under CPU load, to see flakiness.

A test of threads, streams, signals or processes that passes once on an
idle machine proves little: CI runs it beside other work. ``make
flake-check`` (which calls this) runs the given pytest node ids or files
against one stage, and each given ``output/`` script against its own stage
as ``make outputs-check`` does, N times each, JOBS runs at a time, while
LOAD processes burn a CPU each. It prints how many runs of each passed,
keeps the log of every failed run, and fails if any run failed.

A run of tests passes if pytest exits with 0; a run of an output script
passes if the script exits with 0 and prints exactly its stored output.

    tools/flake_check.py --stage 11 -n 20 tests/ch01_minimal_ops/test_bad_input.py
    tools/flake_check.py -n 10 chapters/09_native_kernels/output/hot_spots.py
"""

import argparse
import collections
import concurrent.futures
import os
import pathlib
import re
import subprocess
import sys
import time

import generate_outputs

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: A failing test in pytest's short summary (-rfE).
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)

BURN = "while True:\n    pass\n"


def run_tests(tests: list, stage: str, timeout: float) -> tuple:
    """One pytest run of ``tests``: (passed, log, failing node ids)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "build" / f"stage{stage}" / "python"))
    command = [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", *tests]
    try:
        result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True,
                                text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        return False, f"timed out after {timeout} s\n{expired.stdout or ''}", ["(timeout)"]
    log = " ".join(command) + "\n" + result.stdout + result.stderr
    return result.returncode == 0, log, _FAILED.findall(result.stdout)


def run_output(script: pathlib.Path, timeout: float) -> tuple:
    """One run of an output script: (passed, log, what failed)."""
    try:
        result = generate_outputs.script_run(script, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout} s", ["(timeout)"]
    stored = script.with_suffix(".txt")
    expected = stored.read_text() if stored.exists() else ""
    fresh = generate_outputs.wrap(result.stdout)
    if result.returncode != 0:
        return False, result.stdout + result.stderr, [f"exit status {result.returncode}"]
    if fresh != expected:
        return False, fresh, ["output differs from " + str(stored.relative_to(ROOT))]
    return True, fresh, []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("items", nargs="+", metavar="ITEM",
                        help="pytest node ids or files (run together, as one "
                        "pytest command), or output/*.py scripts (each on its own)")
    parser.add_argument("-n", "--runs", type=int, default=20, help="runs of each (20)")
    parser.add_argument("--stage", default=None,
                        help="stage the tests run against (default: the final)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (2)")
    parser.add_argument("--load", type=int, default=1,
                        help="CPU-burning processes beside the runs (1)")
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds before a run counts as hung (900)")
    parser.add_argument("--logs", type=pathlib.Path, default=ROOT / "build" / "flake-check",
                        help="where failed runs' logs go (build/flake-check)")
    args = parser.parse_args()

    stages = sorted(p.name[:2] for p in ROOT.glob("chapters/[0-9][0-9]_*") if p.is_dir())
    stage = args.stage or stages[-1]
    scripts = [pathlib.Path(i).resolve() for i in args.items if i.endswith(".py")
               and pathlib.Path(i).parent.name == "output"]
    tests = [i for i in args.items if pathlib.Path(i).resolve() not in scripts]
    if tests and not (ROOT / "build" / f"stage{stage}" / "python").is_dir():
        sys.exit(f"stage {stage} is not built (run `make stage STAGE={stage}`)")

    # What runs: (label, function) N times each, in an interleaved order so
    # that every item meets the others and the load alike.
    jobs = []
    if tests:
        label = " ".join(tests)
        jobs.append((label, lambda: run_tests(tests, stage, args.timeout)))
    for script in scripts:
        jobs.append((str(script.relative_to(ROOT)),
                     lambda script=script: run_output(script, args.timeout)))
    runs = [(i, label, job) for i in range(1, args.runs + 1) for label, job in jobs]

    args.logs.mkdir(parents=True, exist_ok=True)
    print(f"flake-check: {args.runs} runs of each, {args.jobs} at a time, "
          f"{args.load} CPU burner(s); tests against stage {stage}, "
          "output scripts against their own", flush=True)
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(args.load)]
    passed = collections.Counter()
    failures = collections.defaultdict(collections.Counter)
    logs = collections.defaultdict(list)
    started = time.monotonic()
    try:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = {pool.submit(job): (i, label) for i, label, job in runs}
            for future in concurrent.futures.as_completed(futures):
                i, label = futures[future]
                ok, log, failed = future.result()
                if ok:
                    passed[label] += 1
                else:
                    name = re.sub(r"[^\w.-]+", "_", label)[:80]
                    path = args.logs / f"{name}.run{i}.log"
                    path.write_text(log)
                    logs[label].append(path)
                    for what in failed or ["(no failing test named)"]:
                        failures[label][what] += 1
                print(f"  run {i:>3} {'passed' if ok else 'FAILED'}  {label}", flush=True)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()

    print(f"\nflake-check summary ({time.monotonic() - started:.0f} s):")
    for label, _ in jobs:
        print(f"  {passed[label]:>3}/{args.runs} passed  {label}")
        for what, count in failures[label].most_common():
            print(f"        {count} failed: {what}")
        for path in logs[label]:
            print(f"        log: {os.path.relpath(path)}")
    return 0 if all(passed[label] == args.runs for label, _ in jobs) else 1


if __name__ == "__main__":
    sys.exit(main())
