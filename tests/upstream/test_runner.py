"""The runner of ``make upstream-tests`` and accinte's device test base.

Without PyTorch's sources: the comparison and the table are fed JUnit files
written here, and the device test base runs on a device-generic test file
of our own, as PyTorch's would run on it.
"""

import json
import pathlib
import subprocess
import textwrap

import pytest
from torch_accinte.testing import DEVICE_TEST_BASE, expectations, runner

from conftest import hermetic_python, run_python

ROOT = pathlib.Path(__file__).resolve().parents[2]


def junit(path, device, cases):
    """A JUnit file: cases are (class, method, outcome) with outcome one of
    passed, failed, error, skipped, xfail."""
    suffix = {"cpu": "CPU"}.get(device, "PRIVATEUSE1")
    body = []
    for cls, method, outcome in cases:
        inner = {
            "passed": "",
            "failed": '<failure message="AssertionError: boom">trace</failure>',
            "error": '<error message="RuntimeError: oops">trace</error>',
            "skipped": '<skipped type="pytest.skip" message="not for this device"/>',
            "listed-skip": '<skipped type="pytest.skip" message="accinte: crashes (until chapter 16)"/>',
            "xfail": '<skipped type="pytest.xfail" message=""/>',
        }[outcome]
        body.append(f'<testcase classname="test_x.{cls}{suffix}" name="{method}">{inner}</testcase>')
    path.write_text(f'<testsuites><testsuite name="pytest">{"".join(body)}</testsuite></testsuites>')
    return runner.read_junit(path, device)


def entry(test, kind="xfail", file="test_x.py"):
    return expectations.Entry(test=test, file=file, kind=kind, reason="why", until="chapter 99")


def test_a_test_is_the_same_on_both_devices_without_the_device_name():
    assert runner.test_key("test_x.TestFooCPU", "test_bar_cpu_float32", "cpu") == \
        runner.test_key("test_x.TestFooPRIVATEUSE1", "test_bar_accinte_float32", "accinte") == \
        ("TestFoo", "test_bar_<device>_float32")
    # The device is the last occurrence: a test may name the CPU itself.
    assert runner.test_key("m.TestFooCPU", "test_to_cpu_cpu", "cpu") == ("TestFoo", "test_to_cpu_<device>")


def test_the_table_counts_what_the_cpu_passes_and_the_device_of_those(tmp_path):
    cpu = junit(tmp_path / "cpu.xml", "cpu", [
        ("TestFoo", "test_a_cpu", "passed"), ("TestFoo", "test_b_cpu", "passed"),
        ("TestFoo", "test_c_cpu", "passed"), ("TestFoo", "test_d_cpu", "failed"),
        ("TestFoo", "test_e_cpu", "skipped"), ("TestFoo", "test_g_cpu", "passed"),
    ])
    dev = junit(tmp_path / "dev.xml", "accinte", [
        ("TestFoo", "test_a_accinte", "passed"), ("TestFoo", "test_b_accinte", "xfail"),
        ("TestFoo", "test_c_accinte", "listed-skip"), ("TestFoo", "test_d_accinte", "failed"),
        ("TestFoo", "test_e_accinte", "passed"), ("TestFoo", "test_f_accinte", "error"),
        ("TestFoo", "test_g_accinte", "skipped"),
    ])
    entries = [entry("TestFoo.test_b_accinte"), entry("TestFoo.test_c_*", kind="skip")]
    s = runner.summarize("test_x.py", cpu, dev, entries, "accinte")
    # test_g is the CPU's only (@onlyCPU, say): not compared.
    assert (s.cpu_passed, s.cpu_only, s.device_passed, s.listed, s.both_fail) == (4, 1, 1, 2, 1)
    # test_f runs on accinte only (onlyAccelerator, say): its error is unlisted.
    assert s.unlisted == ["TestFoo.test_f_accinte: RuntimeError: oops"]
    assert s.stale == [] and not s.ok
    s.seconds = {"cpu": 1.0, "accinte": 2.0}
    table = runner.format_table([s], "accinte").splitlines()
    assert table[0].split() == ["file", "CPU", "passed", "CPU", "only", "accinte", "passed", "%",
                                "listed", "unlisted", "stale", "CPU", "s", "accinte", "s"]
    assert table[2].split() == ["test_x.py", "4", "1", "1", "33.3", "2", "1", "0", "1", "2"]


def test_a_listed_test_that_passes_or_no_longer_exists_is_reported(tmp_path):
    cpu = junit(tmp_path / "cpu.xml", "cpu", [("TestFoo", "test_a_cpu", "passed")])
    # unittest's unexpected success is a failure in pytest's report.
    dev = junit(tmp_path / "dev.xml", "accinte", [("TestFoo", "test_a_accinte", "failed")])
    entries = [entry("TestFoo.test_a_accinte"), entry("TestFoo.test_renamed_*"),
               entry("TestOther.test_z_*", file="test_other.py")]
    s = runner.summarize("test_x.py", cpu, dev, entries, "accinte")
    assert s.unlisted == []
    # The other file's entry is not this file's to judge.
    assert s.stale == ["TestFoo.test_a_accinte: listed, but passes",
                       "TestFoo.test_renamed_*: listed, but no such test ran"]
    assert not s.ok


