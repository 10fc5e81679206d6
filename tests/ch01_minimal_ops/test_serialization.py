"""Chapter 01: accinte tensors, storages and modules through torch.save/load.

``torch.serialization`` tags every storage with its location
(``"accinte:0"``: PyTorch's PrivateUse1 tag uses the renamed backend) and
on load copies it back to that device with ``.to(device)``, after checking
that ``torch.accinte`` is registered, available and has that many devices.
``map_location`` (a string, a ``torch.device``, a dict of locations or a
callable) redirects it. Everything here rests on chapter 01: storages are
accinte memory read and written through the copy kernels.

Each round trip is compared with the CPU original and the result's device
is checked; views that share a storage must still share one after loading.
Also covered: the generated ``Tensor.is_accinte``, ``Module.accinte()`` and
``UntypedStorage.accinte()``/``.is_accinte``, a storage's device and size,
and what loading a checkpoint of a missing device says.
"""

import io
import pickle

import pytest
import torch
import torch_accinte  # noqa: F401
from conftest import run_python, stage_has

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int64, torch.int8, torch.uint8, torch.bool]


def cpu_sample(dtype, shape=(3, 4)):
    """Deterministic CPU values of ``dtype``, without touching the seed."""
    values = torch.arange(-5, -5 + torch.Size(shape).numel(),
                          dtype=torch.float64).reshape(shape) * 1.25
    if dtype == torch.bool:
        return values > 0
    if dtype == torch.uint8:
        return values.abs().to(dtype)
    return values.to(dtype)


def round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


def shares_storage(a, b):
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_tensor_round_trip_keeps_values_dtype_and_device(dtype):
    original = cpu_sample(dtype)
    loaded = round_trip(original.to("accinte:0"), weights_only=True)
    assert loaded.device == torch.device("accinte:0")
    assert loaded.dtype == dtype
    torch.testing.assert_close(loaded.cpu(), original)


def test_tensor_on_second_device_loads_there(tmp_path):
    original = cpu_sample(torch.float32)
    path = tmp_path / "second.pt"
    torch.save(original.to("accinte:1"), path)
    loaded = torch.load(path, weights_only=True)
    assert loaded.device == torch.device("accinte:1")
    torch.testing.assert_close(loaded.cpu(), original)
    assert torch.accinte.current_device() == 0


def test_views_sharing_a_storage_stay_shared():
    base_cpu = cpu_sample(torch.float32, (4, 6))
    base = base_cpu.to("accinte")
    # A slice (storage offset), a transposed view (strides), the base.
    checkpoint = {"base": base, "slice": base[1:, 2:], "t": base.t()}
    loaded = round_trip(checkpoint, weights_only=True)

    assert shares_storage(loaded["base"], loaded["slice"])
    assert shares_storage(loaded["base"], loaded["t"])
    assert loaded["slice"].storage_offset() == base[1:, 2:].storage_offset()
    assert loaded["t"].stride() == base.t().stride()
    for name, expected in [("base", base_cpu), ("slice", base_cpu[1:, 2:]),
                           ("t", base_cpu.t())]:
        assert loaded[name].device == torch.device("accinte:0")
        torch.testing.assert_close(loaded[name].cpu(), expected)

    # Shared for real: a write through the view shows in the base.
    loaded["slice"].copy_(torch.full((3, 4), 7.0))
    expected = base_cpu.clone()
    expected[1:, 2:] = 7.0
    torch.testing.assert_close(loaded["base"].cpu(), expected)


def test_views_stay_shared_when_mapped_to_the_cpu():
    base_cpu = cpu_sample(torch.int64, (4, 6))
    base = base_cpu.to("accinte")
    loaded = round_trip({"base": base, "row": base[2]}, map_location="cpu",
                        weights_only=True)
    assert loaded["base"].device.type == "cpu"
    assert shares_storage(loaded["base"], loaded["row"])
    torch.testing.assert_close(loaded["row"], base_cpu[2])


