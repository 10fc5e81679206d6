"""What a user of stage 02 sees: an interactive session, run for real.

Each line is fed to Python's interactive console (the one `python` runs
without a script), so results and tracebacks print exactly as they would at
the `>>>` prompt.
"""

import code
import sys

SESSION = [
    "import torch, torch_accinte",
    'x = torch.arange(6.0, device="accinte").reshape(2, 3)',
    "x",
    "x + 2",
    "torch.nn.functional.relu(x - 2).sum()",
    "x.is_set_to(x)",
]


class Console(code.InteractiveConsole):
    """An interactive console that writes tracebacks to stdout, in order."""

    def write(self, data: str) -> None:
        sys.stdout.write(data)


console = Console(filename="<stdin>")
for line in SESSION:
    print(f">>> {line}")
    console.push(line)
