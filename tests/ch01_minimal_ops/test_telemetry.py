"""Device telemetry: ``torch.accinte.utilization``, ``memory_usage``,
``clock_rate``, ``temperature`` and ``power_draw``, held to what
``torch.cuda`` documents for its own and to the emulator's model
(docs/emulator/telemetry.md, "Device telemetry").

NB: the utilization rates cover the last second. A rate that must rise or
fall is polled until it does, within a bound far above that second; nothing
here depends on how fast the machine is.
"""

import inspect
import time

import pytest
import torch

from torch_accinte import _C

FUNCTIONS = ("utilization", "memory_usage", "clock_rate", "temperature", "power_draw")

#: Far longer than the sample period, for every "eventually".
PATIENCE_SECONDS = 30


def eventually(condition) -> bool:
    """Polls ``condition`` until it holds or PATIENCE_SECONDS have passed."""
    deadline = time.monotonic() + PATIENCE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.parametrize("name", FUNCTIONS)
def test_signature_is_torch_cudas(name):
    ours = inspect.signature(getattr(torch.accinte, name)).parameters
    theirs = inspect.signature(getattr(torch.cuda, name)).parameters
    assert list(ours) == list(theirs) == ["device"]
    assert ours["device"].default is theirs["device"].default is None


@pytest.mark.parametrize("device", [None, 0, 1, "accinte", "accinte:1",
                                    torch.device("accinte", 1)])
def test_values_are_in_their_ranges(device):
    assert 0 <= torch.accinte.utilization(device) <= 100
    assert 0 <= torch.accinte.memory_usage(device) <= 100
    # The model: a fixed clock; 30 to 80 degrees; 40 to 240 W.
    assert torch.accinte.clock_rate(device) == 1500
    assert 30 <= torch.accinte.temperature(device) <= 80
    assert 40_000 <= torch.accinte.power_draw(device) <= 240_000
    for name in FUNCTIONS:
        assert type(getattr(torch.accinte, name)(device)) is int


def test_utilization_rises_under_a_long_kernel_then_falls_back():
    # A kernel holding device 1's stream: as on CUDA, the device is busy for
    # as long as it runs, and only that device.
    gate = _C._testing.StreamGate(1)
    try:
        assert eventually(lambda: torch.accinte.utilization("accinte:1") >= 90
                          and torch.accinte.memory_usage(1) == 0
                          and torch.accinte.utilization() == 0)
        # Hotter and hungrier with the load (the rate only grows meanwhile).
        assert torch.accinte.temperature(1) >= 30 + 36
        assert torch.accinte.power_draw(torch.device("accinte:1")) >= 40_000 + 1_600 * 90
        assert torch.accinte.temperature(0) == 30
    finally:
        opened = time.monotonic()
        gate.open()
    torch.accinte.synchronize(1)
    assert eventually(lambda: torch.accinte.utilization(1) == 0)
    # The finished kernel is remembered for the sample period (a second,
    # from 0.99 on with the emulator's 10 ms steps), not dropped when it ends.
    assert time.monotonic() - opened >= 0.9
    assert torch.accinte.temperature(1) == 30
    assert torch.accinte.power_draw(1) == 40_000


def test_memory_usage_rises_under_copies():
    host = torch.ones(32 * 1024 * 1024, dtype=torch.uint8)
    device = torch.empty_like(host, device="accinte:1")

    def copying() -> bool:
        # NB: 200 ms of copies between two polls, so that eventually()'s
        # 10 ms pauses leave the copies most of every second.
        started = time.monotonic()
        while time.monotonic() - started < 0.2:
            device.copy_(host)
            host.copy_(device)
        return torch.accinte.memory_usage(1) >= 50

    assert eventually(copying)
    assert torch.equal(host, torch.ones_like(host))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_a_device_of_another_type_or_out_of_range_is_refused(name):
    function = getattr(torch.accinte, name)
    for other in ("cuda:0", torch.device("cpu"), "meta"):
        with pytest.raises(ValueError, match="Expected an accinte device"):
            function(other)
    for index in (2, -1):
        with pytest.raises(RuntimeError, match=f"invalid device index {index}"):
            function(index)
