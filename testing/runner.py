"""``make upstream-tests``: PyTorch's device-generic test files, CPU and accinte.

Each file runs once per device, in a process of its own
(``PYTORCH_TESTING_DEVICE_ONLY_FOR`` names the device): a fatal error on
the device cannot take the CPU's results with it, each device's seconds are
its own, and the CPU run is the reference the same process would otherwise
share state with. Both processes get ``TORCH_TEST_DEVICES`` so that accinte
is instantiated once, from :mod:`device_test_base`, with the list applied.

The results (pytest's JUnit XML) are compared test by test: a test's key is
its generic class and method with the device's name taken out, so
``TestFooCPU.test_bar_cpu_float32`` and
``TestFooPRIVATEUSE1.test_bar_accinte_float32`` are one test.
"""

import argparse
import dataclasses
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

from torch_accinte.testing import DEVICE_TEST_BASE, expectations

#: PyTorch's test files (under test/) ``make upstream-tests`` runs by default.
DEFAULT_FILES = (
    "test_view_ops.py",
    "test_indexing.py",
    "test_shape_ops.py",
    "test_sort_and_select.py",
    "test_scatter_gather_ops.py",
    "test_type_promotion.py",
)

_PACKAGE_ROOT = pathlib.Path(DEVICE_TEST_BASE).resolve().parents[2]

PASSED, FAILED, ERROR, SKIPPED, XFAIL = "passed", "failed", "error", "skipped", "xfail"
_DEVICE_CLASS_SUFFIXES = ("PRIVATEUSE1", "CPU")


def test_key(classname, name, device):
    """``(GenericClass, method_without_device)`` for one JUnit test case."""
    cls = classname.rsplit(".", 1)[-1]
    for suffix in (device.upper(),) + _DEVICE_CLASS_SUFFIXES:
        if cls.endswith(suffix):
            cls = cls[: -len(suffix)]
            break
    # NB: the device sits after the test's own suffix and before the dtype's
    # (test_bar_<param>_<device>_<dtype>); the last occurrence is it.
    matches = list(re.finditer(rf"_{re.escape(device)}(?=_|$)", name))
    if matches:
        m = matches[-1]
        name = name[: m.start()] + "_<device>" + name[m.end():]
    return cls, name


def read_junit(path, device):
    """{key: (outcome, device-specific method name, message)} from a JUnit file."""
    results = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome, message = PASSED, ""
        for child in case:
            if child.tag == "failure":
                outcome, message = FAILED, child.get("message", "")
            elif child.tag == "error":
                outcome, message = ERROR, child.get("message", "")
            elif child.tag == "skipped":
                xfail = child.get("type") == "pytest.xfail"
                outcome, message = (XFAIL if xfail else SKIPPED), child.get("message", "")
        key = test_key(case.get("classname", ""), case.get("name", ""), device)
        results[key] = (outcome, case.get("name", ""), message)
    return results


@dataclasses.dataclass
class FileSummary:
    file: str
    cpu_passed: int = 0
    cpu_only: int = 0  # of those, the ones the test file does not run on the device
    device_passed: int = 0  # of the tests the CPU passes
    listed: int = 0
    unlisted: list = dataclasses.field(default_factory=list)
    both_fail: int = 0  # failing on the CPU too: PyTorch's or the machine's
    stale: list = dataclasses.field(default_factory=list)
    seconds: dict = dataclasses.field(default_factory=dict)
    crashed: list = dataclasses.field(default_factory=list)

    @property
    def percent(self):
        comparable = self.cpu_passed - self.cpu_only
        return 100.0 * self.device_passed / comparable if comparable else 100.0

    @property
    def ok(self):
        return not (self.unlisted or self.stale or self.crashed)


def summarize(file, cpu, dev, entries, device):
    """Compare one file's CPU and device results against the list's entries."""
    summary = FileSummary(file)
    cpu_ok = {key for key, (outcome, _, _) in cpu.items() if outcome == PASSED}
    summary.cpu_passed = len(cpu_ok)
    # NB: a test the file itself keeps off the device (@onlyCPU, onlyOn,
    # a missing feature) is no verdict on the device: it is left out of the
    # comparison, and counted apart. A skip of accinte's own list is not.
    summary.cpu_only = sum(
        1 for key in cpu_ok
        if key not in dev or (dev[key][0] == SKIPPED and not dev[key][2].startswith("accinte:")))
    matched = set()
    for key, (outcome, name, message) in sorted(dev.items()):
        qualified = f"{key[0]}.{name}"
        entry = expectations.find(entries, qualified)
        if entry is not None:
            matched.add(entry)
        # LITERALINCLUDE START: UPSTREAM_VERDICT
        if outcome == PASSED:
            summary.device_passed += key in cpu_ok
        elif outcome == XFAIL or (outcome == SKIPPED and message.startswith("accinte:")):
            summary.listed += 1
        elif outcome in (FAILED, ERROR):
            if entry is not None and entry.kind == "xfail":
                # An expected failure that passed: unittest's unexpected success.
                summary.stale.append(f"{qualified}: listed, but passes")
            elif key in cpu and cpu[key][0] in (FAILED, ERROR):
                summary.both_fail += 1
            else:
                first_line = message.splitlines()[0] if message else outcome
                summary.unlisted.append(f"{qualified}: {first_line}")
        # LITERALINCLUDE END: UPSTREAM_VERDICT
    for entry in entries:
        if entry.file == file and entry.kind in ("xfail", "skip") and entry not in matched:
            summary.stale.append(f"{entry.test}: listed, but no such test ran")
    return summary


