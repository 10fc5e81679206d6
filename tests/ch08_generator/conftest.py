"""Fixtures of chapter 08's tests."""

import pytest
import torch


@pytest.fixture(autouse=True)
def seeds_are_left_untouched():
    """Every test that seeds must restore the seeds and states it found."""
    cpu_seed = torch.initial_seed()
    cpu_state = torch.get_rng_state()
    accinte_seed = torch.accinte.initial_seed()
    accinte_states = torch.accinte.get_rng_state_all()
    yield
    assert torch.initial_seed() == cpu_seed
    assert torch.equal(torch.get_rng_state(), cpu_state)
    assert torch.accinte.initial_seed() == accinte_seed
    for before, after in zip(accinte_states, torch.accinte.get_rng_state_all()):
        assert torch.equal(before, after)


@pytest.fixture
def forked():
    """Seeds may change inside the test; every state is restored after."""
    with torch.random.fork_rng(devices=[0, 1], device_type="accinte"):
        yield
