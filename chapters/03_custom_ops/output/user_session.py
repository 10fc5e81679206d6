"""What a user of stage 03 sees: an interactive session, run for real.

Each line is fed to Python's interactive console (the one `python` runs
without a script), so results and tracebacks print exactly as they would at
the `>>>` prompt.
"""

import code
import os
import sys
import sysconfig

# NB: a traceback names files by absolute path; show them relative to the
# repository and to site-packages, so the output is the same on any machine.
PREFIXES = {
    os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", "..")) + os.sep: "",
    os.path.realpath(sysconfig.get_paths()["purelib"]) + os.sep: "<site-packages>/",
}

SESSION = [
    "import torch, torch_accinte.ops as ops",
    'x = torch.tensor([-1.5, 0.0, 2.0], device="accinte")',
    "ops.custom_abs(x)",
    "ops.scaled_add(x, ops.custom_abs(x), 0.5)",
    "torch.ops.accinte.custom_abs(x.cpu())",
    'ops.custom_abs(torch.tensor([True, False], device="accinte"))',
]


class Console(code.InteractiveConsole):
    """An interactive console that writes tracebacks to stdout, in order."""

    def write(self, data: str) -> None:
        for prefix, replacement in PREFIXES.items():
            data = data.replace(prefix, replacement)
        sys.stdout.write(data)


console = Console(filename="<stdin>")
for line in SESSION:
    print(f">>> {line}")
    console.push(line)
