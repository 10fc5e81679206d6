"""Chapter 10: every accinte storage is an ``AccinteStorageImpl``.

PyTorch creates storages through ``c10::make_storage_impl``, which calls the
function chapter 10 registers with ``c10::SetStorageImplCreate``. These
tests reach each way an accinte storage comes to be (chapter 01's
factories, operator results, ``torch.UntypedStorage``, ``torch.load``,
copy-on-write clones) and check that its storage is of chapter 10's class:
``storage_origin`` is ``None`` for any other. The recorded origin must agree
with what the storage really holds: its device, and an emulator allocation
that contains its bytes.
"""

import io

import pytest
import torch
import torch_accinte  # noqa: F401

origin = torch.accinte.storage_origin


def data_address(tensor):
    return tensor.untyped_storage().data_ptr()


def assert_describes(recorded, tensor):
    """``recorded`` is the origin of ``tensor``'s storage, unmoved."""
    assert recorded is not None, "the storage is not an AccinteStorageImpl"
    assert recorded.device == tensor.device.index
    assert not recorded.moved
    nbytes = tensor.untyped_storage().nbytes()
    if nbytes == 0:
        return
    assert recorded.allocation_base + recorded.offset == data_address(tensor)
    assert recorded.offset + nbytes <= recorded.allocation_size


CREATIONS = {
    "empty": lambda d: torch.empty(2, 3, device=d),
    "empty channels_last": lambda d: torch.empty(1, 2, 3, 3, device=d,
                                                 memory_format=torch.channels_last),
    "empty_strided": lambda d: torch.empty_strided((2, 3), (1, 2), device=d),
    "zeros": lambda d: torch.zeros(4, device=d),
    "copy from the CPU": lambda d: torch.arange(5.0).to(d),
    "native kernel result": lambda d: -torch.ones(3, device=d),
    "fallback result": lambda d: torch.ones(3, device=d).sin(),
    "copy-on-write clone": lambda d: torch._lazy_clone(torch.ones(3, device=d)),
    "empty tensor": lambda d: torch.empty(0, device=d),
}


@pytest.mark.parametrize("device", ["accinte:0", "accinte:1"])
@pytest.mark.parametrize("make", CREATIONS.values(), ids=CREATIONS.keys())
def test_every_way_of_making_a_tensor_gives_the_storage_class(make, device):
    tensor = make(device)
    assert_describes(origin(tensor), tensor)


@pytest.mark.parametrize("device", ["accinte:0", "accinte:1"])
def test_untyped_storage_made_from_python(device):
    storage = torch.UntypedStorage(64, device=device)
    recorded = origin(storage)
    assert recorded is not None and recorded.device == storage.device.index
    assert recorded.allocation_base + recorded.offset == storage.data_ptr()
    typed = torch.TypedStorage(wrap_storage=storage, dtype=torch.uint8, _internal=True)
    assert origin(typed) == recorded


def test_loaded_tensors_get_the_storage_class():
    buffer = io.BytesIO()
    torch.save(torch.arange(4.0, device="accinte:1"), buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    assert_describes(origin(loaded), loaded)
    torch.testing.assert_close(loaded.cpu(), torch.arange(4.0))


def test_views_share_their_base_storage_and_its_origin():
    base = torch.zeros(4, 4, device="accinte")
    recorded = origin(base)
    for view in (base[1:], base.t(), base.view(16), base.diagonal()):
        assert origin(view) == recorded


def test_serials_tell_storages_apart_even_at_a_reused_address():
    first = torch.empty(256, device="accinte")
    first_origin = origin(first)
    del first  # chapter 07's allocator hands the same block out again
    second = torch.empty(256, device="accinte")
    second_origin = origin(second)
    assert second_origin.serial > first_origin.serial


def test_small_tensors_share_one_emulator_allocation():
    # NB: chapter 07's caching allocator carves small blocks out of one
    # segment; the origin shows it as one allocation at two offsets.
    a = torch.empty(16, device="accinte")
    b = torch.empty(16, device="accinte")
    origin_a, origin_b = origin(a), origin(b)
    assert origin_a.allocation_base == origin_b.allocation_base
    assert origin_a.offset != origin_b.offset
    assert_describes(origin_a, a)
    assert_describes(origin_b, b)


def test_growing_resize_moves_the_bytes_and_keeps_the_serial():
    # NB: not torch.arange(3.0, device=...), whose out= kernel already grows
    # an empty result with resize_.
    tensor = torch.arange(3.0).to("accinte")
    before = origin(tensor)
    tensor.resize_(1 << 20)
    after = origin(tensor)
    assert after.moved
    assert after._replace(moved=False) == before
    torch.testing.assert_close(tensor[:3].cpu(), torch.arange(3.0))


def test_cpu_tensors_and_other_objects_are_refused():
    with pytest.raises(ValueError, match="expects an accinte tensor or storage, got one on cpu"):
        origin(torch.ones(2))
    with pytest.raises(TypeError, match="expects a tensor or a storage, got list"):
        origin([1, 2])
