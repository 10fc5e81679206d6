"""Profiles one training step of a small MLP on accinte, as a user would.

Run as is, it prints what does not change from run to run: which device
activities each operator launched and which rows of the trace they are on.
With ``--snapshot FILE`` it also writes the profile's ``key_averages`` table
and a trimmed copy of its Chrome trace to FILE (JSON); ``timeline_svg.py``
and ``profile_table.py`` draw the page's picture and table from the
committed snapshot, ``trace_snapshot.json``, because the times differ from
run to run. ``make profile-snapshot`` takes a new one.
"""

import argparse
import collections
import json
import pathlib
import tempfile

import torch
import torch_accinte  # noqa: F401
from torch.profiler import ProfilerActivity, profile, record_function

#: What the timeline keeps of a trace: the operators, the ranges and the
#: device's activities, not Python frames or profiler overhead.
KEPT_CATEGORIES = ("cpu_op", "user_annotation", "kernel", "gpu_memcpy", "gpu_memset",
                   "gpu_user_annotation", "privateuse1_runtime")


def profiled_step():
    """One warm training step of a two-layer MLP, profiled."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10)).to("accinte")
    optimizer = torch.optim.AdamW(model.parameters())
    inputs, labels = torch.randn(64, 256), torch.randint(0, 10, (64,))

    def step():
        x, y = inputs.to("accinte"), labels.to("accinte")
        with record_function("forward"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            optimizer.step()
            optimizer.zero_grad()
        return loss.item()

    step()  # warm: the optimizer's state and the allocator's cache exist
    with profile(activities=[ProfilerActivity.CPU,
                             ProfilerActivity.PrivateUse1]) as prof:
        step()
    return prof


def chrome_trace(prof) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return json.loads(path.read_text())


def snapshot(prof, trace: dict, path: pathlib.Path) -> None:
    events = [
        {key: event[key] for key in ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args")
         if key in event}
        for event in trace["traceEvents"]
        if event.get("cat") in KEPT_CATEGORIES
        or (event.get("ph") == "M" and event.get("name") in ("process_name", "thread_name"))
    ]
    for event in events:
        event.get("args", {}).pop("Python id", None)
    header = json.dumps({
        "torch": torch.__version__,
        "table": prof.key_averages().table(sort_by="self_device_time_total", row_limit=12,
                                           max_name_column_width=36),
    })
    # NB: one event per line, so that a new snapshot reads as a diff.
    lines = ",\n".join(json.dumps(event, sort_keys=True) for event in events)
    path.write_text(f'{header[:-1]}, "traceEvents": [\n{lines}\n]}}\n')


def describe(trace: dict) -> None:
    trace = trace["traceEvents"]
    ops = {event["args"]["External id"]: event["name"] for event in trace
           if event.get("cat") == "cpu_op" and "External id" in event.get("args", {})}
    launched = collections.defaultdict(collections.Counter)
    unlinked = 0
    rows = set()
    for event in trace:
        if event.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        op = ops.get(event["args"].get("External id"))
        if op is None:
            unlinked += 1
            continue
        launched[op][event["name"]] += 1
        rows.add(event["pid"])
    print("device activities of one training step, by the operator that launched them:")
    for op in sorted(launched):
        work = ", ".join(f"{name} x{count}" if count > 1 else name
                         for name, count in sorted(launched[op].items()))
        print(f"  {op:<32} {work}")
    print(f"activities with no operator: {unlinked}")
    print(f"device rows: {sorted(f'accinte {device}' for device in rows)}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--snapshot", type=pathlib.Path)
    args = parser.parse_args()
    prof = profiled_step()
    trace = chrome_trace(prof)  # NB: a profile exports its trace only once
    describe(trace)
    if args.snapshot:
        snapshot(prof, trace, args.snapshot)


if __name__ == "__main__":
    main()
