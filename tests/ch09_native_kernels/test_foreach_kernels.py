"""Chapter 09: the optimizers' multi-tensor operators (``_foreach_*``) and
fused steps (``_fused_adam_``, ``_fused_adamw_``, ``_fused_sgd_``) compute
what the CPU computes, without the CPU fallback, one launch per list where
CUDA takes its fast route, and refuse bad lists on the host.
"""

import pytest
import torch
from torch import nn

from conftest import stage_has


def sample(*shape, dtype=torch.float32, seed=0, low=-3.0, high=3.0):
    generator = torch.Generator().manual_seed(seed)
    values = torch.rand(shape, generator=generator, dtype=torch.float64)
    return (values * (high - low) + low).to(dtype)


# Parameters of several shapes, as a model has: a matrix, a vector, a
# scalar, an empty one.
SHAPES = [(5, 4), (4,), (), (3, 2, 2), (0, 3)]


def tensors(seed, dtype=torch.float32, low=-3.0, high=3.0):
    return [sample(*shape, dtype=dtype, seed=seed + index, low=low, high=high)
            for index, shape in enumerate(SHAPES)]


def to_device(values, device="accinte"):
    if isinstance(values, torch.Tensor):
        return values.to(device)
    if isinstance(values, (list, tuple)):
        return type(values)(to_device(value, device) for value in values)
    return values


def assert_same(expected, result):
    if isinstance(expected, (list, tuple)):
        assert len(expected) == len(result)
        for e, r in zip(expected, result):
            assert_same(e, r)
        return
    if not isinstance(expected, torch.Tensor):
        assert expected == result
        return
    assert result.device.type == "accinte"
    assert result.dtype == expected.dtype
    torch.testing.assert_close(result.cpu(), expected)


def run_both(function, *lists):
    """``function`` on CPU lists and on accinte copies of them, with no
    fallback on the device side; returns (cpu result, cpu lists, device
    result, device lists)."""
    on_cpu = [[t.clone() for t in values] if isinstance(values, list) else values
              for values in lists]
    on_device = to_device(list(lists))
    expected = function(*on_cpu)
    with torch.accinte.record_fallbacks() as record:
        result = function(*on_device)
    assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    return expected, on_cpu, result, on_device


a, b, c = tensors(0), tensors(10), tensors(20)
positive = tensors(30, low=0.1, high=4.0)
weights = tensors(40, low=0.0, high=1.0)

