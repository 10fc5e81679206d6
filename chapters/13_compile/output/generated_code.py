"""The code Inductor generates for a small MLP, on accinte and on the CPU.

The same model (Linear, ReLU, Linear, one fixed seed) is compiled with the
default backend for each device, and ``run_and_get_code`` hands over the
Python wrapper code that Inductor wrote. The script prints, for both
devices, the parts the page compares: the fused C++ kernel (the CPU's
body only if it differs from accinte's), the imports only accinte's wrapper
has, and the wrapper's ``call`` (allocations and kernel calls), each after
a ``== title ==`` line. Nothing that changes from run to run is printed: the
compile runs in a fresh, temporary cache, and the graph's id line is left
out, and the kernels are not vectorized (``config.cpp.simdlen = 0``):
vectorized, their loops step by the vector width of the machine that
compiles them.
"""

import os
import re
import shutil
import tempfile

# NB: before torch is imported, which reads it once. A fresh cache makes
# Inductor generate the code again, rather than load it.
CACHE = tempfile.mkdtemp(prefix="accinte-inductor-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = CACHE

import torch  # noqa: E402
import torch_accinte  # noqa: E402,F401
from torch._inductor import config  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402


def compiled_mlp(device: str):
    """The output of the compiled MLP on `device` and Inductor's wrapper code."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 4)).to(device)
    inputs = torch.randn(2, 8).to(device)
    with torch.no_grad(), config.patch({"cpp.simdlen": 0}):
        output, codes = run_and_get_code(torch.compile(model), inputs)
    (code,) = codes  # one graph, inference only: one wrapper
    return output, code


def imports(code: str) -> list:
    return [line for line in code.splitlines() if line.startswith(("from ", "import "))]


def call(code: str) -> str:
    """The wrapper's ``call``, from its ``def`` to its ``return``."""
    match = re.search(r"^    def call\(self, args\):\n.*?^        return .*?\n", code,
                      re.MULTILINE | re.DOTALL)
    return match.group(0)


def kernel(code: str) -> str:
    """The first C++ kernel's definition, from its name to the closing quotes."""
    match = re.search(r"^cpp_fused_\w+ = async_compile\..*?^'''\)\n", code,
                      re.MULTILINE | re.DOTALL)
    return match.group(0)


def body(kernel_source: str, name: str) -> str:
    """The kernel's C++ code from its signature to its closing brace, with its
    own function name replaced by NAME."""
    start = kernel_source.index('extern "C"')
    end = kernel_source.index("\n}\n", start) + 3
    return kernel_source[start:end].replace(f" {name}(", " NAME(", 1)


def main() -> None:
    try:
        on_accinte, accinte_code = compiled_mlp("accinte")
        on_cpu, cpu_code = compiled_mlp("cpu")
    finally:
        shutil.rmtree(CACHE, ignore_errors=True)

    same = (body(kernel(accinte_code), "accinte_kernel_body")
            == body(kernel(cpu_code), "kernel"))
    print("== the fused kernel on accinte ==")
    print(kernel(accinte_code), end="")
    print("== the fused kernel on the CPU ==")
    cpu_kernel = kernel(cpu_code)
    if same:
        # The body once is enough: the signature, then the end.
        start = cpu_kernel.index('extern "C"')
        signature_end = cpu_kernel.index("\n", start) + 1
        print(cpu_kernel[:signature_end], end="")
        print("// the same body as on accinte")
        print(cpu_kernel[cpu_kernel.index("\n}\n", start) + 1:], end="")
    else:
        print(cpu_kernel, end="")
    print("== imports that only the accinte wrapper has ==")
    for line in imports(accinte_code):
        if line not in imports(cpu_code):
            print(line)
    print("== call() on accinte ==")
    print(call(accinte_code), end="")
    print("== call() on the CPU ==")
    print(call(cpu_code), end="")
    print("== checks ==")
    print(f"the kernels' C++ bodies, but for the function's name: "
          f"{'the same' if same else 'different'}")
    print(f"the compiled MLP's output on accinte equals the CPU's: "
          f"{torch.equal(on_accinte.cpu(), on_cpu)}")

if __name__ == "__main__":
    main()
