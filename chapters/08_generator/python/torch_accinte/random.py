"""``torch.accinte.random``: the seeding and state functions of chapter 08
under the submodule name ``torch.cuda.random`` has (``from
torch.accinte.random import manual_seed``)."""

from torch.accinte import (
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)

__all__ = [
    "get_rng_state",
    "get_rng_state_all",
    "initial_seed",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "set_rng_state",
    "set_rng_state_all",
]
