#!/usr/bin/env python3
"""Runs every chapter's output scripts and stores what they print.

The guide never shows typed output: each ``chapters/NN_name/output/X.py`` is
run against stage NN (``build/stageNN/python``) and its standard output is
written to ``X.txt`` beside it, which the chapter's page includes. With
``--check`` nothing is written; the run fails if a stored output differs from
a fresh one, so the pages cannot drift from the code.
"""

import argparse
import difflib
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run_script(script: pathlib.Path) -> str:
    stage = script.parent.parent.name.split("_")[0]
    stage_python = ROOT / "build" / f"stage{stage}" / "python"
    if not stage_python.is_dir():
        sys.exit(f"{script}: stage {stage} is not built (run `make build`)")
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(stage_python),
        ACCINTE_DEVICE_COUNT="2",
        ACCINTE_DEVICE_MEMORY="8G",
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )
    result = subprocess.run(
        [sys.executable, script.name], cwd=script.parent, env=env,
        capture_output=True, text=True, timeout=300,
    )
    if result.returncode != 0:
        sys.exit(f"{script} failed:\n{result.stderr}")
    return result.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="fail if a stored output is out of date")
    args = parser.parse_args()
    stale = 0
    scripts = sorted(ROOT.glob("chapters/[0-9][0-9]_*/output/*.py"))
    for script in scripts:
        stored = script.with_suffix(".txt")
        fresh = run_script(script)
        if args.check:
            old = stored.read_text() if stored.exists() else ""
            if old != fresh:
                stale += 1
                print(f"{stored.relative_to(ROOT)} is out of date "
                      "(run `make outputs`):")
                sys.stdout.writelines(difflib.unified_diff(
                    old.splitlines(True), fresh.splitlines(True),
                    "stored", "fresh"))
        else:
            stored.write_text(fresh)
            print(f"wrote {stored.relative_to(ROOT)}")
    if args.check:
        print(f"{len(scripts) - stale} passed, {stale} failed: example outputs")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