def _total(summaries):
    """The sum of ``summaries``, as one more row of the table."""
    total = FileSummary("total")
    for s in summaries:
        total.cpu_passed += s.cpu_passed
        total.cpu_only += s.cpu_only
        total.device_passed += s.device_passed
        total.listed += s.listed
        total.unlisted += s.unlisted
        total.stale += s.stale
        for device, seconds in s.seconds.items():
            total.seconds[device] = total.seconds.get(device, 0) + seconds
    return total


def format_table(summaries, device):
    """The per-file table ``make upstream-tests`` prints."""
    head = ("file", "CPU passed", "CPU only", f"{device} passed", "%", "listed", "unlisted",
            "stale", "CPU s", f"{device} s")
    rows = [head]
    for s in summaries + ([_total(summaries)] if len(summaries) > 1 else []):
        rows.append((s.file + (" (crashed)" if s.crashed else ""), str(s.cpu_passed),
                     str(s.cpu_only), str(s.device_passed), f"{s.percent:.1f}", str(s.listed),
                     str(len(s.unlisted)), str(len(s.stale)),
                     f"{s.seconds.get('cpu', 0):.0f}", f"{s.seconds.get(device, 0):.0f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(row, widths))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def run_file(test_dir, file, device, out_dir, timeout, extra_env, pytest_args):
    """Run one file for one device; (JUnit path or None, seconds, return code)."""
    xml = out_dir / f"{pathlib.Path(file).stem}.{device}.xml"
    log = out_dir / f"{pathlib.Path(file).stem}.{device}.log"
    xml.unlink(missing_ok=True)
    # LITERALINCLUDE START: UPSTREAM_RUN_FILE
    env = dict(os.environ, **extra_env)
    env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = device
    env["TORCH_TEST_DEVICES"] = DEVICE_TEST_BASE
    # NB: the tests run in PyTorch's test/ (their imports of each other need
    # it); this package must stay importable from there, whatever relative
    # PYTHONPATH found it here.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           f"--junitxml={xml}", *pytest_args, file]
    # LITERALINCLUDE END: UPSTREAM_RUN_FILE
    start = time.monotonic()
    with open(log, "w") as out:
        try:
            code = subprocess.run(cmd, cwd=test_dir, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    seconds = time.monotonic() - start
    return (xml if xml.exists() else None), seconds, code


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torch_accinte.testing", description=__doc__.splitlines()[0])
    parser.add_argument("--pytorch-src", help="a PyTorch source tree at the installed release's tag (its test/ is read)")
    parser.add_argument("--files", nargs="*", default=list(DEFAULT_FILES), help="test files under test/")
    parser.add_argument("--device", default="accinte")
    parser.add_argument("--out", default="build/upstream-tests", help="where the JUnit files and logs go")
    parser.add_argument("--expectations", help="another expected-failure list than the shipped one")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per file and device")
    parser.add_argument("--pytest-args", default="", help="extra pytest arguments, one string split as a shell would")
    args = parser.parse_args(argv)

    if not args.pytorch_src:
        print("upstream-tests needs PyTorch's test files: PYTORCH_SRC=<a PyTorch source tree at the\n"
              f"tag of the installed release (torch {_torch_version()}), whose test/ holds\n"
              f"{', '.join(args.files)}>.", file=sys.stderr)
        return 2
    test_dir = pathlib.Path(args.pytorch_src) / "test"
    missing = [f for f in args.files if not (test_dir / f).is_file()]
    if missing:
        print(f"upstream-tests: {test_dir} lacks {', '.join(missing)}", file=sys.stderr)
        return 2

    extra_env = {}
    if args.expectations:
        extra_env[expectations.ENV_VAR] = str(pathlib.Path(args.expectations).resolve())
    entries = expectations.load(args.expectations)
    out_dir = pathlib.Path(args.out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    summaries = []
    for file in args.files:
        results, seconds, crashed = {}, {}, []
        for device in ("cpu", args.device):
            xml, seconds[device], code = run_file(test_dir, file, device, out_dir, args.timeout,
                                                  extra_env, shlex.split(args.pytest_args))
            results[device] = read_junit(xml, device) if xml else {}
            if xml is None or code not in (0, 1):
                crashed.append(f"{device}: exit {code}")
        summary = summarize(file, results["cpu"], results[args.device], entries, args.device)
        summary.seconds, summary.crashed = seconds, crashed
        summaries.append(summary)
        print(f"{file}: done ({', '.join(f'{d} {s:.0f} s' for d, s in seconds.items())})", flush=True)

    print()
    print(format_table(summaries, args.device))
    for s in summaries:
        for line in s.crashed:
            print(f"CRASHED   {s.file}: {line} (see {out_dir})")
        for line in s.unlisted:
            print(f"UNLISTED  {s.file}: {line}")
        for line in s.stale:
            print(f"STALE     {s.file}: {line}")
    (out_dir / "summary.json").write_text(json.dumps([dataclasses.asdict(s) for s in summaries], indent=1))
    return 0 if all(s.ok for s in summaries) else 1


def _torch_version():
    import torch

    return torch.__version__.split("+")[0]
