"""Chapter 10: the format tag, a ``c10::BackendMeta`` on accinte tensors.

What the tag must do, each checked here: read back what was set; follow the
tensor where PyTorch copies a tensor's metadata (``detach``,
``nn.Parameter``, ``.data``) and nowhere else (views, operator results,
copies start plain); survive ``torch.save``/``torch.load`` onto accinte,
``weights_only`` included, through the PrivateUse1 backend-meta registry;
be dropped by a load onto the CPU; and refuse a format it does not know,
whether set from Python or read from a checkpoint.
"""

import copy
import io

import pytest
import torch
import torch_accinte  # noqa: F401
from conftest import run_python

get_format = torch.accinte.get_tensor_format
set_format = torch.accinte.set_tensor_format


def round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


def tagged(format="tiled", device="accinte"):
    return set_format(torch.arange(6.0, device=device).reshape(2, 3), format)


def test_untagged_tensors_are_plain():
    assert torch.accinte.TENSOR_FORMATS == ("plain", "tiled", "compressed")
    assert get_format(torch.ones(2, device="accinte")) == "plain"
    assert get_format(torch.ones(2)) == "plain"


@pytest.mark.parametrize("format", ["tiled", "compressed", "plain"])
def test_set_and_get(format):
    tensor = tagged(format)
    assert get_format(tensor) == format
    set_format(tensor, "plain")
    assert get_format(tensor) == "plain"
    assert torch._C._get_tensor_metadata(tensor) == {}


def test_the_tag_is_metadata_and_leaves_the_bytes_alone():
    tensor = tagged("compressed")
    torch.testing.assert_close(tensor.cpu(), torch.arange(6.0).reshape(2, 3))
    torch.testing.assert_close((tensor * 2).cpu(), torch.arange(6.0).reshape(2, 3) * 2)


KEPT = {
    "detach": lambda t: t.detach(),
    "nn.Parameter": lambda t: torch.nn.Parameter(t),
    "Parameter.data": lambda t: torch.nn.Parameter(t).data,
}
DROPPED = {
    "view": lambda t: t.view(6),
    "slice": lambda t: t[1:],
    "operator result": lambda t: t + 1,
    "clone": lambda t: t.clone(),
    "to another device": lambda t: t.to("accinte:1"),
    "copy.deepcopy": lambda t: copy.deepcopy(t),
    "to the CPU and back": lambda t: t.cpu().to("accinte"),
}


@pytest.mark.parametrize("derive", KEPT.values(), ids=KEPT.keys())
def test_shallow_copies_keep_the_tag(derive):
    assert get_format(derive(tagged())) == "tiled"


@pytest.mark.parametrize("derive", DROPPED.values(), ids=DROPPED.keys())
def test_new_tensors_start_plain(derive):
    assert get_format(derive(tagged())) == "plain"


def test_changing_a_detached_copy_leaves_the_original():
    original = tagged("tiled")
    detached = original.detach()
    set_format(detached, "compressed")
    assert get_format(original) == "tiled"


@pytest.mark.parametrize("weights_only", [False, True])
@pytest.mark.parametrize("map_location", [None, "accinte:1", torch.device("accinte:0")])
def test_save_and_load_keep_the_tag(map_location, weights_only):
    saved = {"tiled": tagged("tiled", "accinte:1"),
             "compressed": tagged("compressed"),
             "plain": torch.ones(3, device="accinte")}
    loaded = round_trip(saved, map_location=map_location, weights_only=weights_only)
    for name, tensor in loaded.items():
        assert get_format(tensor) == name
        assert tensor.device.type == "accinte"
        torch.testing.assert_close(tensor.cpu(), saved[name].cpu())


def test_each_tensor_sharing_a_storage_keeps_its_own_tag():
    base = tagged("tiled")
    view = base[1]
    loaded_base, loaded_view = round_trip([base, view])
    assert (get_format(loaded_base), get_format(loaded_view)) == ("tiled", "plain")
    assert loaded_base.untyped_storage().data_ptr() == loaded_view.untyped_storage().data_ptr()


