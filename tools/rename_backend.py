#!/usr/bin/env python3
"""Renames a built stage of the backend: the first step of a port.

The device's name reaches PyTorch in one place, the package's call to
``torch.utils.rename_privateuse1_backend``; the C++ libraries never ask for
it. So a copy of a stage's Python tree (``build/stageNN/python``: the
package, its autoload module and its ``*.dist-info``) in which every
"accinte" of the Python files, the entry point and the metadata is replaced,
and the files and folders holding it renamed, is a backend of another name:
package ``torch_NAME``, device ``NAME``. docs/porting.md's bring-up plan
starts with it, and the conformance kit's tests (tests/conformance) run on
such a copy, named ``kitdev``.

Usage, from the repository root::

    python3 tools/rename_backend.py build/stage16/python build/mydev/python --device mydev
    PYTHONPATH=build/mydev/python python3 tools/rename_backend.py --check --device mydev

The second command imports the renamed backend and checks that a small
computation on the device matches the CPU's.
"""

from __future__ import annotations

import argparse
import importlib
import re
import shutil
import sys
from pathlib import Path
from typing import List, Optional

#: A device name PyTorch accepts as a device type: a lowercase identifier.
DEVICE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


# LITERALINCLUDE START: PORTING_RENAME
def rename(source: Path, target: Path, device: str, package: str) -> Path:
    """Copies the stage tree ``source`` to ``target`` with the package named
    ``package`` and the device ``device``."""
    shutil.copytree(source, target, symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__"))
    # The package, the autoload module and the dist-info folder.
    for path in sorted(target.iterdir()):
        if "torch_accinte" in path.name:
            path.rename(path.with_name(path.name.replace("torch_accinte", package)))
    # Every mention in Python sources, the entry point and the metadata.
    for path in target.rglob("*"):
        if path.is_file() and (path.suffix in (".py", ".txt")
                               or path.name in ("METADATA", "RECORD")):
            text = path.read_text()
            text = text.replace("torch_accinte", package).replace("accinte", device)
            path.write_text(text.replace("Accinte", device.capitalize()))
    return target
# LITERALINCLUDE END: PORTING_RENAME


def check(device: str, package: str) -> str:
    """Imports the renamed backend and runs one computation on ``device``
    against the CPU; returns what it saw, raises if it differs."""
    import torch

    module = importlib.import_module(package)
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    on_device = x.to(device)
    result = (on_device * 2 + 1).relu().sum(dim=0)
    assert result.device.type == device, result.device
    torch.testing.assert_close(result.cpu(), (x * 2 + 1).relu().sum(dim=0))
    count = getattr(torch, device).device_count()
    return (f"{module.__name__} from {Path(module.__file__).parent}: "
            f"{count} {device} device(s), {result.device} matches the CPU")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", type=Path,
                        help="a stage's Python tree, build/stageNN/python")
    parser.add_argument("target", nargs="?", type=Path, help="where the copy goes (new)")
    parser.add_argument("--device", required=True, help="the new device name, e.g. mydev")
    parser.add_argument("--package", help="the new package name (default torch_DEVICE)")
    parser.add_argument("--check", action="store_true",
                        help="import the renamed backend (on PYTHONPATH) and run it")
    args = parser.parse_args(argv)
    if not DEVICE_NAME.match(args.device) or args.device == "accinte":
        parser.error(f"--device {args.device!r}: a lowercase identifier other than accinte")
    package = args.package or f"torch_{args.device}"
    if args.check:
        print(check(args.device, package))
        return 0
    if args.source is None or args.target is None:
        parser.error("give the stage's Python tree and the target, or --check")
    if not (args.source / "torch_accinte").is_dir():
        parser.error(f"{args.source} holds no torch_accinte package (run `make stage`)")
    if args.target.exists():
        parser.error(f"{args.target} exists")
    rename(args.source, args.target, args.device, package)
    print(f"{args.target}: package {package}, device {args.device}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
