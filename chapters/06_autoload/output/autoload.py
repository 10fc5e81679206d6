"""What `import torch` does with stage 06 on PYTHONPATH: autoload on, off,
and with a broken backend. Each case runs in a fresh interpreter."""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import textwrap

STAGE = pathlib.Path(os.environ["PYTHONPATH"].split(os.pathsep)[0])


def fresh(title, code, autoload="1", path=STAGE, label="<stage>"):
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD=autoload,
               PYTHONPATH=str(path))
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                            env=env, capture_output=True, text=True,
                            timeout=120, check=True)
    print(f"# {title} (TORCH_DEVICE_BACKEND_AUTOLOAD={autoload})")
    print(result.stdout.replace(str(path), label))


fresh("import torch, nothing else", """
    import importlib.metadata, sys
    (point,) = importlib.metadata.entry_points(group="torch.backends")
    print("entry point:", point.name, "=", point.value)
    print("declared by:", point.dist.name, point.dist.version)
    import torch
    print("torch_accinte loaded:", "torch_accinte" in sys.modules)
    print("device initialised:", torch.accinte.is_initialized())
    print(torch.arange(4.0, device="accinte") * 2)
""")

fresh("autoload turned off", """
    import sys, torch
    print("torch_accinte loaded:", "torch_accinte" in sys.modules)
    print("torch.accinte exists:", hasattr(torch, "accinte"))
""", autoload="0")

# A copy of the stage whose emulator library is not a shared object.
with tempfile.TemporaryDirectory() as scratch:
    broken = pathlib.Path(scratch)
    shutil.copytree(STAGE, broken, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (broken / "torch_accinte" / "lib" / "libaccinte.so").write_bytes(b"not ELF")
    fresh("a broken backend", """
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch
        for warning in caught:
            print(f"{warning.category.__name__}: {warning.message}")
        print("import torch succeeded; torch.accinte exists:",
              hasattr(torch, "accinte"))
    """, path=broken, label="<broken copy>")
