#!/usr/bin/env python3
"""Runs make targets, two at a time where they allow it, and times each.

``make test`` is a list of steps (``TEST_STEPS`` in the Makefile). A step is
a make target, optionally followed by the steps it must wait for:
``test-sanitized:sanitized-build`` starts once ``sanitized-build`` has
passed. This runs ``MAKE STEP`` for each, up to ``--slots`` at once; a step
starts as soon as a slot is free and the steps it waits for have passed,
earlier steps in the list first. NB: each step's output goes to
``LOGS/STEP.log`` and is printed whole when the step ends, so two steps'
outputs never interleave; ``tail -f`` the log to watch a step run.

After the first failure no step starts; the ones already running finish.
In every case the run ends with a table of the steps, their seconds, the
disk space left after each (a clean clone builds several virtual
environments and trees, and a full disk fails a step with ENOSPC) and their
outcome, then the total against the budgets (``--budget``)::

    tools/timed_steps.py --make "make --no-print-directory" --slots 2 \\
        build test-stages:build docs-check
"""

import argparse
import os
import pathlib
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field


@dataclass
class Step:
    """One make target and the steps it waits for."""

    name: str
    after: list = field(default_factory=list)
    process: subprocess.Popen | None = None
    begun: float | None = None
    seconds: float | None = None
    free: float | None = None
    outcome: str = "not run"


def parse_steps(specs: list) -> list:
    """``NAME[:AFTER[,AFTER...]]`` each; a step waits only for earlier ones."""
    steps, names = [], set()
    for spec in specs:
        name, _, after = spec.partition(":")
        waits = [a for a in after.split(",") if a]
        if name in names:
            raise ValueError(f"step {name!r} is listed twice")
        for other in waits:
            if other not in names:
                raise ValueError(f"step {name!r} waits for {other!r}, "
                                 "which is not an earlier step")
        names.add(name)
        steps.append(Step(name, waits))
    return steps


def table(steps: list, total: float) -> str:
    """A row per step: seconds, GiB free after it, outcome; then the total."""
    width = max(len(step.name) for step in steps + [Step("total")])
    lines = [f"  {'step':<{width}}  {'seconds':>7}  {'GiB free':>8}  outcome"]
    for step in steps:
        shown = "" if step.seconds is None else f"{step.seconds:.0f}"
        free = "" if step.free is None else f"{step.free:.1f}"
        lines.append(f"  {step.name:<{width}}  {shown:>7}  {free:>8}  {step.outcome}")
    lines.append(f"  {'total':<{width}}  {total:>7.0f}")
    return "\n".join(lines)


def budget_lines(total: float, budgets: list) -> list:
    """``LABEL=MINUTES`` each: whether ``total`` seconds is within it."""
    lines = []
    for budget in budgets:
        label, _, minutes = budget.partition("=")
        limit = float(minutes) * 60
        verdict = "within" if total <= limit else "OVER"
        lines.append(f"  {total / 60:.1f} min: {verdict} the {label} budget "
                     f"of {float(minutes):g} min")
    return lines


def gib_free() -> float:
    """Space left on the file system of the working directory (the build's)."""
    return shutil.disk_usage(".").free / 2**30


