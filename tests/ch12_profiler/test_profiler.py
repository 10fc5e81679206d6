"""Chapter 12: accinte's device activities in ``torch.profiler``.

Each test profiles real work and reads the profile the way a user does
(``key_averages``, the exported Chrome trace) or the way PyTorch's own
post-processing does (the Kineto events with their correlation ids).
"""

import json
import pathlib
import time

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from conftest import load_file, run_python

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def device_events(prof):
    """The Kineto events of the device: kernels, copies, memsets, ranges."""
    return [event for event in prof.profiler.kineto_results.events()
            if event.device_type() == DeviceType.PrivateUse1]


def trace_events(prof, tmp_path):
    """The events of the profile's exported Chrome trace."""
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text())["traceEvents"]


def test_privateuse1_is_a_supported_activity():
    assert ProfilerActivity.PrivateUse1 in torch.profiler.supported_activities()


def test_device_time_of_a_matmul_loop(accinte):
    a = torch.randn(256, 256, device=accinte)
    b = torch.randn(256, 256, device=accinte)
    torch.accinte.synchronize()
    started = time.perf_counter_ns()
    with profile(activities=ACTIVITIES) as prof:
        for _ in range(10):
            a = a @ b / 16
        torch.accinte.synchronize()
    wall = time.perf_counter_ns() - started
    kernels = [e for e in device_events(prof) if e.activity_type() == "kernel"]
    assert len(kernels) >= 10
    kernel_time = sum(e.duration_ns() for e in kernels)
    # One stream runs one kernel at a time, so its kernels' time fits in the
    # profile's wall time; and a 256x256 matmul takes measurable time.
    assert 0 < kernel_time <= wall
    mm = {e.key: e for e in prof.key_averages()}["aten::mm"]
    assert mm.count == 10
    assert mm.self_device_time_total > 0
    table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=5)
    assert "aten::mm" in table and "Self ACCINTE" in table


def test_every_device_activity_is_linked_to_the_op_that_launched_it(accinte):
    x = torch.randn(1000, device=accinte)
    with profile(activities=ACTIVITIES) as prof:
        y = (x * 2).exp().sum()
        y.cpu()
        torch.accinte.synchronize()
    cpu_ops = {e.correlation_id(): e for e in prof.profiler.kineto_results.events()
               if e.activity_type() == "cpu_op"}
    device = device_events(prof)
    assert device
    for event in device:
        op = cpu_ops.get(event.linked_correlation_id())
        assert op is not None, f"{event.name()} has no CPU op"
        # NB: the op started before its work did, on one (Unix) clock; the
        # two sides convert their own clocks to it, each within a few
        # microseconds, so an error of the conversion (seconds, days) shows.
        assert op.start_ns() <= event.start_ns() + 50_000
    names = {e.name() for e in device}
    assert {"aten::mul kernel", "aten::exp kernel", "aten::sum kernel"} <= names


def test_kernels_are_named_after_their_operators(accinte):
    x = torch.randn(64, device=accinte)
    with profile(activities=ACTIVITIES) as prof:
        torch.randn(64, device=accinte)                 # chapter 08
        torch.nn.functional.relu(x)                     # chapter 09 or fallback
        torch.add(x, x)
        torch.accinte.synchronize()
    names = {e.name() for e in device_events(prof) if e.activity_type() == "kernel"}
    assert "kernel" not in names
    assert {"aten::normal_ kernel", "aten::add kernel"} <= names
    assert any(name in ("aten::relu kernel", "aten::clamp_min kernel") for name in names)


def test_copies_carry_their_bytes_and_directions(accinte, tmp_path):
    host = torch.arange(4096, dtype=torch.float32)
    with profile(activities=ACTIVITIES) as prof:
        on_device = host.to(accinte)
        copied = on_device.clone()
        back = copied.cpu()
        torch.accinte.synchronize()
    assert torch.equal(back, host)
    copies = [e for e in trace_events(prof, tmp_path) if e.get("cat") == "gpu_memcpy"]
    by_direction = {}
    for event in copies:
        by_direction.setdefault(event["name"].split()[1], []).append(event)
    assert set(by_direction) >= {"HtoD", "DtoH"}
    for direction in ("HtoD", "DtoH"):
        (event,) = by_direction[direction]
        assert event["args"]["bytes"] == host.nbytes
        assert event["pid"] == 0
    assert by_direction["HtoD"][0]["args"]["src device"] == -1
    assert by_direction["DtoH"][0]["args"]["dst device"] == -1


