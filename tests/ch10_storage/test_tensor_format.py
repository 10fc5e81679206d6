"""Chapter 10: the format tag of an accinte storage's bytes.

What the tag must do, each checked here: read back what was set; belong to
the storage, so that every tensor over the bytes (views, ``detach``,
``nn.Parameter``, ``.data``) has it; follow the bytes into a copy of all of
them (``clone``, ``copy.deepcopy``, another accinte device,
``load_state_dict``) when the copy's storage has no tag of its own, and
nowhere else (operator results, copies from the CPU and conversions start
plain; a tagged storage keeps its tag through copies into it and in-place
operators; a copy into part of a storage leaves its tag);
survive ``torch.save``/``torch.load`` onto accinte, ``weights_only``
included, through the PrivateUse1 backend-meta registry; be dropped by a
load onto the CPU; and refuse a format it does not know, whether set from
Python or read from a checkpoint.
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
    "view": lambda t: t.view(6),
    "slice": lambda t: t[1:],
    "transpose": lambda t: t.t(),
    "clone": lambda t: t.clone(),
    "copy.deepcopy": lambda t: copy.deepcopy(t),
    "copy.deepcopy of a Parameter": lambda t: copy.deepcopy(torch.nn.Parameter(t)),
    "to another device": lambda t: t.to("accinte:1"),
    "to another device and back": lambda t: t.to("accinte:1").to("accinte:0"),
    "copy_ into a whole tensor": lambda t: torch.empty(2, 3, device="accinte:1").copy_(t),
}
DROPPED = {
    "operator result": lambda t: t + 1,
    "to another dtype": lambda t: t.to(torch.float64),
    "clone of a slice": lambda t: t[1:].clone(),
    "to the CPU and back": lambda t: t.cpu().to("accinte"),
}


@pytest.mark.parametrize("derive", KEPT.values(), ids=KEPT.keys())
def test_the_tag_follows_the_bytes(derive):
    original = tagged()
    derived = derive(original)
    assert get_format(derived) == "tiled"
    torch.testing.assert_close(derived.cpu().reshape(-1).sort().values,
                               torch.arange(6.0)[-derived.numel():])
    assert get_format(original) == "tiled"


@pytest.mark.parametrize("derive", DROPPED.values(), ids=DROPPED.keys())
def test_new_bytes_start_plain(derive):
    original = tagged()
    assert get_format(derive(original)) == "plain"
    assert get_format(original) == "tiled"


def test_tagging_any_tensor_over_a_storage_tags_them_all():
    base = torch.arange(6.0, device="accinte").reshape(2, 3)
    views = [base.detach(), base[1], base.t(), base.view(6)]
    set_format(views[1], "compressed")
    assert get_format(base) == "compressed"
    assert [get_format(view) for view in views] == ["compressed"] * 4
    set_format(views[0], "plain")
    assert get_format(base) == "plain"


def test_a_copy_of_a_whole_storage_tags_an_untagged_destination():
    destination = torch.zeros(2, 3, device="accinte:1")
    destination.copy_(tagged("tiled"))
    assert get_format(destination) == "tiled"
    torch.testing.assert_close(destination.cpu(), torch.arange(6.0).reshape(2, 3))


def test_a_copy_into_a_tagged_storage_keeps_its_format():
    # The copy writes values, which a device stores in the destination's
    # format, whatever the source's.
    destination = tagged("compressed")
    destination.copy_(tagged("tiled"))
    destination.copy_(torch.zeros(2, 3))
    destination.copy_(torch.ones(2, 3, device="accinte"))
    assert get_format(destination) == "compressed"
    torch.testing.assert_close(destination.cpu(), torch.ones(2, 3))


def test_in_place_operators_keep_the_format():
    tensor = tagged("tiled")
    tensor.add_(1)
    tensor.mul_(torch.full((2, 3), 2.0, device="accinte"))
    torch._foreach_add_([tensor], 1.0)
    tensor.masked_fill_(tensor > 10, 0.0)
    assert get_format(tensor) == "tiled"
    expected = (torch.arange(6.0).reshape(2, 3) + 1) * 2 + 1
    torch.testing.assert_close(tensor.cpu(), expected.masked_fill(expected > 10, 0.0))


def test_a_copy_into_part_of_a_storage_leaves_its_format():
    destination = torch.zeros(2, 3, device="accinte")
    destination[1].copy_(tagged("tiled")[0])
    assert get_format(destination) == "plain"
    # So does a copy that broadcasts, or that converts the dtype.
    destination.copy_(tagged("tiled")[0])
    destination.copy_(tagged("tiled").to(torch.float64))
    assert get_format(destination) == "plain"


def test_storage_copies_take_the_format():
    source = tagged("tiled")
    copied = source.untyped_storage().clone()
    assert get_format(torch.empty(0, device="accinte").set_(copied)) == "tiled"
    target = torch.empty(2, 3, device="accinte:1")
    target.untyped_storage().copy_(source.untyped_storage())
    assert get_format(target) == "tiled"
    torch.testing.assert_close(target.cpu(), source.cpu())


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


def test_tensors_sharing_a_storage_share_the_tag_after_loading():
    base = tagged("tiled")
    view = base[1]
    loaded_base, loaded_view = round_trip([base, view])
    assert (get_format(loaded_base), get_format(loaded_view)) == ("tiled", "tiled")
    assert loaded_base.untyped_storage().data_ptr() == loaded_view.untyped_storage().data_ptr()
    set_format(loaded_view, "compressed")
    assert get_format(loaded_base) == "compressed"


def test_a_module_checkpoint_keeps_the_tags_of_its_parameters():
    model = torch.nn.Linear(3, 2).to("accinte")
    set_format(model.weight, "tiled")
    loaded = round_trip(model.state_dict())
    assert get_format(loaded["weight"]) == "tiled"
    assert get_format(loaded["bias"]) == "plain"
    # load_state_dict copies all of each loaded tensor's bytes onto all of
    # the parameter's: an untagged parameter's bytes are then in the
    # checkpoint's format, a tagged one keeps its own.
    fresh = torch.nn.Linear(3, 2).to("accinte")
    set_format(fresh.bias, "compressed")
    fresh.load_state_dict(loaded)
    assert get_format(fresh.weight) == "tiled"
    assert get_format(fresh.bias) == "compressed"
    torch.testing.assert_close(fresh.weight.cpu(), model.weight.cpu())
    torch.testing.assert_close(fresh.bias.cpu(), model.bias.cpu())
    # So does a CPU checkpoint, whose bytes have no format.
    fresh.load_state_dict(torch.nn.Linear(3, 2).state_dict())
    assert (get_format(fresh.weight), get_format(fresh.bias)) == ("tiled", "compressed")
    # With assign=True the module takes the loaded tensors themselves.
    assigned = torch.nn.Linear(3, 2).to("accinte")
    set_format(assigned.weight, "compressed")
    assigned.load_state_dict(round_trip(model.state_dict()), assign=True)
    assert get_format(assigned.weight) == "tiled"


def test_moves_and_deep_copies_of_a_module_keep_the_tags():
    model = torch.nn.Linear(3, 2).to("accinte")
    set_format(model.weight, "tiled")
    assert get_format(copy.deepcopy(model).weight) == "tiled"
    model.to("accinte:1")
    assert get_format(model.weight) == "tiled"
    assert get_format(model.bias) == "plain"
    model.cpu().to("accinte")
    assert get_format(model.weight) == "plain"


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
