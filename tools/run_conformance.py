"""Runs the conformance kit shipped in each stage against that stage.

``python3 tools/run_conformance.py --build build --out build/conformance 01 04 14``
runs ``python -m torch_accinte.conformance --device accinte --package
torch_accinte --expect-stage NN --report OUT/NN.md`` with stage NN on the
path, for each stage given, one after the other, in the hermetic interpreter
(tools/hermetic_python.py: an installed torch_accinte must not be what the
autoload section finds). Prints each stage's verdict and seconds; exits
non-zero if any stage breaks the stage contract (each mismatch is listed in
that stage's output).
"""

import argparse
import os
import pathlib
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import hermetic_python  # noqa: E402


def run_stage(python: str, build: pathlib.Path, out: pathlib.Path, stage: str) -> tuple:
    """Runs the kit against stage ``stage``; returns (exit status, seconds)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(build / f"stage{stage}" / "python")
    # NB: two devices, so that the guard and cross-device checks run.
    env.setdefault("ACCINTE_DEVICE_COUNT", "2")
    argv = [python, "-m", "torch_accinte.conformance", "--device", "accinte",
            "--package", "torch_accinte", "--expect-stage", stage,
            "--report", str(out / f"{stage}.md")]
    began = time.monotonic()
    # NB: run from the report folder, so that no conformance/ of the
    # repository's root shadows the copy the stage ships.
    status = subprocess.run(argv, env=env, cwd=out).returncode
    return status, time.monotonic() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build", help="the folder of the stage trees")
    parser.add_argument("--out", default="build/conformance", help="where the reports go")
    parser.add_argument("stages", nargs="+", help="stage numbers (NN)")
    args = parser.parse_args()
    build = pathlib.Path(args.build).resolve()
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    python = hermetic_python.python()
    summary = []
    for stage in args.stages:
        print(f"== the conformance kit against stage {stage}", flush=True)
        status, seconds = run_stage(python, build, out, stage)
        summary.append((stage, status, seconds))
    print("== conformance: stage, stage contract, seconds")
    for stage, status, seconds in summary:
        print(f"   {stage}  {'holds' if status == 0 else 'BROKEN'}  {seconds:6.1f}")
    return 1 if any(status for _, status, _ in summary) else 0


if __name__ == "__main__":
    sys.exit(main())