def test_two_devices_and_two_streams_have_rows_of_their_own(tmp_path):
    first = torch.ones(256, device="accinte:0")
    second = torch.ones(256, device="accinte:1")
    side = torch.accinte.Stream(device="accinte:1")
    torch.accinte.synchronize(0)
    torch.accinte.synchronize(1)
    with profile(activities=ACTIVITIES) as prof:
        first.mul_(2)
        with torch.accinte.device(1):
            second.add_(1)
            side.wait_stream(torch.accinte.current_stream())
            with torch.accinte.stream(side):
                second.sub_(3)
            torch.accinte.current_stream().wait_stream(side)
        torch.accinte.synchronize(0)
        torch.accinte.synchronize(1)
    second.record_stream(side)
    events = trace_events(prof, tmp_path)
    kernels = {e["name"]: e for e in events if e.get("cat") == "kernel"}
    mul, add, sub = (kernels[f"aten::{op}_ kernel"] for op in ("mul", "add", "sub"))
    assert mul["pid"] == 0 and add["pid"] == 1 and sub["pid"] == 1
    assert add["tid"] != sub["tid"]
    assert sub["args"]["device"] == 1
    # The rows are named: one process per device, one thread per stream.
    # NB: Kineto also names processes 0-15 after the host process (as it
    # does for CUDA's GPU rows); the device's own name is there as well.
    processes = {(e["pid"], e["args"]["name"]) for e in events
                 if e.get("ph") == "M" and e["name"] == "process_name"}
    assert {(0, "accinte 0"), (1, "accinte 1")} <= processes
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert threads[(1, add["tid"])].endswith("(default)")
    assert threads[(1, sub["tid"])] == f"stream {sub['tid']}"
    assert torch.equal(second.cpu(), torch.full((256,), -1.0))