class Runner:
    """Starts steps into free slots and collects them as they end."""

    def __init__(self, steps, make, slots, logs: pathlib.Path, name):
        self.steps, self.make, self.slots, self.logs = steps, make, slots, logs
        self.name = name
        self.failed = None

    def log_of(self, step: Step) -> pathlib.Path:
        return self.logs / f"{step.name}.log"

    def ready(self, step: Step) -> bool:
        done = {s.name for s in self.steps if s.outcome == "ok"}
        return step.outcome == "not run" and step.process is None and all(
            other in done for other in step.after)

    def start(self, step: Step) -> None:
        print(f"== {self.name}: {step.name} started (log: {self.log_of(step)})",
              flush=True)
        with open(self.log_of(step), "wb") as log:
            # NB: a session of its own, so an interrupt can stop the step's
            # whole process tree (make, its compilers or pytest, their
            # children) and nothing is left running.
            step.process = subprocess.Popen(
                [*shlex.split(self.make), step.name], stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        step.begun = time.monotonic()
        step.outcome = "running"

    def finish(self, step: Step, code: int) -> None:
        step.seconds, step.free = time.monotonic() - step.begun, gib_free()
        step.outcome = "ok" if code == 0 else "FAILED"
        step.process = None
        print(f"== {self.name}: {step.name} {step.outcome} in {step.seconds:.0f} s; "
              "its output:", flush=True)
        with open(self.log_of(step), "rb") as log:
            shutil.copyfileobj(log, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        if code != 0 and self.failed is None:
            self.failed = step.name

    def run(self) -> None:
        while True:
            running = [s for s in self.steps if s.process is not None]
            if self.failed is None:
                for step in self.steps:
                    if len(running) >= self.slots:
                        break
                    if self.ready(step):
                        self.start(step)
                        running.append(step)
            if not running:
                return
            pid, status = os.wait()
            for step in running:
                if step.process.pid == pid:
                    step.process.returncode = os.waitstatus_to_exitcode(status)
                    self.finish(step, step.process.returncode)

    def interrupt(self) -> None:
        for step in self.steps:
            if step.process is not None:
                try:
                    os.killpg(step.process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                step.process.wait()
                step.process = None
                step.seconds = time.monotonic() - step.begun
                step.outcome = "interrupted"
        self.failed = self.failed or "interrupted"


def self_test() -> int:
    """Runs a small Makefile: order, two at a time, waiting, failure."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        trace = root / "trace"
        # Each target appends "start NAME" and "end NAME" to the trace; slow
        # and other take a while, so the runner has both running at once.
        (root / "Makefile").write_text("".join(
            f"{name}:\n\t@echo start {name} >> trace; sleep {delay}; "
            f"echo {name} says hello; echo end {name} >> trace; {tail}\n"
            for name, delay, tail in [
                ("slow", 1, "true"), ("other", 0.2, "true"),
                ("after", 0, "true"), ("bad", 0, "false"), ("never", 0, "true")]))

        def run(*steps):
            trace.write_text("")
            out = subprocess.run(
                [sys.executable, __file__, "--make", f"make -s -C {root}",
                 "--slots", "2", "--logs", str(root / "logs"), *steps],
                capture_output=True, text=True)
            return out, trace.read_text().split("\n")

        out, events = run("slow", "other", "after:slow")
        assert out.returncode == 0, out.stdout + out.stderr
        # Two at a time: other starts before slow ends; after waits for slow.
        assert events.index("start other") < events.index("end slow"), events
        assert events.index("start after") > events.index("end slow"), events
        assert out.stdout.count("slow says hello") == 1, out.stdout
        assert "make test passed" in out.stdout, out.stdout

        out, events = run("bad", "slow:bad", "never:bad")
        assert out.returncode == 1, out.stdout
        assert "start slow" not in events and "start never" not in events, events
        assert "make test FAILED at step bad" in out.stdout, out.stdout
        assert "not run" in out.stdout, out.stdout

        for steps in [("a:b", "b"), ("a", "a")]:
            try:
                parse_steps(list(steps))
            except ValueError:
                continue
            raise AssertionError(f"{steps} was accepted")
        assert budget_lines(1800, ["warm=30"]) == [
            "  30.0 min: within the warm budget of 30 min"]
        assert "OVER" in budget_lines(1801, ["warm=30"])[0]
    print("timed_steps self-test passed")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--make", default="make --no-print-directory",
                        help="the command a step is appended to")
    parser.add_argument("--name", default="make test", help="what the steps make up")
    parser.add_argument("--slots", type=int, default=1,
                        help="how many steps may run at once")
    parser.add_argument("--logs", default="build/steps",
                        help="where each step's output is kept")
    parser.add_argument("--budget", action="append", default=[], metavar="LABEL=MINUTES",
                        help="a time budget the total is compared with (repeatable)")
    parser.add_argument("steps", nargs="+", metavar="STEP[:AFTER,...]")
    args = parser.parse_args()

    try:
        steps = parse_steps(args.steps)
    except ValueError as error:
        parser.error(str(error))
    logs = pathlib.Path(args.logs)
    logs.mkdir(parents=True, exist_ok=True)
    runner = Runner(steps, args.make, max(1, args.slots), logs, args.name)
    started = time.monotonic()
    try:
        runner.run()
    except KeyboardInterrupt:
        runner.interrupt()
    total = time.monotonic() - started
    print(f"\n== {args.name}: seconds per step ({runner.slots} at a time)", flush=True)
    print(table(steps, total))
    for line in budget_lines(total, args.budget):
        print(line)
    if runner.failed is not None:
        print(f"{args.name} FAILED at step {runner.failed}")
        return 1
    print(f"{args.name} passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
