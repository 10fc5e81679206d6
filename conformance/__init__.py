"""The conformance kit: checks a PrivateUse1 backend from the outside.

``python -m conformance --device NAME [--package PKG]`` runs every check of
``sections/`` against the device PyTorch knows as ``NAME``, through public
PyTorch APIs only, and reports one row per mechanism. See ``_api`` for what
a check is, and the guide's "Conformance" page for how to read the report.

The runner is this process; the checks run in a child interpreter (the
*worker*) that reports each check's start and result on a pipe. A check
that crashes the worker, or that does not finish within ``--timeout``
seconds, is recorded as failed, the worker is ended, and a new one carries
on with the next check: a broken backend cannot take the kit down with it.
This module imports neither torch nor the backend: the worker does.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import pkgutil
import platform
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Optional

#: Seconds a check may run before the kit gives up on it.
DEFAULT_TIMEOUT = 120.0
#: Seconds the worker may take to import torch, the backend and the sections.
STARTUP_TIMEOUT = 300.0


# ---------------------------------------------------------------------------
# The worker: runs the checks, in the child interpreter.
# ---------------------------------------------------------------------------

def _discover(sections_filter: Optional[list]):
    """The section modules of ``sections/``, in file-name order, as
    ``(module name, SECTION)`` pairs; ``sections_filter`` keeps those whose
    module name contains one of its words or whose chapter is one of them."""
    from . import sections

    names = sorted(info.name for info in pkgutil.iter_modules(sections.__path__)
                   if info.name.startswith("s"))
    found = []
    for name in names:
        module = importlib.import_module(f"{sections.__name__}.{name}")
        section = getattr(module, "SECTION", None)
        if section is None:
            continue
        if sections_filter and not any(
                word in name or word == section.chapter for word in sections_filter):
            continue
        found.append((name, section))
    return found


def _plan(found) -> list:
    """One entry per check, in running order."""
    plan = []
    for name, section in found:
        for check in section.checks:
            plan.append({
                "id": f"{name}.{check.name}",
                "section": name,
                "section_chapter": section.chapter,
                "title": section.title,
                "check": check.name,
                "chapter": check.chapter,
                "missing": check.missing,
                "deadlines": check.deadlines,
                "requires": [need for need in check.requires
                             if need != f"{name}.{check.name}"],
            })
    return plan


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {line}" if line else type(error).__name__


def _environment(ctx) -> dict:
    """The torch version and the device's properties, through public APIs."""
    import torch

    env = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": ctx.device,
        "package": ctx.package,
        "privateuse1_name": torch._C._get_privateuse1_backend_name(),
    }
    module = ctx.module
    if module is None:
        env["module"] = f"torch.{ctx.device} is not registered"
        return env
    try:
        count = torch.accelerator.device_count()
        env["device_count"] = count
        devices = []
        for index in range(count):
            entry = {"index": index}
            for what in ("get_device_name", "get_device_properties",
                         "get_device_capability"):
                function = getattr(module, what, None)
                if function is None:
                    continue
                try:
                    entry[what.replace("get_device_", "")] = str(function(index))
                except Exception as error:  # noqa: BLE001
                    entry[what.replace("get_device_", "")] = f"({_first_line(error)})"
            devices.append(entry)
        env["devices"] = devices
    except Exception as error:  # noqa: BLE001
        env["device_count"] = f"({_first_line(error)})"
    return env


