"""Chapter 08: the accinte generator, its seeds and its state.

Each test names what it guards against in its docstring. Tests that seed run
inside ``torch.random.fork_rng`` (the ``forked`` fixture), and the autouse
fixture checks that no seed or state is left changed.
"""

import struct
import warnings

import pytest
import torch
import torch_accinte  # noqa: F401
from rng_guard import forked, seeds_are_left_untouched  # noqa: F401
from torch_accinte import _C


def offset_of(state):
    return struct.unpack("<QQ", bytes(state.tolist()))[1]


def seed_of(state):
    return struct.unpack("<QQ", bytes(state.tolist()))[0]


# Known-answer vectors of Philox4x32-10 published with the algorithm
# (Random123's kat_vectors): counter, key, expected output.
PHILOX_KAT = [
    ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2,
     [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
     [0xA4093822, 0x299F31D0],
     [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
]


@pytest.mark.parametrize("counter,key,expected", PHILOX_KAT)
def test_philox_known_answers(counter, key, expected):
    """A wrong constant, round count or word order changes every block."""
    assert list(_C._philox4x32_10(counter, key)) == expected


def test_generator_device():
    """torch.Generator(device="accinte") is an accinte generator of the
    current device, or of the named one."""
    assert torch.Generator(device="accinte").device == torch.device("accinte:0")
    assert torch.Generator(device="accinte:1").device == torch.device("accinte:1")
    with torch.accinte.device(1):
        assert torch.Generator(device="accinte").device == torch.device("accinte:1")
    with pytest.raises(RuntimeError, match="device"):
        torch.Generator(device="accinte:7")


def test_new_generator_starts_at_default_seed():
    generator = torch.Generator(device="accinte")
    assert generator.initial_seed() == 67280421310721
    assert generator.get_offset() == 0


def test_manual_seed_reproduces(forked):
    """Same seed, same numbers; another seed, other numbers."""
    torch.accinte.manual_seed(1234)
    first = torch.rand(100, device="accinte")
    torch.accinte.manual_seed(1234)
    again = torch.rand(100, device="accinte")
    torch.accinte.manual_seed(1235)
    other = torch.rand(100, device="accinte")
    torch.testing.assert_close(first, again, rtol=0, atol=0)
    assert not torch.equal(first, other)


def test_torch_manual_seed_seeds_every_device_without_warning(forked):
    """torch.manual_seed finds torch.accinte.manual_seed_all: no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.manual_seed(77)
    for index in range(2):
        with torch.accinte.device(index):
            assert torch.accinte.initial_seed() == 77
    torch.manual_seed(77)
    first = torch.randn(10, device="accinte:1")
    torch.manual_seed(77)
    torch.testing.assert_close(torch.randn(10, device="accinte:1"), first,
                               rtol=0, atol=0)


def test_torch_seed_and_seed_all(forked):
    """torch.seed() reseeds accinte with the seed it returns; seed_all gives
    every device one new seed; seed() only the current device."""
    chosen = torch.seed()
    assert torch.accinte.initial_seed() == chosen % 2**64
    torch.accinte.seed_all()
    seeds = []
    for index in range(2):
        with torch.accinte.device(index):
            seeds.append(torch.accinte.initial_seed())
    assert seeds[0] == seeds[1] != chosen
    with torch.accinte.device(1):
        torch.accinte.seed()
        assert torch.accinte.initial_seed() != seeds[1]
    assert torch.accinte.initial_seed() == seeds[0]


def test_offset_advances_per_launch(forked):
    """The state is (seed, offset); each launch advances the offset by four
    32-bit numbers, whatever its size, as CUDA's Philox offset does."""
    torch.accinte.manual_seed(5)
    state = torch.accinte.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    assert state.numel() == 16
    assert (seed_of(state), offset_of(state)) == (5, 0)
    torch.rand(3, device="accinte")
    torch.randn(100000, device="accinte")
    assert offset_of(torch.accinte.get_rng_state()) == 8
    torch.empty(0, device="accinte").uniform_()  # no launch, no numbers
    assert offset_of(torch.accinte.get_rng_state()) == 8


def test_module_state_round_trip(forked):
    """set_rng_state(get_rng_state()) replays the same numbers."""
    state = torch.accinte.get_rng_state()
    first = torch.randn(50, device="accinte")
    torch.accinte.set_rng_state(state)
    torch.testing.assert_close(torch.randn(50, device="accinte"), first,
                               rtol=0, atol=0)
    states = torch.accinte.get_rng_state_all()
    second = [torch.rand(5, device=f"accinte:{i}") for i in range(2)]
    torch.accinte.set_rng_state_all(states)
    for index in range(2):
        torch.testing.assert_close(torch.rand(5, device=f"accinte:{index}"),
                                   second[index], rtol=0, atol=0)


def test_generator_state_round_trip():
    """Generator.get_state/set_state, seeds and offsets of a private
    generator; the default generator is not involved."""
    generator = torch.Generator(device="accinte").manual_seed(99)
    state = generator.get_state()
    first = torch.rand(20, device="accinte", generator=generator)
    assert generator.get_offset() == 4
    generator.set_state(state)
    torch.testing.assert_close(
        torch.rand(20, device="accinte", generator=generator), first,
        rtol=0, atol=0)
    generator.set_offset(0)
    torch.testing.assert_close(
        torch.rand(20, device="accinte", generator=generator), first,
        rtol=0, atol=0)
    clone = torch.Generator(device="accinte")
    clone.set_state(generator.get_state())
    torch.testing.assert_close(
        torch.rand(7, device="accinte", generator=clone),
        torch.rand(7, device="accinte", generator=generator), rtol=0, atol=0)


@pytest.mark.parametrize("bad,message", [
    (torch.zeros(15, dtype=torch.uint8), "16 bytes"),
    (torch.zeros(32, dtype=torch.uint8), "16 bytes"),
    (torch.zeros(16, dtype=torch.float32), "uint8 CPU tensor"),
    (torch.zeros(16, dtype=torch.int64), "uint8 CPU tensor"),
])
def test_bad_state_is_a_clear_error(bad, message):
    state = torch.accinte.get_rng_state()
    with pytest.raises(RuntimeError, match=message):
        torch.accinte.set_rng_state(bad)
    with pytest.raises(RuntimeError, match=message):
        torch.Generator(device="accinte").set_state(bad)
    with pytest.raises(TypeError):
        torch.accinte.set_rng_state([0] * 16)
    assert torch.equal(torch.accinte.get_rng_state(), state)


def test_misaligned_offset_is_rejected():
    generator = torch.Generator(device="accinte")
    with pytest.raises(RuntimeError, match="multiple of 4"):
        generator.set_offset(3)
    state = generator.get_state()
    state[8] = 1  # offset 1
    with pytest.raises(RuntimeError, match="multiple of 4"):
        generator.set_state(state)
    assert generator.get_offset() == 0


def test_fork_rng_restores_accinte(forked):
    """torch.random.fork_rng(device_type="accinte") restores the devices."""
    torch.accinte.manual_seed_all(3)
    before = torch.accinte.get_rng_state_all()
    with torch.random.fork_rng(devices=[0, 1], device_type="accinte"):
        torch.manual_seed(4)
        torch.rand(8, device="accinte:0")
        torch.rand(8, device="accinte:1")
    for old, new in zip(before, torch.accinte.get_rng_state_all()):
        assert torch.equal(old, new)


def test_devices_are_independent(forked):
    """Each device has its own default generator: drawing or seeding on one
    leaves the other's state alone. With one seed they give one stream."""
    torch.accinte.manual_seed_all(11)
    state0 = torch.accinte.get_rng_state(0)
    on_one = torch.rand(10, device="accinte:1")
    assert torch.equal(torch.accinte.get_rng_state(0), state0)
    torch.testing.assert_close(torch.rand(10, device="accinte:0").cpu(),
                               on_one.cpu(), rtol=0, atol=0)
    with torch.accinte.device(1):
        torch.accinte.manual_seed(12)
    assert seed_of(torch.accinte.get_rng_state(0)) == 11
    assert seed_of(torch.accinte.get_rng_state(1)) == 12


def test_independent_of_the_cpu_generator(forked):
    """accinte draws neither read nor advance the CPU generator."""
    torch.accinte.manual_seed(21)
    expected = torch.randn(30, device="accinte")
    cpu_state = torch.get_rng_state()
    torch.accinte.manual_seed(21)
    torch.manual_seed(999)  # reseeds accinte too: undo that below
    torch.accinte.manual_seed_all(21)
    torch.randn(30)  # CPU draws in between
    torch.testing.assert_close(torch.randn(30, device="accinte"), expected,
                               rtol=0, atol=0)
    torch.set_rng_state(cpu_state)
    torch.rand(1000, device="accinte")
    torch.nn.functional.dropout(torch.ones(100, device="accinte"), 0.5)
    torch.randperm(50, device="accinte")
    torch.multinomial(torch.ones(5, device="accinte"), 3)
    assert torch.equal(torch.get_rng_state(), cpu_state)


def test_generator_of_another_device_is_an_error():
    generator = torch.Generator(device="accinte:1")
    with pytest.raises(RuntimeError, match="generator of accinte:1 cannot "
                       "draw for a tensor on accinte:0"):
        torch.rand(3, device="accinte:0", generator=generator)
    with pytest.raises(RuntimeError, match="device type for generator"):
        torch.rand(3, device="accinte:0", generator=torch.Generator())
    assert generator.get_offset() == 0


def test_same_numbers_on_any_stream(forked):
    """The numbers depend on (seed, offset, index) only: not on the stream
    that runs the kernel."""
    state = torch.accinte.get_rng_state()
    on_default = (torch.rand(1000, device="accinte"),
                  torch.randn(1000, device="accinte"))
    torch.accinte.set_rng_state(state)
    side = torch.accinte.Stream()
    other = torch.accinte.Stream()
    with torch.accinte.stream(side):
        first = torch.rand(1000, device="accinte")
    with torch.accinte.stream(other):
        second = torch.randn(1000, device="accinte")
    torch.accinte.synchronize()
    torch.testing.assert_close(first, on_default[0], rtol=0, atol=0)
    torch.testing.assert_close(second, on_default[1], rtol=0, atol=0)


def test_same_numbers_with_any_thread_count(forked):
    """Elements are computed in parallel by the intra-op pool; one thread
    or many give the same numbers."""
    threads = torch.get_num_threads()
    state = torch.accinte.get_rng_state()
    many = torch.randn(200000, device="accinte").cpu()
    torch.accinte.set_rng_state(state)
    torch.set_num_threads(1)
    try:
        one = torch.randn(200000, device="accinte").cpu()
    finally:
        torch.set_num_threads(threads)
    torch.testing.assert_close(one, many, rtol=0, atol=0)


def test_element_values_follow_the_index(forked):
    """Element i's value is a function of its row-major index: a shorter
    draw is a prefix of a longer one, and strides do not matter."""
    state = torch.accinte.get_rng_state()
    long = torch.rand(20, device="accinte")
    torch.accinte.set_rng_state(state)
    short = torch.rand(8, device="accinte")
    torch.testing.assert_close(short, long[:8], rtol=0, atol=0)
    torch.accinte.set_rng_state(state)
    strided = torch.empty(5, 4, device="accinte").t().uniform_()
    assert not strided.is_contiguous()
    torch.testing.assert_close(strided.cpu().reshape(-1), long.cpu(),
                               rtol=0, atol=0)


def test_random_kernels_run_on_the_stream(forked):
    """The random operators are kernels queued on the current stream: the
    call returns while the stream is held, and the numbers appear when it
    runs. The CPU fallback would wait for the stream instead."""
    stream = torch.Stream(device="accinte:0")
    with torch.accinte.stream(stream):
        out = torch.zeros(64, device="accinte")
        torch.accinte.synchronize()
        gate = _C._testing.StreamGate(0, timeout_seconds=30.0)
        try:
            out.uniform_(2.0, 3.0)
            out.exponential_()
            assert not stream.query()
        finally:
            gate.open()
    stream.synchronize()
    assert bool((out.cpu() > 0).all())


def test_default_generators_are_each_devices_default(forked):
    """As torch.cuda.default_generators: one per device, in device order, the
    very generators the seeding functions use."""
    generators = torch.accinte.default_generators
    assert isinstance(generators, tuple)
    assert len(generators) == torch.accinte.device_count()
    assert [g.device for g in generators] == [
        torch.device("accinte", i) for i in range(torch.accinte.device_count())]
    generators[1].manual_seed(1234)
    assert seed_of(torch.accinte.get_rng_state(1)) == 1234
    torch.accinte.manual_seed(99)  # the current device, 0
    assert generators[0].initial_seed() == 99
    assert generators[1].initial_seed() == 1234


def test_random_submodule():
    """``torch.accinte.random`` holds the seeding functions, as torch.cuda's."""
    from torch.accinte.random import get_rng_state, manual_seed_all

    assert get_rng_state is torch.accinte.get_rng_state
    assert manual_seed_all is torch.accinte.manual_seed_all
    assert set(torch.accinte.random.__all__) == set(torch.cuda.random.__all__)
