"""Chapter 13: compiled code keeps the device's semantics.

Its kernels are launched on the current stream of the tensors' device and
return at once, as eager kernels do; streams, events and device calls in a
compiled function are traced into its graph; a failing kernel is reported
at the next synchronize; random operators draw from accinte's generator.
"""

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from compiling import (  # noqa: F401
    GATE_TIMEOUT, assert_three_way, fresh_dynamo, graph_breaks, seeded)
from torch_accinte import _C


def test_kernels_are_device_kernels_named_by_inductor(accinte):
    compiled = torch.compile(lambda x: (x.sin() * 2).sum(-1))
    x = torch.randn(8, 16)
    compiled(x.to(accinte))  # compiles outside the profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        result = compiled(x.to(accinte))
        torch.accinte.synchronize()
    torch.testing.assert_close(result.cpu(), (x.sin() * 2).sum(-1))
    kernels = [e for e in prof.profiler.kineto_results.events()
               if e.device_type() == DeviceType.PrivateUse1 and e.activity_type() == "kernel"]
    names = [e.name() for e in kernels]
    assert [name for name in names if name.startswith("cpp_fused_")] == names, names
    assert len(names) == 1 and "sin" in names[0]


def test_launch_is_queued_on_the_current_stream(accinte):
    def scale_into(x, out):
        out.copy_(x.sin() * 2)

    compiled = torch.compile(scale_into)
    x = torch.randn(64)
    out = torch.full((64,), 99.0, device=accinte)
    compiled(x.to(accinte), torch.empty(64, device=accinte))  # compiles outside the gate
    source = x.to(accinte)
    torch.accinte.synchronize()
    stream = torch.accinte.Stream()
    with torch.accinte.stream(stream):
        gate = _C._testing.StreamGate(0, timeout_seconds=GATE_TIMEOUT)
        compiled(source, out)  # returns at once: the kernel waits behind the gate
    try:
        assert not stream.query()
        # Read on the default stream, which the gate does not hold.
        torch.testing.assert_close(out.cpu(), torch.full((64,), 99.0))
    finally:
        gate.open()
    stream.synchronize()
    torch.testing.assert_close(out.cpu(), x.sin() * 2)


def test_cpu_scalar_tensor_is_read_at_the_launch(accinte):
    # A one-element CPU tensor beside device tensors is passed by value: the
    # kernel runs later, and the host may change the tensor before it does.
    compiled = torch.compile(lambda x, scale: x * scale + 1)
    x = torch.arange(6.0)
    scale = torch.tensor(2.0)
    compiled(x.to(accinte), scale)  # compiles outside the gate
    source = x.to(accinte)
    torch.accinte.synchronize()
    gate = _C._testing.StreamGate(0, timeout_seconds=GATE_TIMEOUT)
    try:
        result = compiled(source, scale)
        assert not torch.accinte.current_stream().query()
        scale.fill_(5.0)
    finally:
        gate.open()
    torch.testing.assert_close(result.cpu(), x * 2 + 1)


def test_streams_events_and_device_calls_are_traced(accinte):
    side = torch.accinte.Stream()
    done = torch.accinte.Event()

    def fn(x):
        y = x * 2
        side.wait_stream(torch.accinte.current_stream())
        with torch.accinte.stream(side):
            z = y.sin() + 1
        done.record(side)
        torch.accinte.current_stream().wait_event(done)
        return z * (torch.accinte.current_device() + 3)

    x = torch.randn(32)
    assert graph_breaks(fn, x.to(accinte)) == 0
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        result = torch.compile(fn)(x.to(accinte))
        torch.accinte.synchronize()
    assert_three_way(result, fn(x.to(accinte)), (x * 2).sin().add(1).mul(3))
    # The stream context's kernel ran on the side stream: a row of its own.
    rows = {e.name(): e.device_resource_id() for e in prof.profiler.kineto_results.events()
            if e.device_type() == DeviceType.PrivateUse1 and e.activity_type() == "kernel"}
    (inside,) = [row for name, row in rows.items() if "sin" in name]
    outside = {row for name, row in rows.items() if "sin" not in name}
    assert outside and inside not in outside