@pytest.mark.parametrize(
    "map_location, expected",
    [
        ("cpu", "cpu"),
        ("accinte", "accinte:0"),
        ("accinte:1", "accinte:1"),
        (torch.device("accinte", 1), "accinte:1"),
        (torch.device("cpu"), "cpu"),
        ({"accinte:0": "accinte:1"}, "accinte:1"),
        ({"accinte:0": "cpu"}, "cpu"),
        ({"accinte:1": "cpu"}, "accinte:0"),  # no entry for accinte:0
        (lambda storage, location: storage, "cpu"),
        (lambda storage, location: storage.accinte(1), "accinte:1"),
    ],
    ids=["cpu", "accinte", "accinte:1", "device_accinte:1", "device_cpu",
         "dict_to_accinte:1", "dict_to_cpu", "dict_other_device",
         "callable_keep_cpu", "callable_to_accinte:1"],
)
@pytest.mark.parametrize("weights_only", [True, False])
def test_map_location(map_location, expected, weights_only):
    base_cpu = cpu_sample(torch.float32)
    checkpoint = {"w": base_cpu.to("accinte:0"), "b": base_cpu[0].to("accinte:0")}
    loaded = round_trip(checkpoint, map_location=map_location,
                        weights_only=weights_only)
    for name, expected_value in [("w", base_cpu), ("b", base_cpu[0])]:
        assert loaded[name].device == torch.device(expected)
        torch.testing.assert_close(loaded[name].cpu(), expected_value)
    assert torch.accinte.current_device() == 0


def test_cpu_checkpoint_maps_onto_accinte():
    original = cpu_sample(torch.float64)
    loaded = round_trip(original, map_location="accinte:1", weights_only=True)
    assert loaded.device == torch.device("accinte:1")
    torch.testing.assert_close(loaded.cpu(), original)


def make_module():
    """A small module with parameters and buffers of known values."""
    module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    with torch.no_grad():
        for index, value in enumerate(module.state_dict().values()):
            if value.is_floating_point():
                value.copy_(torch.linspace(-1.0, 1.0, value.numel())
                            .reshape(value.shape) + index)
            else:
                value.fill_(index)
    return module


def assert_module_state(state, reference, device):
    assert state.keys() == reference.keys()
    for name, value in state.items():
        assert value.device == torch.device(device), name
        torch.testing.assert_close(value.cpu(), reference[name])


def test_state_dict_round_trip(tmp_path):
    reference = make_module().state_dict()
    module = make_module().accinte()
    path = tmp_path / "state.pt"
    torch.save(module.state_dict(), path)

    assert_module_state(torch.load(path, weights_only=True), reference, "accinte:0")
    assert_module_state(torch.load(path, map_location="cpu", weights_only=True),
                        reference, "cpu")

    fresh = torch.nn.Sequential(torch.nn.Linear(4, 3),
                                torch.nn.BatchNorm1d(3)).accinte(1)
    fresh.load_state_dict(torch.load(path, map_location="accinte:1",
                                     weights_only=True))
    assert_module_state(fresh.state_dict(), reference, "accinte:1")


def test_whole_module_round_trip():
    reference = make_module()
    module = make_module().accinte().eval()
    buffer = io.BytesIO()
    torch.save(module, buffer)

    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert type(loaded) is torch.nn.Sequential
    assert_module_state(loaded.state_dict(), reference.state_dict(), "accinte:0")

    buffer.seek(0)
    on_cpu = torch.load(buffer, map_location="cpu", weights_only=False)
    assert_module_state(on_cpu.state_dict(), reference.state_dict(), "cpu")

    # As for any device: a pickled module is not weights, refused as such.
    buffer.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        torch.load(buffer, weights_only=True)


@pytest.mark.skipif(not stage_has("02_fallback"),
                    reason="running a module needs chapter 02's operators")
def test_loaded_module_computes_like_the_cpu_original():
    reference = make_module().eval()
    loaded = round_trip(make_module().accinte(1).eval(), weights_only=False)
    inputs = cpu_sample(torch.float32, (5, 4))
    output = loaded(inputs.to("accinte:1"))
    assert output.device == torch.device("accinte:1")
    torch.testing.assert_close(output.cpu(), reference(inputs))


def test_module_accinte_moves_parameters_and_buffers():
    reference = make_module()
    module = make_module()
    assert module.accinte(1) is module
    assert_module_state(module.state_dict(), reference.state_dict(), "accinte:1")
    module.accinte()
    assert_module_state(module.state_dict(), reference.state_dict(), "accinte:0")
    assert all(p.is_accinte for p in module.parameters())