def _worker(args) -> int:
    """Runs the checks from index ``args.start`` on, reporting on the pipe."""
    out = os.fdopen(args.worker_fd, "w", buffering=1)

    def send(**message):
        out.write(json.dumps(message) + "\n")
        out.flush()

    from ._api import Context, Skip

    found = _discover(args.sections)
    plan = _plan(found)
    checks = [check for _, section in found for check in section.checks]
    send(plan=plan)

    import_error = None
    if args.package:
        try:
            importlib.import_module(args.package)
        except Exception as error:  # noqa: BLE001
            import_error = f"import {args.package} failed: {_first_line(error)}"
    if import_error is None:
        import torch

        name = torch._C._get_privateuse1_backend_name()
        if name != args.device:
            # NB: then every check would fail on torch.device(NAME) alone;
            # one line that says why reads better.
            import_error = (f"PrivateUse1 is named {name!r}, not {args.device!r}: "
                            + (f"{args.package} does not rename it" if args.package else
                               "no package imported (--package) and no backend autoloaded"))
    ctx = Context(device=args.device, package=args.package)
    if args.start == 0:
        try:
            send(environment=_environment(ctx))
        except Exception as error:  # noqa: BLE001
            send(environment={"error": _first_line(error)})

    # LITERALINCLUDE START: KIT_WORKER_LOOP
    for index in range(args.start, len(plan)):
        entry, check = plan[index], checks[index]
        send(start=entry["id"])
        began = time.monotonic()
        result = {"id": entry["id"]}
        if import_error:
            result.update(status="failed", error=import_error, detail="")
        else:
            import torch

            device = None
            try:
                device = torch.accelerator.current_device_index()
            except Exception:  # noqa: BLE001
                device = None
            try:
                check.function(ctx)
                result.update(status="passed")
            except Skip as reason:
                result.update(status="skipped", error=str(reason))
            except BaseException as error:  # noqa: BLE001
                if isinstance(error, KeyboardInterrupt):
                    raise
                result.update(status="failed", error=_first_line(error),
                              detail="".join(traceback.format_exception(error))[-4000:])
            finally:
                # NB: a check that fails halfway must not leave the next one
                # on another device.
                if device is not None:
                    try:
                        torch.accelerator.set_device_index(device)
                    except Exception:  # noqa: BLE001
                        pass
        result["seconds"] = round(time.monotonic() - began, 3)
        send(result=result)
    # LITERALINCLUDE END: KIT_WORKER_LOOP
    send(done=True)
    out.close()
    # NB: the checks' own threads (a hung one, a backend's) must not keep the
    # worker alive once every result is sent.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# ---------------------------------------------------------------------------
# The runner: starts workers, watches them, writes the report.
# ---------------------------------------------------------------------------

@dataclasses.dataclass
class Run:
    """Everything a run found: what the report is made of."""

    device: str
    package: Optional[str]
    plan: list = dataclasses.field(default_factory=list)
    results: dict = dataclasses.field(default_factory=dict)
    environment: dict = dataclasses.field(default_factory=dict)
    seconds: float = 0.0


def _kit_module() -> str:
    """The name the worker is started with: ``conformance``, or
    ``PACKAGE.conformance`` when the kit ships inside a backend."""
    return __name__