def test_a_module_checkpoint_keeps_the_tags_of_its_parameters():
    model = torch.nn.Linear(3, 2).to("accinte")
    set_format(model.weight, "tiled")
    loaded = round_trip(model.state_dict())
    assert get_format(loaded["weight"]) == "tiled"
    assert get_format(loaded["bias"]) == "plain"
    # NB: load_state_dict copies values into the destination's parameters,
    # which keep their own tags.
    fresh = torch.nn.Linear(3, 2).to("accinte")
    fresh.load_state_dict(loaded)
    assert get_format(fresh.weight) == "plain"
    torch.testing.assert_close(fresh.weight.cpu(), model.weight.cpu())


def test_loading_onto_the_cpu_drops_the_tag():
    loaded = round_trip(tagged("tiled"), map_location="cpu")
    assert loaded.device.type == "cpu"
    assert get_format(loaded) == "plain"
    assert get_format(loaded.to("accinte")) == "plain"


def test_the_checkpoint_holds_the_tag_as_metadata():
    assert torch._C._get_tensor_metadata(tagged("compressed")) == {
        "accinte.format.compressed": True}


def test_an_unknown_format_in_a_checkpoint_is_a_clear_error():
    tensor = torch.empty(2, device="accinte")
    with pytest.raises(RuntimeError, match="the checkpoint tags a tensor with the format "
                       "'sparse', which this version of torch_accinte does not know "
                       r"\(known formats: plain, tiled, compressed\)"):
        torch._C._set_tensor_metadata(tensor, {"accinte.format.sparse": True})
    assert get_format(tensor) == "plain"


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="unknown tensor format 'blocked'"):
        set_format(torch.ones(2, device="accinte"), "blocked")
    with pytest.raises(ValueError, match="only accinte tensors carry a format, got a tensor on cpu"):
        set_format(torch.ones(2), "tiled")


def test_weights_only_needs_the_origin_class_allowed():
    # NB: a checkpoint may hold a torch_accinte object, not only tensors;
    # weights_only loading refuses any class not declared safe.
    saved = {"x": tagged(), "origin": torch.accinte.storage_origin(tagged())}
    with pytest.raises(torch.serialization.pickle.UnpicklingError, match="StorageOrigin"):
        round_trip(saved, weights_only=True)
    with torch.serialization.safe_globals([torch.accinte.StorageOrigin]):
        loaded = round_trip(saved, weights_only=True)
    assert loaded["origin"] == saved["origin"]
    assert get_format(loaded["x"]) == "tiled"


SAVE_TAGGED_ON_DEVICE_1 = """
import torch, torch_accinte
x = torch.accinte.set_tensor_format(torch.arange(4.0, device="accinte:1"), "tiled")
torch.save(x, {path!r})
"""

LOAD_WITH_ONE_DEVICE = """
import torch, torch_accinte
try:
    torch.load({path!r})
except RuntimeError as error:
    print("ERROR:", str(error).splitlines()[0])
loaded = torch.load({path!r}, map_location="accinte:0")
print("LOADED:", loaded.device, torch.accinte.get_tensor_format(loaded))
"""


def test_a_tagged_checkpoint_of_a_missing_device(tmp_path):
    path = str(tmp_path / "tagged.pt")
    saved = run_python(SAVE_TAGGED_ON_DEVICE_1.format(path=path),
                       env={"ACCINTE_DEVICE_COUNT": "2"})
    assert saved.returncode == 0, saved.stderr
    loaded = run_python(LOAD_WITH_ONE_DEVICE.format(path=path),
                        env={"ACCINTE_DEVICE_COUNT": "1"})
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.splitlines() == [
        "ERROR: Attempting to deserialize object on ACCINTE device 1 but "
        "torch.accinte.device_count() is 1. Please use torch.load with "
        "map_location to map your storages to an existing device.",
        "LOADED: accinte:0 tiled",
    ]
