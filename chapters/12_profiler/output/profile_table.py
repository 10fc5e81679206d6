"""The ``key_averages`` table of the profiled training step.

A profile's times differ from run to run, so the table is the one stored in
``trace_snapshot.json`` by ``profile_step.py --snapshot`` (``make
profile-snapshot``), with the PyTorch release it was taken with.
"""

import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent


def main() -> None:
    snapshot = json.loads((HERE / "trace_snapshot.json").read_text())
    print(f"# prof.key_averages().table(sort_by=\"self_device_time_total\", row_limit=12)")
    print(f"# torch {snapshot['torch']}, one training step of profile_step.py")
    print(snapshot["table"].rstrip())


if __name__ == "__main__":
    main()
