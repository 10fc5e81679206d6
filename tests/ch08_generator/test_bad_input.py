"""Chapter 08: device indices of the random number functions, and states.

test_generator.py covers states of the wrong size or dtype and a generator
of the wrong device; here, indices past the end or negative, a state on
the device, and random values written to a tensor that overlaps itself.
"""

import pytest
import torch
import torch_accinte  # noqa: F401

OUT_OF_RANGE = r"invalid device index {}: there are 2 accinte devices"


@pytest.mark.parametrize("index", [2, 5, -1])
def test_per_device_functions_refuse_bad_indices(index):
    state = torch.accinte.get_rng_state(0)
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE.format(index)):
        torch.accinte.get_rng_state(index)
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE.format(index)):
        torch.accinte.set_rng_state(state, index)
    # A refused -1 is not remembered as a device: it once cached the current
    # device's generator under -1, for every later call with -1.
    with torch.accinte.device(1):
        with pytest.raises(RuntimeError, match=OUT_OF_RANGE.format(index)):
            torch.accinte.get_rng_state(index)
    assert torch.equal(torch.accinte.get_rng_state(0), state)


def test_generators_of_missing_devices_are_refused():
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE.format(5)):
        torch.Generator(device="accinte:5")
    with pytest.raises(RuntimeError, match=OUT_OF_RANGE.format(2)):
        torch.rand(2, device="accinte:2")
    with pytest.raises(RuntimeError, match="Invalid device string: 'accinte:-1'"):
        torch.Generator(device="accinte:-1")
    generator = torch.Generator(device="accinte:1")
    assert generator.device == torch.device("accinte:1")


def test_a_state_on_the_device_is_refused_and_changes_nothing():
    state = torch.accinte.get_rng_state()
    with pytest.raises(RuntimeError, match="must be a uint8 CPU tensor.*on accinte"):
        torch.accinte.set_rng_state(state.to("accinte"))
    with pytest.raises(RuntimeError, match="must have 16 bytes"):
        torch.accinte.set_rng_state_all([state, state[:8]])
    # The state is untouched: the same numbers as from the saved state.
    first = torch.rand(5, device="accinte")
    torch.accinte.set_rng_state(state)
    torch.testing.assert_close(torch.rand(5, device="accinte"), first, rtol=0, atol=0)


# Every in-place random operator, and the out= forms that write their own
# argument, on a tensor that overlaps itself (each row one element, expanded).
OVERLAPPING_WRITES = {
    "normal_": lambda t: t.normal_(),
    "uniform_": lambda t: t.uniform_(),
    "bernoulli_.float": lambda t: t.bernoulli_(0.5),
    "bernoulli_.Tensor": lambda t: t.bernoulli_(torch.full((3, 4), 0.5, device=t.device)),
    "exponential_": lambda t: t.exponential_(),
    "geometric_": lambda t: t.geometric_(0.5),
    "log_normal_": lambda t: t.log_normal_(),
    "cauchy_": lambda t: t.cauchy_(),
    "random_": lambda t: t.random_(),
    "random_.to": lambda t: t.random_(10),
    "random_.from": lambda t: t.random_(2, 10),
    "normal.Tensor_float_out": lambda t: torch.normal(
        torch.zeros(3, 4, device=t.device), 1.0, out=t),
    "normal.float_Tensor_out": lambda t: torch.normal(
        0.0, torch.ones(3, 4, device=t.device), out=t),
    "normal.Tensor_Tensor_out": lambda t: torch.normal(
        torch.zeros(3, 4, device=t.device), torch.ones(3, 4, device=t.device), out=t),
    "bernoulli.out": lambda t: torch.bernoulli(torch.full((3, 4), 0.5, device=t.device), out=t),
}
OVERLAP = "more than one element of the written-to tensor refers to a single memory location"


@pytest.mark.parametrize("name", sorted(OVERLAPPING_WRITES))
def test_a_self_overlapping_tensor_fails_at_the_call_as_on_the_cpu(name):
    # NB: normal_ once launched the kernel and failed only at the next
    # synchronization, as an unrelated launch failure of a later `.cpu()`.
    write = OVERLAPPING_WRITES[name]
    with torch.random.fork_rng(devices=[0], device_type="accinte"):
        with pytest.raises(RuntimeError, match=OVERLAP):
            write(torch.zeros(3, 1).expand(3, 4))
        target = torch.zeros(3, 1, device="accinte").expand(3, 4)
        with pytest.raises(RuntimeError, match=OVERLAP):
            write(target)
        torch.accinte.synchronize()  # nothing failed on the stream
        assert torch.equal(target.cpu(), torch.zeros(3, 4))


@pytest.mark.parametrize("name", ["multinomial.out", "randperm.generator_out"])
def test_a_self_overlapping_out_of_a_sampler_fails_at_the_call(name):
    # NB: the CPU writes such an out= anyway, one element after another; the
    # device kernels copy their result into it, which cannot be done. The
    # error comes from the call, as from CUDA's randperm, not from a later
    # synchronization.
    if name == "multinomial.out":
        out = torch.zeros(3, 1, dtype=torch.long, device="accinte").expand(3, 4)
        call = lambda: torch.multinomial(torch.ones(3, 4, device="accinte"), 4, True, out=out)  # noqa: E731
    else:
        out = torch.zeros(1, dtype=torch.long, device="accinte").expand(5)
        call = lambda: torch.randperm(5, out=out)  # noqa: E731
    with torch.random.fork_rng(devices=[0], device_type="accinte"):
        with pytest.raises(RuntimeError, match=OVERLAP):
            call()
        torch.accinte.synchronize()
