"""The usage example of the repository's README runs as it is written.

From stage 06 on, ``import torch`` alone brings the backend up, which is
what the example relies on; it runs in a fresh interpreter with only the
stage under test on the path, so nothing imported by the test process helps.
"""

import pathlib
import re

import torch
from conftest import run_python

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def usage_example() -> str:
    text = README.read_text()
    section = text.split("## Usage", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return code


def test_the_readme_usage_example_runs_as_written():
    result = run_python(usage_example(), env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"})
    assert result.returncode == 0, result.stderr
    expected = torch.arange(6.0).reshape(2, 3) + 2
    assert result.stdout.splitlines()[0] == "accinte:0 2 devices"
    assert str(expected) in result.stdout