def test_record_function_ranges_appear_on_the_device(accinte, tmp_path):
    x = torch.randn(128, 128, device=accinte)
    with profile(activities=ACTIVITIES) as prof:
        with record_function("my_step"):
            y = x @ x
            y = y.relu()
        torch.accinte.synchronize()
    events = trace_events(prof, tmp_path)
    ranges = [e for e in events if e.get("cat") == "gpu_user_annotation"]
    assert [r["name"] for r in ranges] == ["my_step"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    (step,) = ranges
    for kernel in kernels:
        assert step["ts"] <= kernel["ts"] + 1e-3
        assert kernel["ts"] + kernel["dur"] <= step["ts"] + step["dur"] + 1e-3
    averages = {e.key: e for e in prof.key_averages()}
    assert averages["my_step"].device_time_total > 0


def test_runtime_calls_are_on_the_host_thread_rows(accinte, tmp_path):
    x = torch.randn(64, device=accinte)
    with profile(activities=ACTIVITIES) as prof:
        (x + 1).cpu()
    events = trace_events(prof, tmp_path)
    runtime = [e for e in events if e.get("cat") == "privateuse1_runtime"]
    names = {e["name"] for e in runtime}
    assert "accinteLaunchKernel" in names
    kernel = next(e for e in events if e.get("cat") == "kernel")
    launch = next(e for e in runtime if e["name"] == "accinteLaunchKernel"
                  and e["args"]["correlation"] == kernel["args"]["correlation"])
    assert launch["ts"] <= kernel["ts"] + 1e-3
    assert launch["pid"] != kernel["pid"]


def test_schedule_and_tensorboard_trace_handler(accinte, tmp_path):
    x = torch.randn(64, 64, device=accinte)
    handler = torch.profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w")
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    with profile(activities=ACTIVITIES, schedule=schedule, on_trace_ready=handler) as prof:
        for step in range(6):
            with record_function(f"step {step}"):
                x = x @ x / 64
            torch.accinte.synchronize()
            prof.step()
    (trace,) = list(tmp_path.glob("w.*.pt.trace.json"))
    events = json.loads(trace.read_text())["traceEvents"]
    steps = {e["name"] for e in events if e.get("cat") == "gpu_user_annotation"}
    # Only the two active steps are recorded, with their device work.
    assert steps == {"step 2", "step 3"}
    assert sum(e.get("cat") == "kernel" for e in events) == 4


def test_profile_memory_with_the_device_activities(accinte):
    # Chapter 07's reports and this chapter's activities in one profile.
    with profile(activities=ACTIVITIES, profile_memory=True) as prof:
        x = torch.ones(1 << 20, device=accinte)
        del x
        torch.accinte.synchronize()
    averages = {e.key: e for e in prof.key_averages()}
    assert averages["aten::empty"].device_memory_usage == 4 << 20
    assert averages["aten::fill_"].self_device_time_total > 0
    freed = [e.device_memory_usage for e in prof.events() if e.name == "[memory]"]
    assert freed == [-(4 << 20)]


def test_an_asynchronous_failure_is_left_to_the_user(accinte):
    # The session never synchronizes, so a failure of the profiled work is
    # reported once, by the user's own synchronize, not lost in the profiler.
    logits = torch.randn(4, 3, device=accinte)
    target = torch.tensor([0, 1, 2, 7], device=accinte)
    with pytest.raises(Exception, match="out of bounds|Target 7"):
        with profile(activities=ACTIVITIES):
            torch.nn.functional.nll_loss(logits, target)
            torch.accinte.synchronize()
    torch.accinte.synchronize()


def test_nothing_is_traced_outside_a_profile(accinte):
    x = torch.randn(64, device=accinte)
    with profile(activities=ACTIVITIES):
        pass
    (x + 1).cpu()
    with profile(activities=ACTIVITIES) as prof:
        torch.accinte.synchronize()
    assert device_events(prof) == []


def test_compiled_code_is_profiled(accinte):
    @torch.compile(backend="aot_eager")
    def step(x):
        return (x * 2).relu().sum()

    x = torch.randn(256, device=accinte)
    step(x)
    with profile(activities=ACTIVITIES) as prof:
        step(x).cpu()
    names = {e.name() for e in device_events(prof)}
    assert {"aten::mul kernel", "aten::sum kernel"} <= names


def test_profiler_works_with_autoload_alone():
    result = run_python("""
        import torch
        from torch.profiler import profile, ProfilerActivity
        x = torch.ones(8, device="accinte")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            (x * 3).cpu()
        names = {e.name() for e in prof.profiler.kineto_results.events()
                 if e.device_type() == torch.autograd.DeviceType.PrivateUse1}
        print(sorted(names))
    """)
    assert result.returncode == 0, result.stderr
    assert "aten::mul kernel" in result.stdout and "Memcpy DtoH" in result.stdout


def test_a_ddp_training_step_is_profiled_on_each_rank(tmp_path):
    # NB: chapter 11's way of starting ranks, loaded from its test folder.
    ranks = load_file(pathlib.Path(__file__).parents[1] / "ch11_distributed" / "ranks.py")
    worker = pathlib.Path(__file__).with_name("ddp_worker.py")
    ranks.assert_ok("ddp_step", ranks.run_ranks(worker, "ddp_step", tmp_path, 2, 120))


def load_output_script(name):
    """A script of the chapter's output/ folder, as a module."""
    return load_file(pathlib.Path(__file__).parents[2] / "chapters" / "12_profiler" / "output"
                     / f"{name}.py")


def test_the_page_snapshot_matches_what_the_code_produces(tmp_path):
    # The page's table and timeline come from a stored profile: a fresh
    # profile of the same step must launch the same kinds of device work,
    # with the same names, and draw.
    step = load_output_script("profile_step")
    with torch.random.fork_rng(devices=[0], device_type="accinte"):
        fresh = step.chrome_trace(step.profiled_step())["traceEvents"]
    stored = json.loads((pathlib.Path(step.__file__).parent / "trace_snapshot.json")
                        .read_text())["traceEvents"]

    def device_work(events):
        return {(e["cat"], e["name"]) for e in events
                if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")}

    assert device_work(fresh) == device_work(stored)
    svg = load_output_script("timeline_svg").draw(fresh)
    assert svg.startswith("<svg") and "stream" in svg and "aten::addmm" in svg


def test_a_profile_longer_than_the_runtime_buffer_loses_nothing(accinte):
    # 34,000 launches make 68,000 records (a launch and its kernel), more
    # than the runtime's default buffer holds: the session empties it while
    # the profile records.
    x = torch.zeros(4, device=accinte)
    with profile(activities=ACTIVITIES) as prof:
        for _ in range(34_000):
            x.add_(1)
        torch.accinte.synchronize()
    kernels = [e for e in device_events(prof) if e.activity_type() == "kernel"]
    assert len(kernels) == 34_000
    assert torch.equal(x.cpu(), torch.full((4,), 34_000.0))


def test_dropped_activities_are_reported():
    result = run_python("""
        import torch
        from torch.profiler import profile, ProfilerActivity
        x = torch.zeros(4, device="accinte")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
            for _ in range(5000):
                x.add_(1)
            torch.accinte.synchronize()
    """, env={"ACCINTE_PROFILER_BUFFER_RECORDS": "10"})
    assert result.returncode == 0, result.stderr
    assert "device activities were dropped" in result.stderr
    assert "ACCINTE_PROFILER_BUFFER_RECORDS higher" in result.stderr


def test_a_bad_buffer_size_is_named_and_the_default_used():
    result = run_python("""
        import torch
        from torch.profiler import profile, ProfilerActivity
        x = torch.zeros(4, device="accinte")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            x.add_(1).cpu()
        print(sum(e.activity_type() == "kernel" for e in prof.profiler.kineto_results.events()))
    """, env={"ACCINTE_PROFILER_BUFFER_RECORDS": "lots"})
    assert result.returncode == 0, result.stderr
    assert "ACCINTE_PROFILER_BUFFER_RECORDS must be a number of records" in result.stderr
    assert "got 'lots'" in result.stderr
    assert result.stdout.split()[-1] == "1"


def test_the_profiler_without_kineto_times_operators_with_device_events(accinte):
    # use_kineto=False: PyTorch records a device event on the current
    # stream as each operator starts and ends (the PrivateUse1 profiler
    # stubs), as CUDA's legacy profiler does with CUDA events.
    a = torch.randn(256, 256, device=accinte)
    torch.accinte.synchronize()
    with torch.autograd.profiler.profile(use_device="accinte", use_kineto=False) as prof:
        for _ in range(3):
            a = a @ a / 256
        torch.accinte.synchronize()
    mm = {e.key: e for e in prof.key_averages()}["aten::mm"]
    assert mm.count == 3
    assert mm.device_time_total > 0
    # NB: the events are timing only: a failure of the profiled work still
    # reaches the user's own synchronize (test_an_asynchronous_failure...).
