"""Chapter 01's counterparts of ``torch.cuda`` names (issue #30), each held
to what ``torch.cuda`` documents for its own."""

import warnings

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


def test_a_device_error_is_an_accelerator_error():
    # As a CUDA error: torch.AcceleratorError, carrying the runtime's code.
    from torch_accinte import _C

    _C._testing.launch_failing_kernel(0, "the test's kernel failed")
    with pytest.raises(torch.accinte.AcceleratorError,
                       match="accinteErrorLaunchFailure.*the test's kernel failed") as info:
        torch.accinte.synchronize()
    assert info.value.error_code == 9  # accinteErrorLaunchFailure
    torch.accinte.synchronize()


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


@pytest.fixture
def sync_debug_restored():
    """Puts the process-wide sync debug mode back, whatever the test does."""
    yield
    torch.accinte.set_sync_debug_mode("default")


SYNC = "called a synchronizing accinte operation"


def test_sync_debug_mode_warns_on_synchronizing_operations(sync_debug_restored):
    from torch_accinte import _C

    device_tensor = torch.empty(4, device="accinte")
    other = torch.empty(4, device="accinte")
    assert torch.accinte.get_sync_debug_mode() == 0
    torch.accinte.set_sync_debug_mode("warn")
    assert torch.accinte.get_sync_debug_mode() == 1
    for synchronizing in (lambda: device_tensor.cpu(),
                          lambda: device_tensor[0].item(),
                          lambda: torch.zeros(4).to("accinte"),
                          lambda: torch.accinte.current_stream().synchronize()):
        with pytest.warns(UserWarning, match=SYNC):
            synchronizing()
    # What never makes the host wait: a copy between device tensors, an
    # asynchronous copy into pinned memory, and synchronize() of a device,
    # which is meant.
    pinned = _C._testing.pinned_bytes(16).view(torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        other.copy_(device_tensor)
        pinned.copy_(device_tensor, non_blocking=True)
        torch.accinte.synchronize()
    torch.accinte.set_sync_debug_mode(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        device_tensor.cpu()


def test_sync_debug_mode_error_raises_before_the_copy(sync_debug_restored):
    device_tensor = torch.empty(4, device="accinte")
    host = torch.full((4,), 7.0)
    torch.accinte.set_sync_debug_mode(2)
    assert torch.accinte.get_sync_debug_mode() == 2
    with pytest.raises(RuntimeError, match=SYNC):
        host.copy_(device_tensor)
    with pytest.raises(RuntimeError, match=SYNC):
        device_tensor[0].item()
    torch.accinte.set_sync_debug_mode("default")
    assert torch.equal(host, torch.full((4,), 7.0))


def test_sync_debug_mode_rejects_unknown_modes(sync_debug_restored):
    with pytest.raises(RuntimeError, match="expected one of `default`, `warn`, `error`"):
        torch.accinte.set_sync_debug_mode("loud")
    with pytest.raises(ValueError, match="invalid value of debug_mode"):
        torch.accinte.set_sync_debug_mode(3)
    assert torch.accinte.get_sync_debug_mode() == 0
