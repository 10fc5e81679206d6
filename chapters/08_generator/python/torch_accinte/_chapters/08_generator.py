"""Chapter 08: random numbers on accinte.

The C++ side gives every device a Philox generator and registers it with the
hooks, which is all :py:class:`torch.Generator(device="accinte")
<torch.Generator>` and the random operators need. This module adds the seeding
and state functions of ``torch.cuda`` to ``torch.accinte``;
:py:func:`torch.manual_seed`, :py:func:`torch.seed` and
:py:func:`torch.random.fork_rng` find them there by name.
"""

import sys
from typing import Iterable, Union

import torch
from torch_accinte import _C, device_module

_DeviceLike = Union[int, str, torch.device]

_default_generators: dict = {}


# LITERALINCLUDE START: CH08_PY_DEFAULT_GENERATOR
def _default_generator(device: _DeviceLike = None) -> torch.Generator:
    """The default generator of ``device`` (default: the current device).

    NB: the generators are host objects: seeding them does not initialize
    the device, so ``torch.manual_seed`` needs no queue of deferred calls of
    the kind ``torch.cuda`` keeps until CUDA starts.
    """
    index = device_module._get_device_index(device)
    generator = _default_generators.get(index)
    if generator is None:
        generator = _C._default_generator(index)
        _default_generators[index] = generator
    return generator
# LITERALINCLUDE END: CH08_PY_DEFAULT_GENERATOR


# LITERALINCLUDE START: CH08_PY_STATE
def get_rng_state(device: _DeviceLike = "accinte") -> torch.Tensor:
    """The state of ``device``'s default generator: a 16-byte uint8 CPU
    tensor (seed, offset)."""
    return _default_generator(device).get_state()


def get_rng_state_all() -> list:
    """The states of every device's default generator."""
    return [get_rng_state(index) for index in range(device_module.device_count())]


def set_rng_state(new_state: torch.Tensor, device: _DeviceLike = "accinte") -> None:
    """Restores ``device``'s default generator from ``get_rng_state``."""
    if not isinstance(new_state, torch.Tensor):
        raise TypeError(
            f"set_rng_state expects a torch.ByteTensor, got {type(new_state).__name__}"
        )
    # NB: the copy is plain CPU memory even if the caller's state is a
    # subclass or a view, as the generator reads its bytes directly.
    with torch._C._DisableFuncTorch():
        state = new_state.clone(memory_format=torch.contiguous_format)
    _default_generator(device).set_state(state)


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    """Restores every device's default generator; one state per device."""
    for index, state in enumerate(new_states):
        set_rng_state(state, index)
# LITERALINCLUDE END: CH08_PY_STATE


# LITERALINCLUDE START: CH08_PY_SEEDS
def manual_seed(seed: int) -> None:
    """Seeds the current device's default generator."""
    _default_generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seeds the default generator of every device (``torch.manual_seed``
    calls this)."""
    seed = int(seed)
    for index in range(device_module.device_count()):
        _default_generator(index).manual_seed(seed)


def seed() -> None:
    """Seeds the current device's default generator non-deterministically."""
    _default_generator().seed()


def seed_all() -> None:
    """Seeds every device's default generator with one non-deterministic
    seed."""
    count = device_module.device_count()
    if count == 0:
        return
    manual_seed_all(_default_generator(0).seed())


def initial_seed() -> int:
    """The seed of the current device's default generator."""
    return _default_generator().initial_seed()
# LITERALINCLUDE END: CH08_PY_SEEDS


def _all_default_generators() -> tuple:
    """``torch.accinte.default_generators``: the default generator of every
    device, in device order, as ``torch.cuda.default_generators``.

    NB: made on first use: counting the devices asks the emulator, which
    importing the package does not do.
    """
    return tuple(
        _default_generator(index) for index in range(device_module.device_count())
    )


device_module._extend_lazily(default_generators=_all_default_generators)


device_module._extend(
    _default_generator=_default_generator,
    get_rng_state=get_rng_state,
    get_rng_state_all=get_rng_state_all,
    set_rng_state=set_rng_state,
    set_rng_state_all=set_rng_state_all,
    manual_seed=manual_seed,
    manual_seed_all=manual_seed_all,
    seed=seed,
    seed_all=seed_all,
    initial_seed=initial_seed,
)


# ``torch.accinte.random``, importable by that name as ``torch.cuda.random``
# is: the functions above under their submodule.
from torch_accinte import random  # noqa: E402

device_module._extend(random=random)
sys.modules["torch.accinte.random"] = random
