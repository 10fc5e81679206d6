# stage: 16
"""The conformance page's table: every mechanism of the kit against every
stage.

Prints Markdown (the page includes it as Markdown). Each cell is what the
stage contract says of that stage and that mechanism's checks: a check
passes on stage NN exactly when its chapter is <= NN. The contract is what
``--expect-stage NN`` holds each run to; here each report that a run of
``make conformance`` or ``make test-conformance`` left in build/conformance/
is compared with its column too, and a difference fails this script (and
so ``make outputs-check``). A report of another version of the kit (other
checks) is left out, since the next run replaces it.
"""

import json
import pathlib
import sys

from torch_accinte import conformance

ROOT = pathlib.Path(__file__).resolve().parents[2]
REPORTS = ROOT / "build" / "conformance"

stages = sorted(path.name[:2] for path in ROOT.glob("chapters/[0-9][0-9]_*")
                if (path / "CMakeLists.txt").exists())
plan = conformance._plan(conformance._discover(None))
ids = [entry["id"] for entry in plan]


def passes(entry: dict, stage: str) -> bool:
    """The stage contract: does ``entry`` pass on ``stage``?"""
    return int(entry["chapter"]) <= int(stage)


def cell(entries: list, stage: str) -> str:
    passed = sum(passes(entry, stage) for entry in entries)
    if passed == len(entries):
        return "pass"
    return "fail" if passed == 0 else f"{passed}/{len(entries)}"


compared = []
for stage in stages:
    report = REPORTS / f"{stage}.json"
    if not report.exists():
        continue
    checks = json.loads(report.read_text())["checks"]
    if [check["id"] for check in checks] != ids:
        print(f"{report}: another version of the kit's checks, left out", file=sys.stderr)
        continue
    for check in checks:
        expected = "passed" if passes(check, stage) else "failed"
        # NB: a check may skip where it should pass (it says why: one CPU, no
        # second device); --expect-stage tolerates that too.
        # NB: and a check of a later chapter may be blocked by a check that
        # failed there (what it needs is missing too); --expect-stage agrees.
        if check["status"] != expected and not (expected == "passed"
                                                and check["status"] == "skipped") \
                and not (expected == "failed" and check["status"] == "blocked"):
            sys.exit(f"{report}: {check['id']} {check['status']}, the stage contract "
                     f"says {expected}: run `make conformance` and read the report")
    compared.append(stage)
print(f"checked against the reports of stages {', '.join(compared) or 'none'}",
      file=sys.stderr)

sections = {}
for entry in plan:
    sections.setdefault(entry["section"], []).append(entry)

print("| Chapter | Mechanism | Checks | " + " | ".join(stages) + " |")
print("| --- | --- | --- | " + " | ".join("---" for _ in stages) + " |")
for name, entries in sections.items():
    first = entries[0]
    print(f"| {first['section_chapter']} | {first['title']} | {len(entries)} | "
          + " | ".join(cell(entries, stage) for stage in stages) + " |")
print(f"\n{len(plan)} checks in {len(sections)} sections. A cell `k/n`: k of the "
      "section's n checks pass on that stage, those whose mechanism an earlier "
      "chapter already provides.")
