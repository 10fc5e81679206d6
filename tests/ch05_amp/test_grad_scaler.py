"""Chapter 05: GradScaler on accinte.

The two operators GradScaler is built on run on accinte tensors and are
compared with their CPU kernels; then whole training loops check that the
scaler skips a step exactly when a gradient overflows, and backs the scale off
and grows it as configured.
"""

import pytest
import torch
import torch_accinte  # noqa: F401


def gradients(with_bad=None):
    grads = [torch.linspace(-3, 3, 12).reshape(3, 4), torch.arange(5.0),
             torch.tensor(7.5)]
    if with_bad is not None:
        grads[1][3] = with_bad
    return grads


@pytest.mark.parametrize("bad", [None, float("inf"), float("-inf"), float("nan")],
                         ids=["finite", "inf", "-inf", "nan"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_non_finite_check_and_unscale_matches_cpu(bad, dtype):
    cpu_grads = [g.to(dtype) for g in gradients(bad)]
    device_grads = [g.to("accinte") for g in cpu_grads]
    results = {}
    for device, grads in (("cpu", cpu_grads), ("accinte", device_grads)):
        found_inf = torch.zeros((), device=device)
        inv_scale = torch.full((), 0.25, device=device)
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
        results[device] = (grads, found_inf)
    # in place, on every tensor of the list, and into found_inf
    for on_device, on_cpu in zip(results["accinte"][0], results["cpu"][0]):
        assert on_device.device.type == "accinte"
        torch.testing.assert_close(on_device.cpu(), on_cpu, equal_nan=True)
    assert results["accinte"][1].item() == results["cpu"][1].item() == \
        (0.0 if bad is None else 1.0)
    if bad is None:
        torch.testing.assert_close(results["accinte"][0][0].cpu(),
                                   gradients()[0].to(dtype) * 0.25)


@pytest.mark.parametrize(
    "found_inf, tracker, expected_scale, expected_tracker",
    [(1.0, 1, 512.0, 0),    # overflow: back off, restart counting
     (0.0, 1, 1024.0, 2),   # clean step: count it
     (0.0, 2, 2048.0, 0)],  # third clean step in a row: grow
    ids=["backoff", "count", "grow"])
def test_update_scale_matches_cpu(found_inf, tracker, expected_scale,
                                  expected_tracker):
    results = []
    for device in ("cpu", "accinte"):
        scale = torch.full((), 1024.0, device=device)
        growth_tracker = torch.full((), tracker, dtype=torch.int32, device=device)
        found = torch.full((), found_inf, device=device)
        returned = torch._amp_update_scale_(scale, growth_tracker, found,
                                            2.0, 0.5, 3)
        assert returned.device.type == device
        results.append((scale.item(), growth_tracker.item()))
    assert results[0] == results[1] == (expected_scale, expected_tracker)


def make_problem():
    """A small regression problem and a float32 MLP, all on accinte.

    NB: drawn from a CPU generator of its own: ``torch.manual_seed`` would
    also seed accinte, which has no generator before chapter 08.
    """
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(64, 8, generator=generator)
    targets = inputs @ torch.randn(8, 1, generator=generator)
    targets += 0.1 * torch.randn(64, 1, generator=generator)
    with torch.random.fork_rng(devices=[]):
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                    torch.nn.Linear(16, 1))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(0.3 * torch.randn(parameter.shape, generator=generator))
    return inputs.to("accinte"), targets.to("accinte"), model.to("accinte")


def train_step(model, optimizer, scaler, inputs, targets, poison=False):
    optimizer.zero_grad()
    with torch.autocast("accinte", dtype=torch.float16):
        prediction = model(inputs)
        assert prediction.dtype == torch.float16
        loss = torch.nn.functional.mse_loss(prediction, targets)
        assert loss.dtype == torch.float32
    scaled = scaler.scale(loss)
    if poison:
        # an overflow in float16's backward, as a too-large scale causes it
        scaled = scaled * float("inf")
    scaled.backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def test_float16_training_loss_falls():
    inputs, targets, model = make_problem()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("accinte", init_scale=2.0**10)
    losses = [train_step(model, optimizer, scaler, inputs, targets)
              for _ in range(40)]
    assert losses[-1] < 0.3 * losses[0], losses
    # master weights and their gradients stay float32, on accinte
    for parameter in model.parameters():
        assert parameter.dtype == torch.float32
        assert parameter.grad.dtype == torch.float32
        assert parameter.device.type == "accinte"
    assert scaler.get_scale() == 2.0**10  # no overflow, no growth yet


def test_overflow_skips_exactly_one_step_and_halves_the_scale():
    inputs, targets, model = make_problem()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("accinte", init_scale=2.0**12)
    scales, changed = [], []
    for step in range(4):
        before = [p.detach().cpu().clone() for p in model.parameters()]
        train_step(model, optimizer, scaler, inputs, targets, poison=(step == 1))
        after = [p.detach().cpu() for p in model.parameters()]
        changed.append(any(not torch.equal(b, a) for b, a in zip(before, after)))
        scales.append(scaler.get_scale())
    assert changed == [True, False, True, True]
    assert scales == [2.0**12, 2.0**11, 2.0**11, 2.0**11]
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_scale_grows_after_growth_interval_clean_steps():
    inputs, targets, model = make_problem()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("accinte", init_scale=8.0, growth_interval=2)
    scales = []
    for _ in range(5):
        train_step(model, optimizer, scaler, inputs, targets)
        scales.append(scaler.get_scale())
    assert scales == [8.0, 16.0, 16.0, 32.0, 32.0]
    assert scaler._scale.device.type == "accinte"


def test_unscale_gives_the_true_gradients():
    inputs, targets, model = make_problem()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    scaler = torch.amp.GradScaler("accinte", init_scale=2.0**8)
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    scaler.scale(loss).backward()
    scaled = [p.grad.cpu().clone() for p in model.parameters()]
    scaler.unscale_(optimizer)
    for parameter, grad in zip(model.parameters(), scaled):
        torch.testing.assert_close(parameter.grad.cpu(), grad / 2.0**8)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(optimizer)


def test_model_split_over_two_devices():
    # gradients on accinte:0 and accinte:1: one inf check per device, and an
    # overflow on either device skips the whole step
    inputs, targets, model = make_problem()
    first, second = model[0], model[2].to("accinte:1")
    targets = targets.to("accinte:1")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("accinte", init_scale=2.0**8)
    scales, changed = [], []
    for step in range(3):
        before = [p.detach().cpu().clone() for p in model.parameters()]
        optimizer.zero_grad()
        with torch.autocast("accinte", dtype=torch.float16):
            hidden = torch.tanh(first(inputs)).to("accinte:1")
            loss = torch.nn.functional.mse_loss(second(hidden), targets)
        scaler.scale(loss).backward()
        if step == 1:
            first.bias.grad[0] = float("nan")  # only accinte:0 overflows
        scaler.step(optimizer)
        scaler.update()
        after = [p.detach().cpu() for p in model.parameters()]
        changed.append(any(not torch.equal(b, a) for b, a in zip(before, after)))
        scales.append(scaler.get_scale())
    assert {p.grad.device.index for p in model.parameters()} == {0, 1}
    assert changed == [True, False, True]
    assert scales == [2.0**8, 2.0**7, 2.0**7]
