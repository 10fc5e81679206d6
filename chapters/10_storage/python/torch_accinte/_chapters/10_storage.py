"""Chapter 10: the vendor's own storage class and tensor metadata.

Adds to ``torch.accinte`` the helpers that read what chapter 10's C++
attaches to accinte tensors: the format tag (a ``c10::BackendMeta`` that
``torch.save`` and ``torch.load`` carry) and the origin every accinte
storage records (its ``c10::StorageImpl`` class).
"""

from typing import NamedTuple, Optional, Union

import torch
from torch_accinte import _C, device_module

#: The formats a tensor can be tagged with; "plain" is the default.
TENSOR_FORMATS = ("plain", "tiled", "compressed")


# LITERALINCLUDE START: CH10_PY_FORMAT
def get_tensor_format(tensor: torch.Tensor) -> str:
    """The format tag of ``tensor``: one of :data:`TENSOR_FORMATS`.

    A tensor that was never tagged, including any tensor not on accinte, is
    ``"plain"``.
    """
    return _C._tensor_format(tensor)


def set_tensor_format(tensor: torch.Tensor, format: str) -> torch.Tensor:
    """Tags the accinte tensor ``tensor`` with ``format`` and returns it.

    The tag is metadata: the bytes do not change. ``detach()``,
    ``nn.Parameter`` and ``torch.save``/``torch.load`` onto accinte keep it;
    views, operator results and copies (``clone()``, ``.to()``) start
    ``"plain"``.
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