def _worker_env() -> dict:
    """This interpreter's ``sys.path`` as the worker's PYTHONPATH (the
    current directory spelled out: ``python -m`` puts it first as '')."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
    return env


def _tail(path: str, lines: int = 6) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:]).strip()
    except OSError:
        return ""


def _run_workers(args, echo) -> Run:
    run = Run(device=args.device, package=args.package)
    began = time.monotonic()
    start = 0
    deadlines = {}
    while True:
        read_fd, write_fd = os.pipe()
        argv = [sys.executable, "-m", _kit_module(), "--worker-fd", str(write_fd),
                "--start", str(start), "--device", args.device]
        if args.package:
            argv += ["--package", args.package]
        if args.sections:
            argv += ["--sections", *args.sections]
        log = tempfile.NamedTemporaryFile("w+", prefix="conformance-", suffix=".log",
                                          delete=False)
        proc = subprocess.Popen(argv, env=_worker_env(), pass_fds=(write_fd,),
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)
        os.close(write_fd)
        reader = os.fdopen(read_fd, "rb", buffering=0)
        current = None
        # NB: until its first check starts, the worker imports torch and the
        # backend, which a loaded machine may take longer than one check.
        deadline = time.monotonic() + max(args.timeout, STARTUP_TIMEOUT)
        done = False
        buffer = b""
        problem = None
        # LITERALINCLUDE START: KIT_WATCH
        while True:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([reader], [], [], max(remaining, 0))
            if not ready:
                problem = (f"no result within {allowed:g} s: the check hangs"
                           if current else "the worker did not start in time")
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                break
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                message = json.loads(line.decode())
                if "plan" in message:
                    if not run.plan:
                        run.plan = message["plan"]
                        deadlines = {entry["id"]: entry["deadlines"] for entry in run.plan}
                elif "environment" in message:
                    run.environment = message["environment"]
                elif "start" in message:
                    current = message["start"]
                    allowed = args.timeout * deadlines[current]
                    deadline = time.monotonic() + allowed
                elif "result" in message:
                    result = message["result"]
                    run.results[result["id"]] = result
                    echo(result)
                    current = None
                elif message.get("done"):
                    done = True
        # LITERALINCLUDE END: KIT_WATCH
        reader.close()
        try:
            returncode = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            returncode = proc.wait()
        log.close()
        tail = _tail(log.name)
        os.unlink(log.name)
        if done:
            break
        if current is None:
            # NB: the worker died before its first check (or between two):
            # every check left is reported with why.
            why = problem or f"the kit's worker exited with status {returncode} before " \
                             f"running a check: {tail.splitlines()[-1] if tail else ''}"
            ids = [entry["id"] for entry in run.plan if entry["id"] not in run.results]
            if not ids and not run.plan:
                raise SystemExit(f"conformance: the worker could not start:\n{tail}")
            for check_id in ids:
                result = {"id": check_id, "status": "failed", "error": why, "detail": tail}
                run.results[check_id] = result
                echo(result)
            break
        if problem is None:
            if returncode < 0:
                problem = f"the process died with signal {signal.Signals(-returncode).name}"
            else:
                problem = f"the process exited with status {returncode}"
        result = {"id": current, "status": "failed", "error": problem, "detail": tail}
        run.results[current] = result
        echo(result)
        ids = [entry["id"] for entry in run.plan]
        start = ids.index(current) + 1
        if start >= len(ids):
            break
    run.seconds = round(time.monotonic() - began, 1)
    return run


# ---------------------------------------------------------------------------
# The report and the stage contract.
# ---------------------------------------------------------------------------

def _chapter_number(chapter: str) -> Optional[int]:
    return int(chapter) if chapter.isdigit() else None


#: The statuses of a check, in the order the summary counts them.
STATUSES = ("passed", "failed", "blocked", "skipped")


def _result(run: Run, check_id: str) -> dict:
    return run.results.get(check_id, {"id": check_id, "status": "failed", "error": "not run"})


# LITERALINCLUDE START: KIT_BLOCKED
def resolve_blocked(run: Run) -> None:
    """Marks as *blocked* every failed check that requires a check that did
    not pass (failed, or blocked itself), in ``run.results``: its status
    becomes ``"blocked"``, ``blocked_by`` names the required checks that did
    not pass and ``roots`` the failed checks at the end of those chains, the
    root causes. A required check outside the plan (``--sections``) is not
    known and blocks nothing; a skipped one blocks nothing either (it says
    why it cannot run here, not that its mechanism is missing). A check that
    passes stays passed whatever its requirements did."""
    entries = {entry["id"]: entry for entry in run.plan}
    roots_of: dict = {}

    def roots(check_id, seen=()):
        # The failed checks at the root of ``check_id``'s failure: itself
        # when none of its requirements failed, else theirs.
        if check_id in roots_of:
            return roots_of[check_id]
        result = _result(run, check_id)
        if result["status"] not in ("failed", "blocked"):
            return ()
        blockers = [need for need in entries[check_id].get("requires", ())
                    if need in entries and need not in seen
                    and _result(run, need)["status"] in ("failed", "blocked")]
        if not blockers:
            found = (check_id,)
        else:
            found = tuple(dict.fromkeys(
                root for need in blockers for root in roots(need, seen + (check_id,))))
            result = dict(result, status="blocked", blocked_by=blockers, roots=list(found))
            run.results[check_id] = result
        roots_of[check_id] = found
        return found

    for entry in run.plan:
        roots(entry["id"])
# LITERALINCLUDE END: KIT_BLOCKED


def root_causes(run: Run) -> list:
    """The failures grouped by root cause: one group per distinct failure
    (the failed checks that raised the same error on the same missing
    mechanism, such as every check after an import that failed), with the
    checks each blocks, transitively. Groups in plan order."""
    groups: dict = {}
    for entry in run.plan:
        result = _result(run, entry["id"])
        if result["status"] == "failed":
            key = (entry["missing"], result.get("error", ""))
            group = groups.setdefault(key, {"missing": entry["missing"],
                                            "error": result.get("error", ""),
                                            "failed": [], "blocked": []})
            group["failed"].append(entry["id"])
    key_of = {check_id: key for key, group in groups.items() for check_id in group["failed"]}
    for entry in run.plan:
        result = _result(run, entry["id"])
        if result["status"] == "blocked":
            for key in dict.fromkeys(key_of[root] for root in result["roots"]):
                groups[key]["blocked"].append(entry["id"])
    return list(groups.values())


def counts(run: Run) -> dict:
    """How many checks passed, failed, were blocked and were skipped."""
    found = dict.fromkeys(STATUSES, 0)
    for entry in run.plan:
        found[_result(run, entry["id"])["status"]] += 1
    return found


def section_rows(run: Run) -> list:
    """One row per mechanism: its chapter, title, status, counts and first
    failure (or, when none of its checks failed, what first blocked one)."""
    rows = {}
    for entry in run.plan:
        row = rows.setdefault(entry["section"], {
            "section": entry["section"], "chapter": entry["section_chapter"],
            "title": entry["title"], **dict.fromkeys(STATUSES, 0),
            "first_failure": None, "first_blocker": None})
        result = _result(run, entry["id"])
        row[result["status"]] += 1
        if result["status"] == "failed" and row["first_failure"] is None:
            row["first_failure"] = (f"{entry['check']}: {entry['missing']} "
                                    f"({result.get('error', '')})")
        if result["status"] == "blocked" and row["first_blocker"] is None:
            row["first_blocker"] = (f"{entry['check']}: blocked by "
                                    + ", ".join(result["blocked_by"]))
    for row in rows.values():
        row["status"] = ("failed" if row["failed"] else
                         "blocked" if row["blocked"] else
                         "passed" if row["passed"] else "skipped")
    return list(rows.values())


def mismatches(run: Run, stage: int) -> list:
    """Where the run breaks the stage contract: a check of a chapter <= stage
    that does not pass (a skip is tolerated: it says why it cannot run
    here; blocked is not: what blocks it failed), or a check of a later
    chapter that neither fails nor is blocked."""
    found = []
    for entry in run.plan:
        number = _chapter_number(entry["chapter"])
        if number is None:
            continue
        result = _result(run, entry["id"])
        status = result["status"]
        if number <= stage and status in ("failed", "blocked"):
            why = (f"blocked by {', '.join(result['blocked_by'])}" if status == "blocked"
                   else f"failed: {entry['missing']} ({result.get('error', '')})")
            found.append(f"{entry['id']} (chapter {entry['chapter']}): expected to pass "
                         f"on stage {stage:02d}, {why}")
        elif number > stage and status not in ("failed", "blocked"):
            found.append(f"{entry['id']} (chapter {entry['chapter']}): expected to fail "
                         f"on stage {stage:02d}, {status}"
                         + (f" ({result.get('error')})" if result.get("error") else ""))
    return found


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def summary_line(run: Run) -> str:
    """``N passed, N failed, N blocked, N skipped``."""
    found = counts(run)
    return ", ".join(f"{found[status]} {status}" for status in STATUSES)


def root_cause_lines(run: Run, markdown_code: bool = True) -> list:
    """The failures grouped by root cause, as lines (Markdown list items)."""
    quote = "`" if markdown_code else ""
    lines = []
    for group in root_causes(run):
        failed = ", ".join(f"{quote}{check_id}{quote}" for check_id in group["failed"])
        lines.append(f"- {failed}: {_escape(group['missing'])}  ")
        lines.append(f"  {_escape(group['error'] or 'no message')}")
        if group["blocked"]:
            blocked = ", ".join(f"{quote}{check_id}{quote}" for check_id in group["blocked"])
            lines.append(f"  - blocks {len(group['blocked'])}: {blocked}")
    return lines


def markdown(run: Run) -> str:
    """The report as Markdown: the environment, one row per mechanism, then
    the failures grouped by root cause, each with the checks it blocks."""
    env = run.environment
    lines = [f"# Conformance of the `{run.device}` device", ""]
    lines.append(f"- torch {env.get('torch', '?')}, Python {env.get('python', '?')}, "
                 f"{env.get('platform', '?')}")
    lines.append(f"- package: `{run.package}`" if run.package
                 else "- package: none imported (autoload)")
    lines.append(f"- devices: {env.get('device_count', env.get('module', '?'))}")
    for device in env.get("devices", []):
        details = ", ".join(f"{key} {value}" for key, value in device.items()
                            if key != "index")
        lines.append(f"  - `{run.device}:{device['index']}`: {details}")
    lines.append(f"- checks: {summary_line(run)}")
    lines += ["", "| Chapter | Mechanism | Result | Checks passed | First failure |",
              "|---|---|---|---|---|"]
    for row in section_rows(run):
        total = sum(row[status] for status in STATUSES)
        extra = [f"{row[status]} {status}" for status in ("blocked", "skipped") if row[status]]
        counts_text = f"{row['passed']}/{total}" + (f" ({', '.join(extra)})" if extra else "")
        lines.append(f"| {row['chapter']} | {_escape(row['title'])} | {row['status']} | "
                     f"{counts_text} | "
                     f"{_escape(row['first_failure'] or row['first_blocker'] or '')} |")
    groups = root_cause_lines(run)
    if groups:
        lines += ["", "## Failures by root cause", "",
                  "Each failure, then the checks it blocks (they need it, so they "
                  "say nothing of their own mechanism until it passes).", ""]
        lines += groups
    lines.append("")
    return "\n".join(lines)


def as_json(run: Run) -> dict:
    """The report as JSON: the environment, the counts, the rows, the root
    causes and every check."""
    return {
        "device": run.device, "package": run.package, "environment": run.environment,
        "seconds": run.seconds, "counts": counts(run), "sections": section_rows(run),
        "root_causes": root_causes(run),
        "checks": [dict(entry, **_result(run, entry["id"])) for entry in run.plan],
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m conformance",
        description="Check a PrivateUse1 backend through public PyTorch APIs.")
    parser.add_argument("--device", required=True,
                        help="the name the backend renamed PrivateUse1 to")
    parser.add_argument("--package", default=None,
                        help="the package to import first (none: the backend autoloads)")
    parser.add_argument("--report", metavar="OUT.md", default=None,
                        help="write the report to OUT.md and OUT.json")
    parser.add_argument("--sections", nargs="+", default=None, metavar="NAME",
                        help="run only the sections whose file name contains NAME "
                             "or whose chapter is NAME")
    parser.add_argument("--expect-stage", type=int, default=None, metavar="NN",
                        help="check the stage contract: chapters <= NN pass, later ones fail")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds a check may take (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print every check, not only failures")
    parser.add_argument("--worker-fd", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    return parser


def main(argv: Optional[list] = None) -> int:
    """The command line; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.worker_fd is not None:
        return _worker(args)

    def echo(result):
        # NB: as each check ends, before the run knows what blocks what:
        # a failure here may be reported blocked below.
        if args.verbose:
            text = f"{result['status'].upper():7} {result['id']}"
            if result.get("error"):
                text += f": {result['error']}"
            print(text, flush=True)

    run = _run_workers(args, echo)
    resolve_blocked(run)
    rows = section_rows(run)
    for row in rows:
        print(f"{row['chapter']:>4} {row['title']:<40} {row['status']}", flush=True)
    groups = root_cause_lines(run, markdown_code=False)
    if groups:
        print("failures by root cause:")
        for line in groups:
            print(f"  {line.rstrip()}", flush=True)
    found_counts = counts(run)
    print(f"{summary_line(run)} in {run.seconds} s (device {args.device}, torch "
          f"{run.environment.get('torch', '?')})", flush=True)
    if args.report:
        base = args.report[:-3] if args.report.endswith(".md") else args.report
        os.makedirs(os.path.dirname(os.path.abspath(args.report)), exist_ok=True)
        with open(base + ".md", "w") as f:
            f.write(markdown(run))
        with open(base + ".json", "w") as f:
            json.dump(as_json(run), f, indent=1)
            f.write("\n")
        print(f"report: {base}.md, {base}.json")
    if args.expect_stage is not None:
        found = mismatches(run, args.expect_stage)
        if found:
            print(f"stage {args.expect_stage:02d}: {len(found)} check(s) break the "
                  "stage contract:")
            for line in found:
                print(f"  {line}")
            return 1
        print(f"stage {args.expect_stage:02d}: the stage contract holds")
        return 0
    return 1 if found_counts["failed"] or found_counts["blocked"] else 0