def test_tensor_is_accinte():
    cpu = cpu_sample(torch.float32)
    assert not cpu.is_accinte
    assert cpu.accinte().is_accinte
    assert cpu.accinte(1).is_accinte
    assert not cpu.accinte().cpu().is_accinte


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool], ids=str)
def test_untyped_storage_round_trip(dtype):
    original = cpu_sample(dtype)
    cpu_storage = original.untyped_storage()
    storage = cpu_storage.accinte()
    assert isinstance(storage, torch.UntypedStorage)
    assert storage.is_accinte and not cpu_storage.is_accinte
    assert storage.device == torch.device("accinte:0")
    assert storage.nbytes() == cpu_storage.nbytes() == original.numel() * original.element_size()
    assert cpu_storage.accinte(1).device == torch.device("accinte:1")

    back = storage.cpu()
    assert back.device.type == "cpu" and back.nbytes() == cpu_storage.nbytes()
    assert back.data_ptr() != cpu_storage.data_ptr()  # a copy, not the original
    assert bytes(back) == bytes(cpu_storage)


def test_tensor_storage_is_accinte_memory():
    tensor = cpu_sample(torch.float64).accinte(1)
    storage = tensor.untyped_storage()
    assert storage.is_accinte and storage.device == torch.device("accinte:1")
    assert storage.nbytes() == tensor.numel() * 8
    rebuilt = torch.empty(0, dtype=torch.float64).set_(storage.cpu()).view(3, 4)
    torch.testing.assert_close(rebuilt, cpu_sample(torch.float64))


def test_saved_untyped_storage_loads_like_on_the_cpu():
    cpu_storage = cpu_sample(torch.float32).untyped_storage()
    expected = round_trip(cpu_storage, weights_only=True)
    loaded = round_trip(cpu_storage.accinte(1), weights_only=True)
    # torch.load hands a saved storage back as a (uint8) TypedStorage, on
    # the CPU and on accinte alike.
    assert type(loaded) is type(expected)
    assert loaded._untyped_storage.device == torch.device("accinte:1")
    assert bytes(loaded._untyped_storage.cpu()) == bytes(cpu_storage)
    mapped = round_trip(cpu_storage.accinte(1), map_location="cpu", weights_only=True)
    assert mapped._untyped_storage.device.type == "cpu"
    assert bytes(mapped._untyped_storage) == bytes(cpu_storage)


SAVE_ON_DEVICE_1 = """
    import torch, torch_accinte
    torch.save({{"w": torch.arange(6.0).reshape(2, 3).to("accinte:1")}}, {path!r})
"""

LOAD_WITH_ONE_DEVICE = """
    import torch, torch_accinte
    assert torch.accinte.device_count() == 1
    try:
        torch.load({path!r}, weights_only=True)
    except RuntimeError as error:
        print("ERROR:", error)
    for location in ["cpu", {{"accinte:1": "accinte:0"}}]:
        loaded = torch.load({path!r}, map_location=location, weights_only=True)
        torch.testing.assert_close(loaded["w"].cpu(),
                                   torch.arange(6.0).reshape(2, 3))
        print("LOADED:", loaded["w"].device)
"""


def test_checkpoint_of_a_missing_device(tmp_path):
    path = str(tmp_path / "device1.pt")
    saved = run_python(SAVE_ON_DEVICE_1.format(path=path),
                       env={"ACCINTE_DEVICE_COUNT": "2"})
    assert saved.returncode == 0, saved.stderr
    loaded = run_python(LOAD_WITH_ONE_DEVICE.format(path=path),
                        env={"ACCINTE_DEVICE_COUNT": "1"})
    assert loaded.returncode == 0, loaded.stderr
    lines = loaded.stdout.splitlines()
    assert lines[0] == (
        "ERROR: Attempting to deserialize object on ACCINTE device 1 but "
        "torch.accinte.device_count() is 1. Please use torch.load with "
        "map_location to map your storages to an existing device.")
    assert lines[1:] == ["LOADED: cpu", "LOADED: accinte:0"]
