"""Fixtures of chapter 08's tests, imported by each test module.

NB: not a conftest.py: the test modules of every chapter import the
top-level tests/conftest.py as ``conftest``, and a second one would shadow
it.
"""

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
def forked(seeds_are_left_untouched):
    """Seeds may change inside the test; every state is restored after.

    NB: requests the guard, so that the guard takes its snapshot before the
    fork and checks after the fork is undone, whatever the fixture order.
    """
    with torch.random.fork_rng(devices=[0, 1], device_type="accinte"):
        yield