def test_the_shipped_list_is_well_formed():
    entries = expectations.load()
    for e in entries:
        assert e.file in runner.DEFAULT_FILES, e
        assert e.reason and e.until, e
    with pytest.raises(ValueError, match="lacks reason"):
        expectations.parse({"entries": [{"test": "A.b", "file": "f", "kind": "xfail", "until": "x"}]})


def test_without_pytorch_src_it_says_what_it_needs():
    result = run_python("""
        import sys
        from torch_accinte.testing.runner import main
        sys.exit(main([]))
    """)
    assert result.returncode == 2
    assert "PYTORCH_SRC" in result.stderr and "test_indexing.py" in result.stderr
    made = subprocess.run(["make", "--no-print-directory", "upstream-tests", "PYTORCH_SRC="],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert made.returncode != 0 and "needs PYTORCH_SRC=" in made.stderr


PROBE = '''
import torch
from torch.testing._internal.common_utils import TestCase, run_tests
from torch.testing._internal.common_device_type import instantiate_device_type_tests, dtypes

class TestProbe(TestCase):
    def test_ok(self, device):
        self.assertEqual(torch.ones(2, device=device).sum().item(), 2.0)

    def test_broken(self, device):
        if device != "cpu":
            raise RuntimeError("not on this device")

    def test_fixed(self, device):
        pass

    def test_leaves_async_error(self, device):
        # An index out of range is the kernel's error on the device, reported
        # asynchronously (as CUDA's device-side assert is): not synchronized here.
        if device != "cpu":
            torch.ones(3, device=device)[torch.tensor([5], device=device)]

    def test_z_runs_next(self, device):
        self.assertEqual(torch.ones(3, device=device).sum().item(), 3.0)

    @dtypes(torch.float32)
    def test_close(self, device, dtype):
        self.assertEqual(torch.tensor([1.0], device=device, dtype=dtype),
                         torch.tensor([1.001], device=device, dtype=dtype))

instantiate_device_type_tests(TestProbe, globals())

if __name__ == "__main__":
    run_tests()
'''


def test_the_device_test_base_instantiates_accinte_once_with_its_list(tmp_path):
    (tmp_path / "src" / "test").mkdir(parents=True)
    (tmp_path / "src" / "test" / "test_probe.py").write_text(PROBE)
    (tmp_path / "list.json").write_text(json.dumps({"entries": [
        {"test": "TestProbe.test_broken_accinte", "file": "test_probe.py", "kind": "xfail",
         "reason": "r", "until": "u"},
        {"test": "TestProbe.test_fixed_accinte", "file": "test_probe.py", "kind": "xfail",
         "reason": "r", "until": "u"},
        {"test": "TestProbe.test_close_accinte_*", "file": "test_probe.py", "kind": "precision",
         "atol": 0.01, "rtol": 0, "reason": "r", "until": "u"},
    ]}))
    result = subprocess.run(
        [hermetic_python(), "-m", "torch_accinte.testing", "--pytorch-src", str(tmp_path / "src"),
         "--files", "test_probe.py", "--expectations", str(tmp_path / "list.json"),
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith("test_probe.py "))
    # The CPU passes all but test_close (beyond its default tolerance);
    # accinte passes test_ok and test_z_runs_next (and test_close, with the
    # list's tolerance); test_broken fails as listed.
    assert row.split()[1:8] == ["5", "0", "2", "40.0", "1", "1", "1"], result.stdout
    assert "STALE     test_probe.py: TestProbe.test_fixed_accinte: listed, but passes" in result.stdout
    # The asynchronous error fails the test that caused it, not the next one.
    assert "UNLISTED  test_probe.py: TestProbe.test_leaves_async_error_accinte:" in result.stdout
    names = [case.get("name") for case in
             __import__("xml.etree.ElementTree").etree.ElementTree.parse(
                 tmp_path / "out" / "test_probe.accinte.xml").getroot().iter("testcase")]
    # One accinte class: PrivateUse1TestBase itself is not instantiated too.
    assert sorted(names) == ["test_broken_accinte", "test_close_accinte_float32",
                             "test_fixed_accinte", "test_leaves_async_error_accinte",
                             "test_ok_accinte", "test_z_runs_next_accinte"]
    assert DEVICE_TEST_BASE.endswith("device_test_base.py")


def test_pytest_arguments_are_split_as_a_shell_would(tmp_path):
    # A -k expression has blanks: split on blanks alone, pytest would read
    # "or" as a file to run, and no test of the file would run.
    (tmp_path / "src" / "test").mkdir(parents=True)
    (tmp_path / "src" / "test" / "test_probe.py").write_text(PROBE)
    (tmp_path / "none.json").write_text(json.dumps({"entries": []}))
    result = subprocess.run(
        [hermetic_python(), "-m", "torch_accinte.testing", "--pytorch-src", str(tmp_path / "src"),
         "--files", "test_probe.py", "--expectations", str(tmp_path / "none.json"),
         "--out", str(tmp_path / "out"), "--pytest-args", "-k 'test_ok or test_z_runs_next'"],
        capture_output=True, text=True, timeout=300)
    for device in ("cpu", "accinte"):
        names = [case.get("name") for case in
                 __import__("xml.etree.ElementTree").etree.ElementTree.parse(
                     tmp_path / "out" / f"test_probe.{device}.xml").getroot().iter("testcase")]
        assert sorted(names) == [f"test_ok_{device}", f"test_z_runs_next_{device}"], \
            result.stdout + result.stderr
