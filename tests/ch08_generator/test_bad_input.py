"""Chapter 08: device indices of the random number functions, and states.

test_generator.py covers states of the wrong size or dtype and a generator
of the wrong device; here, indices past the end or negative, and a state on
the device.
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
