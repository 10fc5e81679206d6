"""Chapter 08, the generator: each device has a generator of its own that
its random operators draw from, seeded and saved as CUDA's are.

Every check compares with the CPU or with what ``torch.cuda`` documents:
one seed gives the same numbers again, whatever the CPU generator does in
between; the state is a CPU ``uint8`` tensor that replays the draws;
``torch.random.fork_rng(device_type=NAME)`` restores it; every device has
its own default generator; dropout with one seed drops the same elements,
and its gradient uses the mask of the forward pass.
"""

import warnings

import torch

from .._api import Section
from .._helpers import COPIES, DEVICE, OPERATORS, need_devices, preserved_rng

SECTION = Section(
    chapter="08", title="Random number generator", requires=(DEVICE, COPIES, OPERATORS),
    missing="no device generator: random operators do not draw from a seedable per-device generator")


@SECTION.check
def manual_seed_reproduces(ctx):
    # NB: the device module's manual_seed, which seeds the device's generator
    # alone: torch.manual_seed would seed the CPU's too, and a backend whose
    # random operators draw from the CPU's would pass.
    module = ctx.module
    with preserved_rng(ctx):
        module.manual_seed(1234)
        first = torch.rand(1000, device=ctx.dev())
        module.manual_seed(1234)
        again = torch.rand(1000, device=ctx.dev())
        module.manual_seed(1235)
        other = torch.rand(1000, device=ctx.dev())
        assert first.device == ctx.dev(), f"torch.rand made a tensor on {first.device}"
        torch.testing.assert_close(first, again, rtol=0, atol=0,
                                   msg="torch.manual_seed(s) twice gave different numbers")
        assert not torch.equal(first, other), "two seeds gave the same numbers"
        assert 0.3 < first.mean().item() < 0.7, "torch.rand is not uniform on [0, 1)"


@SECTION.check(missing="device random numbers come from the CPU generator (the CPU fallback): "
                       "drawing on the CPU changes them")
def independent_of_the_cpu_generator(ctx):
    with preserved_rng(ctx):
        torch.manual_seed(7)
        first = torch.rand(100, device=ctx.dev())
        torch.manual_seed(7)
        torch.rand(100)  # draws from the CPU generator only
        second = torch.rand(100, device=ctx.dev())
        assert torch.equal(first.cpu(), second.cpu()), \
            "a draw on the CPU changed the device's next numbers"
        torch.manual_seed(7)
        cpu_first = torch.rand(100)
        torch.manual_seed(7)
        torch.rand(100, device=ctx.dev())
        cpu_second = torch.rand(100)
        assert torch.equal(cpu_first, cpu_second), \
            "a draw on the device advanced the CPU generator"


@SECTION.check(missing="no get_rng_state/set_rng_state on the device module (as torch.cuda's)")
def state_round_trip(ctx):
    module = ctx.module
    with preserved_rng(ctx):
        module.manual_seed(99)
        state = module.get_rng_state()
        assert state.device == torch.device("cpu") and state.dtype == torch.uint8, \
            f"get_rng_state gave a {state.dtype} tensor on {state.device}, not a CPU uint8 one"
        first = torch.randn(64, device=ctx.dev())
        module.set_rng_state(state)
        again = torch.randn(64, device=ctx.dev())
        assert torch.equal(first.cpu(), again.cpu()), "set_rng_state did not replay the draws"
        assert module.initial_seed() == 99, "initial_seed is not the manual seed"


@SECTION.check(missing="torch.manual_seed does not seed the device (no manual_seed_all on the device module)")
def torch_manual_seed_seeds_the_device(ctx):
    with preserved_rng(ctx):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.manual_seed(77)
        messages = [str(w.message) for w in caught if ctx.device in str(w.message)]
        assert not messages, f"torch.manual_seed warned: {messages[0]}"
        assert ctx.module.initial_seed() == 77, "torch.manual_seed did not seed the device"


@SECTION.check(missing="torch.random.fork_rng(device_type=NAME) does not restore the device's generator")
def fork_rng_restores(ctx):
    with preserved_rng(ctx):
        torch.manual_seed(5)
        with torch.random.fork_rng(device_type=ctx.device):
            inside = torch.rand(32, device=ctx.dev())
        outside = torch.rand(32, device=ctx.dev())
        assert torch.equal(inside.cpu(), outside.cpu()), \
            "the draws in fork_rng advanced the device's generator outside it"


@SECTION.check(missing="torch.Generator(device=NAME) is not a device generator that seeds the draws")
def explicit_generator(ctx):
    generator = torch.Generator(device=ctx.dev())
    assert generator.device == ctx.dev(), f"torch.Generator(device=...) is on {generator.device}"
    generator.manual_seed(42)
    first = torch.rand(50, device=ctx.dev(), generator=generator)
    generator.manual_seed(42)
    again = torch.rand(50, device=ctx.dev(), generator=generator)
    assert torch.equal(first.cpu(), again.cpu()), "a seeded torch.Generator did not reproduce"
    generator.manual_seed(42)
    state = generator.get_state()
    perm = torch.randperm(20, device=ctx.dev(), generator=generator)
    generator.set_state(state)
    assert torch.equal(perm.cpu(), torch.randperm(20, device=ctx.dev(), generator=generator).cpu()), \
        "Generator.set_state did not replay randperm"
    assert sorted(perm.tolist()) == list(range(20)), "randperm is not a permutation"


@SECTION.check(missing="the devices do not have independent default generators (default_generators)")
def per_device_generators(ctx):
    need_devices(ctx, 2)
    module = ctx.module
    with preserved_rng(ctx):
        assert len(module.default_generators) == module.device_count(), \
            "default_generators does not hold one generator per device"
        assert module.default_generators[1].device == ctx.dev(1), \
            "default_generators[1] is not the generator of device 1"
        torch.manual_seed(11)  # seeds every device, as for CUDA
        zero = torch.rand(40, device=ctx.dev(0))
        one = torch.rand(40, device=ctx.dev(1))
        assert torch.equal(zero.cpu(), one.cpu()), \
            "torch.manual_seed did not give every device the same stream (as CUDA's)"
        torch.manual_seed(11)
        torch.rand(40, device=ctx.dev(1))
        torch.rand(40, device=ctx.dev(1))
        again = torch.rand(40, device=ctx.dev(0))
        assert torch.equal(zero.cpu(), again.cpu()), \
            "drawing on device 1 advanced device 0's generator"


@SECTION.check(missing="dropout on the device is not reproducible from a seed, or its gradient "
                       "does not use the forward's mask")
def dropout_reproducible(ctx):
    with preserved_rng(ctx):
        x = torch.ones(4000, device=ctx.dev(), requires_grad=True)
        torch.manual_seed(3)
        y = torch.nn.functional.dropout(x, p=0.25, training=True)
        torch.manual_seed(3)
        torch.rand(100)  # a CPU draw must not change the device's mask
        y2 = torch.nn.functional.dropout(x, p=0.25, training=True)
        assert torch.equal(y.detach().cpu(), y2.detach().cpu()), "one seed, two dropout masks"
        kept = y.detach().cpu() != 0
        assert 0.65 < kept.float().mean().item() < 0.85, "dropout(p=0.25) did not keep about 3/4"
        torch.testing.assert_close(y.detach().cpu()[kept], torch.full((int(kept.sum()),), 1 / 0.75),
                                   msg="dropout did not scale the kept elements by 1/(1-p)")
        y.sum().backward()
        torch.testing.assert_close(x.grad.cpu(), kept.float() / 0.75,
                                   msg="dropout's gradient does not follow its mask")
