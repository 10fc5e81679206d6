"""Chapter 10: the vendor's own storage class and tensor metadata.

Adds to ``torch.accinte`` the helpers that read what chapter 10's C++ attaches
to every accinte storage (its :pt-src:`c10::StorageImpl` class): the format tag
of its bytes, which :py:func:`torch.save` and :py:func:`torch.load` carry, and
the origin of the bytes.
"""

from typing import NamedTuple, Optional, Union

import torch
from torch_accinte import _C, device_module

#: The formats a tensor can be tagged with; "plain" is the default.
TENSOR_FORMATS = ("plain", "tiled", "compressed")


# LITERALINCLUDE START: CH10_PY_FORMAT
def get_tensor_format(tensor: torch.Tensor) -> str:
    """The format tag of the bytes of ``tensor``'s storage: one of
    :data:`TENSOR_FORMATS`.

    A storage that was never tagged, and any tensor not on accinte, is
    ``"plain"``.
    """
    return _C._tensor_format(tensor)


def set_tensor_format(tensor: torch.Tensor, format: str) -> torch.Tensor:
    """Tags the storage of the accinte tensor ``tensor`` with ``format`` and
    returns the tensor.

    The tag describes the bytes, so every tensor over them (views,
    ``detach()``, ``nn.Parameter``) has it; it is metadata: the bytes do not
    change. A copy of all of the bytes onto an untagged storage
    (``clone()``, ``copy.deepcopy``, ``.to()`` another accinte device,
    ``load_state_dict``) takes it along, and ``torch.save``/``torch.load``
    onto accinte keep it; a tagged storage keeps its own through copies into
    it; operator results and copies from the CPU are ``"plain"``.
    """
    if format not in TENSOR_FORMATS:
        raise ValueError(
            f"unknown tensor format {format!r}; expected one of {TENSOR_FORMATS}"
        )
    _C._set_tensor_format(tensor, format)
    return tensor
# LITERALINCLUDE END: CH10_PY_FORMAT


# LITERALINCLUDE START: CH10_PY_ORIGIN
class StorageOrigin(NamedTuple):
    """Where a storage's bytes were placed when it was created."""

    #: Creation order of the storage in this process, from 1.
    serial: int
    #: The accinte device of the storage.
    device: int
    #: Start of the emulator allocation that held the bytes (0: no bytes, or
    #: bytes that are not an allocation of the device's).
    allocation_base: int
    #: Size in bytes of that allocation.
    allocation_size: int
    #: Offset of the storage's first byte in the allocation.
    offset: int
    #: Whether the bytes have moved since (``resize_`` of a growing storage).
    moved: bool  # LITERALINCLUDE EMPHASIZE


def storage_origin(
    obj: Union[torch.Tensor, torch.UntypedStorage, torch.TypedStorage],
) -> Optional[StorageOrigin]:
    """The origin recorded by the storage of an accinte tensor or storage.

    ``None`` for a storage that PyTorch built without its storage factory
    (``c10::make_storage_impl``), which chapter 10's class never sees.
    """
    if isinstance(obj, torch.TypedStorage):
        # NB: the attribute, not untyped(), which warns that TypedStorage is
        # deprecated.
        obj = obj._untyped_storage
    if isinstance(obj, torch.UntypedStorage):
        # NB: a byte tensor over the storage reaches the same StorageImpl.
        # LITERALINCLUDE EMPHASIZE NEXT
        obj = torch.empty(0, dtype=torch.uint8, device=obj.device).set_(obj)
    if not isinstance(obj, torch.Tensor):
        raise TypeError(
            f"storage_origin expects a tensor or a storage, got {type(obj).__name__}"
        )
    if obj.device.type != "accinte":
        raise ValueError(
            f"storage_origin expects an accinte tensor or storage, got one on {obj.device}"
        )
    # LITERALINCLUDE EMPHASIZE NEXT 2
    fields = _C._storage_origin(obj)
    return None if fields is None else StorageOrigin(*fields)
# LITERALINCLUDE END: CH10_PY_ORIGIN


device_module._extend(
    TENSOR_FORMATS=TENSOR_FORMATS,
    get_tensor_format=get_tensor_format,
    set_tensor_format=set_tensor_format,
    StorageOrigin=StorageOrigin,
    storage_origin=storage_origin,
)