# Every operator of the kernel table, as the optimizers call it. Each case
# takes (self, other, third) lists and returns what the operator returns.
CASES = {
    "add_.List": lambda x, y, z: torch._foreach_add_(x, y, alpha=0.5),
    "add_.Scalar": lambda x, y, z: torch._foreach_add_(x, 1.5),
    "add_.ScalarList": lambda x, y, z: torch._foreach_add_(x, [0.5, 1, 2, -1, 3]),
    "add_.Tensor": lambda x, y, z: torch._foreach_add_(x, torch.tensor(2.0, device=x[0].device),
                                                       alpha=-1.0),
    "add_.Tensor on the CPU": lambda x, y, z: torch._foreach_add_(x, torch.tensor(2.0)),
    "add.List": lambda x, y, z: torch._foreach_add(x, y),
    "add.Scalar": lambda x, y, z: torch._foreach_add(x, 2.0),
    "sub_.List": lambda x, y, z: torch._foreach_sub_(x, y),
    "sub_.Scalar": lambda x, y, z: torch._foreach_sub_(x, 1.0),
    "mul_.List": lambda x, y, z: torch._foreach_mul_(x, y),
    "mul_.Scalar": lambda x, y, z: torch._foreach_mul_(x, 0.9),
    "mul_.ScalarList": lambda x, y, z: torch._foreach_mul_(x, [0.5, 1, 2, -1, 3]),
    "mul_.Tensor": lambda x, y, z: torch._foreach_mul_(x, torch.tensor(0.25, device=x[0].device)),
    "mul.Scalar": lambda x, y, z: torch._foreach_mul(x, 3.0),
    "div_.List": lambda x, y, z: torch._foreach_div_(x, z),
    "div_.Scalar": lambda x, y, z: torch._foreach_div_(x, 4.0),
    "div_.ScalarList": lambda x, y, z: torch._foreach_div_(x, [0.5, 1, 2, -1, 3]),
    "div_.Tensor": lambda x, y, z: torch._foreach_div_(x, torch.tensor(3.0, device=x[0].device)),
    "maximum_.List": lambda x, y, z: torch._foreach_maximum_(x, y),
    "addcmul_.Scalar": lambda x, y, z: torch._foreach_addcmul_(x, y, z, value=0.1),
    "addcmul_.ScalarList": lambda x, y, z: torch._foreach_addcmul_(x, y, z, [1, 2, 3, 4, 5]),
    "addcdiv_.Scalar": lambda x, y, z: torch._foreach_addcdiv_(x, y, z, value=-0.1),
    "addcdiv_.ScalarList": lambda x, y, z: torch._foreach_addcdiv_(x, y, z, [1, 2, 3, 4, 5]),
    "lerp_.Scalar": lambda x, y, z: torch._foreach_lerp_(x, y, 0.1),
    "lerp_.List": lambda x, y, z: torch._foreach_lerp_(x, y, [w.abs() / 4 for w in z]),
    "sqrt_": lambda x, y, z: torch._foreach_sqrt_(z),
    "sqrt": lambda x, y, z: torch._foreach_sqrt(z),
    "reciprocal_": lambda x, y, z: torch._foreach_reciprocal_(z),
    "neg_": lambda x, y, z: torch._foreach_neg_(x),
    "neg": lambda x, y, z: torch._foreach_neg(x),
    "pow.ScalarAndTensor": lambda x, y, z: torch._foreach_pow(0.9, y),
    "zero_": lambda x, y, z: torch._foreach_zero_(x),
    "norm.Scalar": lambda x, y, z: torch._foreach_norm(x),
    "norm.Scalar ord=1": lambda x, y, z: torch._foreach_norm(x, 1),
    "norm.Scalar ord=inf": lambda x, y, z: torch._foreach_norm(x[:-1], float("inf")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_foreach_operator_matches_the_cpu(case):
    expected, cpu_lists, result, device_lists = run_both(CASES[case], a, b, positive)
    if expected is not None:
        assert_same(expected, result)
    # The lists written in place, and the ones only read.
    assert_same(cpu_lists, device_lists)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_foreach_dtypes(dtype):
    def step(x, y, z):
        torch._foreach_mul_(x, 0.9)
        torch._foreach_addcmul_(x, y, z, value=0.1)
        return torch._foreach_sqrt(z)

    lists = [[t.to(dtype) for t in values] for values in (a, b, positive)]
    expected, cpu_lists, result, device_lists = run_both(step, *lists)
    assert_same(expected, result)
    assert_same(cpu_lists, device_lists)


SLOW_ROUTES = {
    # Each goes ATen's single-tensor way, as on CUDA; the results still match.
    "integral list, floating result": (
        lambda x, y: torch._foreach_div(x, 2),
        [torch.arange(6).reshape(2, 3), torch.arange(3)], None),
    "mixed dtypes": (
        lambda x, y: torch._foreach_add_(x, y),
        [torch.ones(2, 3), torch.ones(3, dtype=torch.float64)],
        [torch.ones(2, 3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)]),
    "a broadcast": (
        lambda x, y: torch._foreach_mul_(x, y),
        [sample(2, 3), sample(3)], [sample(3, seed=1), sample(1, seed=2)]),
    "a strided view": (
        lambda x, y: torch._foreach_add_(x, y),
        [sample(4, 6)[:, ::2], sample(3)], [sample(4, 3, seed=1), sample(3, seed=2)]),
    "a scalar that promotes": (
        lambda x, y: torch._foreach_add(x, 1.5),
        [torch.arange(6), torch.arange(3)], None),
}


@pytest.mark.parametrize("case", list(SLOW_ROUTES))
def test_lists_the_fast_route_does_not_take_match_the_cpu(case):
    function, x, y = SLOW_ROUTES[case]
    expected, cpu_lists, result, device_lists = run_both(function, x, y)
    if expected is not None:
        assert_same(expected, result)
    assert_same(cpu_lists, device_lists)


def test_a_list_over_two_devices_runs_tensor_by_tensor():
    # As CUDA's slow route: each tensor's operator on its own device.
    x = [sample(2, 3), sample(4, seed=1)]
    y = [sample(2, 3, seed=2), sample(4, seed=3)]
    on_device = [x[0].to("accinte:0"), x[1].to("accinte:1")]
    other = [y[0].to("accinte:0"), y[1].to("accinte:1")]
    torch._foreach_add_(on_device, other)
    torch._foreach_add_(x, y)
    assert [t.device for t in on_device] == [torch.device("accinte:0"), torch.device("accinte:1")]
    for e, r in zip(x, on_device):
        torch.testing.assert_close(r.cpu(), e)


SAME_DEVICE = ("Expected all tensors to be on the same device, but found at least "
               "two devices, accinte:0 and cpu")


@pytest.mark.parametrize("call", [
    lambda d: torch._foreach_add_([torch.ones(2, device=d), torch.ones(3, device=d)],
                                  [torch.ones(2, device=d)]),
    lambda d: torch._foreach_addcmul_([torch.ones(2, device=d)], [torch.ones(2, device=d)],
                                      [torch.ones(2, device=d)] * 2),
    lambda d: torch._foreach_mul_([torch.ones(2, device=d)] * 2, [1.0, 2.0, 3.0]),
    lambda d: torch._foreach_mul_([torch.ones(2, device=d)], torch.ones(2, device=d)),
    lambda d: torch._foreach_add_([torch.ones(2, device=d)], []),
    lambda d: torch._foreach_add_([torch.ones(2, dtype=torch.long, device=d)],
                                  [torch.ones(2, device=d)]),
    lambda d: torch._foreach_add_([torch.ones(2, device=d)], [torch.ones(3, device=d)]),
    lambda d: torch._foreach_sqrt_([torch.ones(2, dtype=torch.long, device=d)]),
    lambda d: torch._foreach_addcdiv_([torch.ones(2, dtype=torch.long, device=d)],
                                      [torch.ones(2, dtype=torch.long, device=d)],
                                      [torch.ones(2, dtype=torch.long, device=d)]),
    lambda d: torch._foreach_norm([torch.ones(2, dtype=torch.long, device=d)]),
    lambda d: torch._foreach_norm([torch.ones(2, device=d), torch.ones(0, device=d)], float("inf")),
    # NB: lists the one launch takes, refused by the single-tensor operator's
    # own check, which the multi-tensor kernel skips.
    lambda d: torch._foreach_neg([torch.ones(2, dtype=torch.bool, device=d)] * 2),
    lambda d: torch._foreach_neg_([torch.ones(2, dtype=torch.bool, device=d)] * 2),
    lambda d: torch._foreach_sub_([torch.ones(2, dtype=torch.bool, device=d)] * 2,
                                  [torch.ones(2, dtype=torch.bool, device=d)] * 2),
], ids=["list lengths", "third list length", "scalar list length", "tensor operand not 0-dim",
        "empty list", "cast of the result", "sizes", "sqrt_ of integers",
        "addcdiv_ of integers", "norm of integers",
        "infinity norm of an empty tensor", "neg of bools", "neg_ of bools",
        "sub_ of bools"])
def test_bad_lists_raise_the_cpus_errors_before_the_launch(call):
    with pytest.raises(Exception) as on_cpu:
        call("cpu")
    with torch.accinte.record_fallbacks() as record:
        with pytest.raises(type(on_cpu.value)) as on_device:
            call("accinte")
    assert str(on_device.value).splitlines()[0] == str(on_cpu.value).splitlines()[0]
    assert record.calls == {}
    # Nothing was launched: the stream has no failure to report.
    torch.accinte.synchronize()


@pytest.mark.parametrize("call", [
    lambda: torch._foreach_add_([torch.ones(2, device="accinte"), torch.ones(2)],
                                [torch.ones(2, device="accinte"), torch.ones(2, device="accinte")]),
    lambda: torch._foreach_add_([torch.ones(2, device="accinte")], [torch.ones(2)]),
    lambda: torch._foreach_mul_([torch.ones(2)], torch.tensor(2.0, device="accinte")),
], ids=["a CPU tensor in the list written", "a CPU tensor in the list read",
        "an accinte operand for CPU tensors"])
def test_tensors_on_another_device_are_refused(call):
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        call()
    torch.accinte.synchronize()


# --- Whole optimizer steps -------------------------------------------------

class Model(nn.Module):
    """Parameters of several shapes, as a model's are."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(6, 8)
        self.norm = nn.LayerNorm(8)
        self.second = nn.Linear(8, 3, bias=False)
        self.scale = nn.Parameter(torch.tensor(1.5))
        # NB: values of its own, the same every time, without reseeding the
        # global generators (the tests' state check).
        with torch.no_grad():
            for index, parameter in enumerate(self.parameters()):
                parameter.copy_(sample(*parameter.shape, seed=100 + index, low=-0.5, high=0.5))

    def forward(self, x):
        return self.second(torch.relu(self.norm(self.first(x)))) * self.scale


OPTIMIZERS = {
    "Adam": (torch.optim.Adam, [
        {}, {"amsgrad": True}, {"weight_decay": 0.1}, {"maximize": True},
        {"amsgrad": True, "weight_decay": 0.05, "maximize": True, "betas": (0.8, 0.9)},
        {"lr": "tensor"},
    ]),
    "AdamW": (torch.optim.AdamW, [
        {}, {"amsgrad": True}, {"weight_decay": 0.3, "maximize": True}, {"lr": "tensor"},
    ]),
    "SGD": (torch.optim.SGD, [
        {"momentum": 0.9}, {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1},
        {"momentum": 0.5, "dampening": 0.2, "maximize": True}, {}, {"lr": "tensor", "momentum": 0.9},
    ]),
}

CONFIGURATIONS = [
    pytest.param(name, mode, options, id=f"{name}-{mode}-{options}")
    for name, (_, option_sets) in OPTIMIZERS.items()
    for mode in ("foreach", "fused")
    for options in option_sets
]


def optimizer_options(device, name, mode, options):
    options = dict(options)
    if options.get("lr") == "tensor":
        options["lr"] = torch.tensor(0.05)
        if mode == "foreach" and name != "SGD":
            # NB: Adam's foreach step takes a tensor lr only when capturable,
            # which the CPU is not: its reference is the single-tensor step.
            if device == "cpu":
                mode = "foreach"
                options["foreach"] = False
                return options
            options["capturable"] = True
    options.setdefault("lr", 0.05)
    options[mode] = True
    return options


def train(device, name, mode, options, steps=3):
    model = Model().to(device)
    optimizer = OPTIMIZERS[name][0](model.parameters(),
                                    **optimizer_options(device, name, mode, options))
    x = sample(4, 6, seed=1).to(device)
    for _ in range(steps):
        optimizer.zero_grad()
        model(x).square().mean().backward()
        optimizer.step()
    return model, optimizer


def assert_same_state(cpu_optimizer, device_optimizer):
    cpu_state, device_state = cpu_optimizer.state_dict(), device_optimizer.state_dict()
    assert cpu_state["state"].keys() == device_state["state"].keys()
    for index, expected in cpu_state["state"].items():
        state = device_state["state"][index]
        assert expected.keys() == state.keys()
        for key, value in expected.items():
            other = state[key]
            if isinstance(value, torch.Tensor):
                torch.testing.assert_close(other.cpu(), value, check_dtype=key != "step")
            else:
                assert other == value


@pytest.mark.parametrize("name, mode, options", CONFIGURATIONS)
def test_optimizer_steps_match_the_cpu(name, mode, options):
    cpu_model, cpu_optimizer = train("cpu", name, mode, options)
    with torch.accinte.record_fallbacks() as record:
        model, optimizer = train("accinte", name, mode, options)
    assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    for expected, parameter in zip(cpu_model.parameters(), model.parameters()):
        assert parameter.device.type == "accinte"
        torch.testing.assert_close(parameter.detach().cpu(), expected.detach())
    assert_same_state(cpu_optimizer, optimizer)


def test_clip_grad_norm_matches_the_cpu():
    def clip(device):
        model = Model().to(device)
        model(sample(4, 6, seed=1).to(device)).sum().backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 0.1, foreach=True)
        return norm, [p.grad for p in model.parameters()]

    expected = clip("cpu")
    with torch.accinte.record_fallbacks() as record:
        result = clip("accinte")
    assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    assert_same(expected, result)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "SGD"])
def test_fused_steps_with_a_grad_scaler_match_the_cpu(name):
    # GradScaler hands a fused optimizer its scale and found_inf: the kernel
    # unscales the gradients itself and skips a step with an inf, as CUDA's.
    def run(device):
        model = Model().to(device)
        options = {"momentum": 0.9} if name == "SGD" else {}
        optimizer = OPTIMIZERS[name][0](model.parameters(), lr=0.05, fused=True, **options)
        scaler = torch.amp.GradScaler(device, init_scale=2.0**8, growth_interval=1)
        x = sample(4, 6, seed=1).to(device)
        for step in range(4):
            optimizer.zero_grad()
            loss = model(x).square().mean() * (float("inf") if step == 1 else 1.0)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        return model, optimizer, scaler.get_scale()

    cpu_model, cpu_optimizer, cpu_scale = run("cpu")
    with torch.accinte.record_fallbacks() as record:
        model, optimizer, scale = run("accinte")
    assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    assert scale == cpu_scale
    for expected, parameter in zip(cpu_model.parameters(), model.parameters()):
        torch.testing.assert_close(parameter.detach().cpu(), expected.detach())
    assert_same_state(cpu_optimizer, optimizer)


I = torch.int32


@pytest.mark.parametrize("call", [
    lambda d: torch._amp_foreach_non_finite_check_and_unscale_(
        [torch.ones(2, device=d)], torch.zeros(2, device=d), torch.ones((), device=d)),
    lambda d: torch._amp_foreach_non_finite_check_and_unscale_(
        [torch.ones(2, device=d)], torch.zeros(2, device=d), torch.ones(2, device=d)),
    lambda d: torch._amp_foreach_non_finite_check_and_unscale_(
        [torch.ones(2, device=d)], torch.zeros((), dtype=torch.float64, device=d),
        torch.ones((), device=d)),
    lambda d: torch._amp_foreach_non_finite_check_and_unscale_(
        [torch.ones(2, dtype=torch.long, device=d)], torch.zeros((), device=d),
        torch.ones((), device=d)),
    lambda d: torch._amp_update_scale_(torch.ones(2, device=d), torch.ones(2, dtype=I, device=d),
                                       torch.zeros((), device=d), 2.0, 0.5, 2),
    lambda d: torch._amp_update_scale_(torch.ones((), device=d), torch.ones((), dtype=I, device=d),
                                       torch.zeros(2, device=d), 2.0, 0.5, 2),
    lambda d: torch._amp_update_scale_(torch.ones((), dtype=torch.float64, device=d),
                                       torch.ones((), dtype=I, device=d),
                                       torch.zeros((), device=d), 2.0, 0.5, 2),
    lambda d: torch._amp_update_scale_(torch.ones((), device=d), torch.ones((), device=d),
                                       torch.zeros((), device=d), 2.0, 0.5, 2),
], ids=["unscale found_inf size", "unscale sizes", "unscale found_inf dtype",
        "unscale integers", "update sizes", "update found_inf size", "update scale dtype",
        "update tracker dtype"])
def test_grad_scaler_operators_raise_the_cpus_errors(call):
    with pytest.raises(Exception) as on_cpu:
        call("cpu")
    with pytest.raises(type(on_cpu.value)) as on_device:
        call("accinte")
    assert str(on_device.value).splitlines()[0] == str(on_cpu.value).splitlines()[0]
    torch.accinte.synchronize()


def test_grad_scaler_operators_match_the_cpu():
    def unscale_and_update(grads, found_inf, inv_scale, scale, tracker):
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
        torch._amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 1)
        return grads, found_inf, scale, tracker

    for poison in (1.0, float("inf"), float("nan")):
        grads = tensors(0)
        grads[1][2] = poison
        arguments = (grads, torch.zeros(()), torch.tensor(0.25), torch.tensor(8.0),
                     torch.zeros((), dtype=I))
        expected = unscale_and_update(*[[t.clone() for t in a] if isinstance(a, list)
                                        else a.clone() for a in arguments])
        with torch.accinte.record_fallbacks() as record:
            result = unscale_and_update(*to_device(list(arguments)))
        assert record.calls == {}
        # An inf or a NaN stays one, unscaled.
        for e, r in zip(expected[0] + list(expected[1:]), result[0] + list(result[1:])):
            assert r.device.type == "accinte"
            torch.testing.assert_close(r.cpu(), e, equal_nan=True)


def fused_adam(device, params=2, **changes):
    lists = {
        name: [torch.ones(3, device=device) for _ in range(params)]
        for name in ("self", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs")
    }
    lists["state_steps"] = [torch.zeros((), device=device) for _ in range(params)]
    arguments = dict(lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8,
                     amsgrad=True, maximize=False)
    arguments.update(lists)
    arguments.update(changes)
    return arguments


def call_fused_adam(arguments):
    arguments = dict(arguments)
    lists = [arguments.pop(name) for name in
             ("self", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs", "state_steps")]
    torch._fused_adam_(*lists, **arguments)


@pytest.mark.parametrize("change, error", [
    (lambda d: {"grads": [torch.ones(3, device=d)]},
     r"_fused_adam_: expected grads to hold one tensor per parameter \(2\), but got 1"),
    (lambda d: {"max_exp_avg_sqs": []},
     r"expected max_exp_avg_sqs to hold one tensor per parameter \(2\), but got 0"),
    (lambda d: {"grads": [torch.ones(3, dtype=torch.float64, device=d)] * 2},
     "params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs must have same dtype, device, "
     "and layout"),
    (lambda d: {"exp_avgs": [torch.ones(3), torch.ones(3)]},
     "must have same dtype, device, and layout"),
    (lambda d: {"state_steps": [torch.zeros(()), torch.zeros(())]},
     "expected each of state_steps to be a single number on accinte:0"),
    (lambda d: {"grad_scale": torch.ones((), dtype=torch.float64, device=d)},
     "expected grad_scale to be a single float32 number on accinte:0"),
    (lambda d: {"found_inf": torch.zeros(2, device=d)},
     "expected found_inf to be a single float32 number"),
], ids=["list length", "amsgrad list", "dtype", "device", "steps on the CPU", "grad_scale dtype",
        "found_inf size"])
def test_bad_fused_steps_are_refused_before_the_launch(change, error):
    # The CPU refuses each too (with "Expected grads.size() == n_tensors to
    # be true" and the like); the device's message names the argument.
    arguments = fused_adam("accinte")
    arguments.update(change("accinte"))
    before = [t.cpu() for t in arguments["self"]]
    with pytest.raises(RuntimeError, match=error):
        call_fused_adam(arguments)
    torch.accinte.synchronize()  # nothing was launched
    assert_same(before, arguments["self"])


def test_fused_sgd_needs_one_momentum_buffer_per_parameter():
    params = [torch.ones(3, device="accinte") for _ in range(2)]
    grads = [torch.ones(3, device="accinte") for _ in range(2)]
    options = dict(weight_decay=0.0, lr=0.1, dampening=0.0, nesterov=False, maximize=False,
                   is_first_step=True)
    with pytest.raises(RuntimeError, match=r"momentum_buffer_list to hold one tensor per "
                                           r"parameter \(2\), but got 0"):
        torch._fused_sgd_(params, grads, [], momentum=0.9, **options)
    torch.accinte.synchronize()
    # Without momentum the list may be empty.
    torch._fused_sgd_(params, grads, [], momentum=0.0, **options)
    torch.testing.assert_close(params[0].cpu(), torch.full((3,), 0.9))


@pytest.mark.skipif(not stage_has("12_profiler"),
                    reason="counting kernels needs chapter 12's profiler")
@pytest.mark.parametrize("route, launches", [("fast", 1), ("slow", len(SHAPES))])
def test_one_launch_per_list(route, launches):
    from torch.profiler import ProfilerActivity, profile

    x = to_device(a)
    if route == "slow":
        # A strided tensor in the list: CUDA too runs it tensor by tensor.
        x[0] = torch.ones(5, 8, device="accinte")[:, ::2]
    y = to_device(b)
    torch.accinte.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        torch._foreach_add_(x, y, alpha=2.0)
        torch.accinte.synchronize()
    names = [event.name for event in prof.events() if event.device_type ==
             torch.autograd.DeviceType.PrivateUse1 and "kernel" in event.name]
    # An empty tensor launches nothing on the slow route.
    expected = launches - (1 if route == "slow" else 0)
    assert len(names) == expected, names
