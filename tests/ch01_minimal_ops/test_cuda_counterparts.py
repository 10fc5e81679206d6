"""Chapter 01's counterparts of ``torch.cuda`` names (issue #30), each held
to what ``torch.cuda`` documents for its own."""

import pytest
import torch


def test_error_classes_are_pytorchs():
    # As torch.cuda.OutOfMemoryError / AcceleratorError: PyTorch's classes,
    # so `except torch.accinte.OutOfMemoryError` catches what the allocator
    # raises.
    assert torch.accinte.OutOfMemoryError is torch.OutOfMemoryError
    assert torch.accinte.AcceleratorError is torch.AcceleratorError
    with pytest.raises(torch.accinte.OutOfMemoryError, match="out of memory"):
        torch.empty(2**62, dtype=torch.uint8, device="accinte")


def test_stream_returns_a_stream_context():
    on_one = torch.accinte.Stream(device=1)
    context = torch.accinte.stream(on_one)
    assert isinstance(context, torch.accinte.StreamContext)
    with context as entered:
        assert entered is on_one
        assert torch.accinte.current_stream(1) == on_one
    assert torch.accinte.current_stream(1).stream_id == 0
    with torch.accinte.StreamContext(None) as nothing:
        assert nothing is None
        assert torch.accinte.current_stream(0).stream_id == 0


def test_device_of_makes_the_objects_device_current():
    tensor = torch.empty(2, device="accinte:1")
    with torch.accinte.device_of(tensor):
        assert torch.accinte.current_device() == 1
    assert torch.accinte.current_device() == 0
    with torch.accinte.device_of(tensor.untyped_storage()):
        assert torch.accinte.current_device() == 1
    assert torch.accinte.current_device() == 0
    # NB: an object elsewhere changes nothing, as on CUDA.
    torch.accinte.set_device(1)
    try:
        with torch.accinte.device_of(torch.ones(2)):
            assert torch.accinte.current_device() == 1
        assert torch.accinte.current_device() == 1
    finally:
        torch.accinte.set_device(0)


def test_no_device_is_a_peer_of_another():
    # Emulated kernels touch only their own device's allocations.
    assert torch.accinte.can_device_access_peer(0, 1) is False
    assert torch.accinte.can_device_access_peer("accinte:1", 0) is False
    assert torch.accinte.can_device_access_peer(0, 0) is False
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.accinte.can_device_access_peer(5, 0)
    with pytest.raises(AssertionError, match="Invalid peer device id"):
        torch.accinte.can_device_access_peer(0, 5)


def test_streams_submodule():
    from torch.accinte.streams import Event, Stream

    assert Stream is torch.accinte.Stream
    assert Event is torch.accinte.Event
    assert torch.accinte.streams.Stream is Stream
