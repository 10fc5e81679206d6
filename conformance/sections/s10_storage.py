"""Storage and serialization: device tensors through ``torch.save`` and
``torch.load``, every ``map_location`` form, ``weights_only``.

What a user sees of this section needs only chapter 01 (PyTorch's
PrivateUse1 location tag and the device module that ``torch.load`` asks
for ``device_count``), so every check here names chapter 01. Chapter 10's
own mechanism, a storage class of the backend and its tensor metadata,
changes nothing that PyTorch's public API shows for a backend whose
metadata is empty, so the section has no chapter-10 check: a backend's
format tags are tested by its own tests.

Each check compares the loaded values with the CPU's and the device with
what the location tag or ``map_location`` asked for, as for CUDA.
"""

import io

import torch

from .._api import Section
from .._helpers import COPIES, DEVICE, need_devices

SECTION = Section(
    chapter="10", title="Storage and serialization", requires=(DEVICE, COPIES),
    missing="device tensors do not survive torch.save/torch.load")

_CH01 = dict(chapter="01")


def _round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


def _values():
    return torch.arange(12, dtype=torch.float32).reshape(3, 4) / 7


@SECTION.check(missing="torch.load does not rebuild a device tensor on the device it was saved on "
                       "(location tag or device module missing)", **_CH01)
def save_load_keeps_the_device(ctx):
    for weights_only in (True, False):
        loaded = _round_trip(_values().to(ctx.dev()), weights_only=weights_only)
        assert loaded.device == ctx.dev(), \
            f"weights_only={weights_only}: loaded on {loaded.device}, saved on {ctx.dev()}"
        torch.testing.assert_close(loaded.cpu(), _values(), rtol=0, atol=0)


@SECTION.check(missing="a map_location form does not map device storages as for CUDA", **_CH01)
def map_location_forms(ctx):
    need_devices(ctx, 2)
    saved = _values().to(ctx.dev(1))
    name = ctx.device
    forms = [
        ("'cpu'", "cpu", torch.device("cpu")),
        ("torch.device('cpu')", torch.device("cpu"), torch.device("cpu")),
        (f"'{name}:0'", f"{name}:0", ctx.dev(0)),
        (f"torch.device('{name}', 0)", ctx.dev(0), ctx.dev(0)),
        (f"{{'{name}:1': '{name}:0'}}", {f"{name}:1": f"{name}:0"}, ctx.dev(0)),
        ("{'cpu': ...} (no entry for the tag)", {"cpu": f"{name}:0"}, ctx.dev(1)),
        ("lambda storage, location: storage", lambda storage, location: storage, torch.device("cpu")),
        ("a callable returning None", lambda storage, location: None, ctx.dev(1)),
    ]
    for text, form, want in forms:
        for weights_only in (True, False):
            loaded = _round_trip(saved, map_location=form, weights_only=weights_only)
            assert loaded.device == want, \
                f"map_location={text}, weights_only={weights_only}: on {loaded.device}, expected {want}"
            torch.testing.assert_close(loaded.cpu(), _values(), rtol=0, atol=0)
    # a CPU checkpoint onto the device
    loaded = _round_trip(_values(), map_location=ctx.dev(1))
    assert loaded.device == ctx.dev(1), f"a CPU tensor mapped to {ctx.dev(1)} is on {loaded.device}"


@SECTION.check(missing="torch.load of a missing device index does not fail with a clear error", **_CH01)
def missing_device_is_an_error(ctx):
    count = torch.accelerator.device_count()
    try:
        _round_trip(_values().to(ctx.dev()), map_location=f"{ctx.device}:{count + 5}")
    except RuntimeError as error:
        assert "device" in str(error).lower(), f"the error does not name the device: {error}"
        assert "INTERNAL ASSERT" not in str(error), f"an internal assert, not a user error: {error}"
    else:
        raise AssertionError(f"loading onto {ctx.device}:{count + 5} of {count} devices succeeded")


@SECTION.check(missing="views saved together do not load as views of one device storage", **_CH01)
def shared_storage_survives(ctx):
    base = _values().to(ctx.dev())
    loaded_base, loaded_view = _round_trip([base, base[1:, ::2]])
    assert loaded_view.untyped_storage().data_ptr() == loaded_base.untyped_storage().data_ptr(), \
        "a view and its base were loaded onto two storages"
    loaded_base.copy_(torch.zeros(3, 4))
    assert loaded_view.cpu().eq(0).all(), "a write to the loaded base is not seen by the loaded view"
    storage = _round_trip(base.untyped_storage())
    assert storage.device == ctx.dev() and storage.nbytes() == base.untyped_storage().nbytes(), \
        "a device UntypedStorage did not load as one of the same device and size"


@SECTION.check(missing="a module's state_dict does not round-trip on the device", **_CH01)
def state_dict_round_trip(ctx):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        cpu_model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).to(ctx.dev())
    state = _round_trip(cpu_model.to(ctx.dev()).state_dict(), weights_only=True)
    for key, value in state.items():
        assert value.device == ctx.dev(), f"state_dict entry {key} loaded on {value.device}"
    model.load_state_dict(state)
    cpu_model = cpu_model.cpu()
    for (key, value), (_, want) in zip(model.state_dict().items(), cpu_model.state_dict().items()):
        assert value.device == ctx.dev(), f"{key} left the device in load_state_dict"
        torch.testing.assert_close(value.cpu(), want, rtol=0, atol=0, msg=f"{key} changed")


@SECTION.check(missing="weights_only=True does not refuse an undeclared class, or safe_globals "
                       "does not let it through", **_CH01)
def weights_only_refuses_unknown_classes(ctx):
    payload = {"t": _values().to(ctx.dev()), "extra": _Payload(3)}
    try:
        _round_trip(payload, weights_only=True)
    except Exception as error:  # pickle.UnpicklingError
        assert "weights_only" in str(error) or "Unsupported global" in str(error), \
            f"an unclear error: {error}"
    else:
        raise AssertionError("weights_only=True loaded an undeclared class")
    with torch.serialization.safe_globals([_Payload]):
        loaded = _round_trip(payload, weights_only=True)
    assert loaded["t"].device == ctx.dev() and loaded["extra"].value == 3


class _Payload:
    def __init__(self, value):
        self.value = value