def test_accelerator_calls_are_traced(accinte):
    def fn(x):
        index = torch.accelerator.current_device_index()
        stream = torch.accelerator.current_stream()
        # NB: each count once: a second call of any device_count breaks the
        # graph, torch.cuda's as well.
        count = torch.accelerator.device_count()
        available = torch.accinte.is_available()
        return x * (index + count + available) + stream.device_index

    x = torch.randn(8)
    assert graph_breaks(fn, x.to(accinte)) == 0
    assert_three_way(torch.compile(fn)(x.to(accinte)), fn(x.to(accinte)), x * 3)


def test_device_count_is_a_constant_of_the_graph(accinte):
    # torch.cuda.device_count() fails under fullgraph=True on torch 2.13 (an
    # operator that returns no tensor); accinte's polyfill takes the count,
    # fixed for the process, as a constant when Dynamo traces.
    def fn(x):
        return x * torch.accinte.device_count() + torch.accinte.device_count()

    x = torch.randn(8)
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True)(x.to(accinte))
    assert_three_way(compiled, fn(x.to(accinte)), x * 2 + 2)
    assert graph_breaks(fn, x.to(accinte)) == 0


def test_synchronize_in_a_compiled_function(accinte):
    # It breaks the graph on purpose (torch_accinte/dynamo.py): the kernels
    # before it must have run when it returns.
    def fn(x):
        y = x.cos() * 3
        torch.accinte.synchronize()
        return y + 1

    x = torch.randn(16)
    assert_three_way(torch.compile(fn)(x.to(accinte)), fn(x.to(accinte)), x.cos() * 3 + 1)
    # One break, the polyfill's, whose message names the call (not a
    # pybind11 function Dynamo cannot trace).
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(fn)(x.to(accinte))
    assert explanation.graph_break_count == 1
    assert "torch.accinte.synchronize()" in str(explanation.break_reasons[0])


def test_a_failing_kernel_is_reported_at_synchronize(accinte):
    compiled = torch.compile(lambda x, i: x[i] * 2)
    x = torch.arange(10.0, device=accinte)
    compiled(x, torch.tensor([12, 1], device=accinte))  # returns: the kernel is queued
    with pytest.raises(torch.AcceleratorError, match="index out of bounds"):
        torch.accinte.synchronize()
    torch.accinte.synchronize()  # reported once
    result = compiled(x, torch.tensor([9, 1], device=accinte))
    torch.testing.assert_close(result.cpu(), torch.tensor([18.0, 2.0]))


def test_compiling_on_the_second_device_while_the_first_is_current():
    def fn(x, y):
        return (x @ y).relu() + x.sum()

    x, y = torch.randn(5, 7), torch.randn(7, 3)
    on_one = [t.to("accinte:1") for t in (x, y)]
    result = torch.compile(fn)(*on_one)
    assert result.device == torch.device("accinte:1")
    assert torch.accinte.current_device() == 0
    assert_three_way(result, fn(*on_one), fn(x, y))


def test_random_operators_draw_from_the_accinte_generator(accinte):
    def fn(x):
        return torch.rand_like(x), torch.nn.functional.dropout(x, p=0.3, training=True)

    compiled = torch.compile(fn)
    x = torch.ones(4096, device=accinte)
    with seeded(0):
        torch.accinte.manual_seed(1)
        first = [t.cpu() for t in compiled(x)]
        again = [t.cpu() for t in compiled(x)]
        torch.accinte.manual_seed(1)
        torch.random.default_generator.manual_seed(1234)  # the CPU's alone
        repeated = [t.cpu() for t in compiled(x)]
        torch.accinte.manual_seed(2)
        reseeded = [t.cpu() for t in compiled(x)]
    for a, b in zip(first, repeated):
        assert torch.equal(a, b)
    for a, b in zip(first, again):
        assert not torch.equal(a, b)
    for a, b in zip(first, reseeded):
        assert not torch.equal(a, b)
    uniform, dropped = first
    assert 0.0 <= uniform.min() and uniform.max() < 1.0
    assert abs(uniform.mean().item() - 0.5) < 0.03
    torch.testing.assert_close(dropped[dropped != 0],
                               torch.full_like(dropped[dropped != 0], 1 / 0.7))
    assert abs((dropped == 0).float().mean().item() - 0.3) < 0.03
