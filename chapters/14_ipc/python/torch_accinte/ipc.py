"""accinte tensors through ``torch.multiprocessing``, as CUDA tensors.

``torch.multiprocessing`` pickles tensors with reductions registered on its
``ForkingPickler``; PyTorch's own share CPU and CUDA storages only. The
reductions here handle accinte tensors and hand everything else to
PyTorch's: an accinte tensor travels as the IPC handle of its segment, its
offset, an event and a reference counter (``csrc/ipc.cpp``), and arrives as
a tensor over the same device memory.
"""

import os
import warnings
from multiprocessing.reduction import ForkingPickler

import torch
from torch.multiprocessing import reductions
from torch_accinte import _C, device_module

# LITERALINCLUDE START: CH14_PY_REDUCE
def _reduce_tensor(tensor: torch.Tensor):
    """How ``ForkingPickler`` sends a tensor: accinte's way for a dense
    accinte tensor, PyTorch's for any other (whose parts, such as a sparse
    tensor's indices and values, come back here)."""
    if (tensor.device.type != "accinte" or tensor.layout != torch.strided
            or tensor.is_nested):
        return reductions.reduce_tensor(tensor)
    # The checks PyTorch's reduction makes for every tensor.
    if tensor.requires_grad and not tensor.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, "
            "since autograd does not support crossing process boundaries.  "
            "If you just want to transfer the data, call detach() on the tensor "
            "before serializing (e.g., putting it on the queue).")
    torch.utils.hooks.warn_if_has_hooks(tensor)
    shared = None
    if tensor.untyped_storage().nbytes() > 0:
        # Each send first frees what consumers released since the last.
        _C._ipc_collect()  # LITERALINCLUDE EMPHASIZE
        shared = _C._ipc_share(tensor)  # LITERALINCLUDE EMPHASIZE
        # A tensor sent and received in this same process is its own
        # storage again (the emulator opens no handle of its own process).
        reductions.shared_cache[_cache_key(shared)] = reductions.StorageWeakRef(
            tensor.untyped_storage())
    return (_rebuild_tensor, (
        type(tensor), tensor.size(), tensor.stride(), tensor.storage_offset(),
        tensor.dtype, tensor.device.index, tensor.requires_grad, shared,
        os.getpid()))
# LITERALINCLUDE END: CH14_PY_REDUCE


def _cache_key(shared: tuple) -> tuple:
    """Which storage of which segment: its memory handle and offset."""
    return ("accinte", shared[1], shared[2])


# LITERALINCLUDE START: CH14_PY_REBUILD
def _rebuild_tensor(cls, size, stride, offset, dtype, device, requires_grad,
                    shared, producer):
    """The consumer's side of :func:`_reduce_tensor`."""
    device_module._lazy_init()
    if shared is None:
        storage = torch.UntypedStorage(0, device=torch.device("accinte", device))
    else:
        key = _cache_key(shared)
        storage = reductions.storage_from_cache(torch.UntypedStorage, key)
        if storage is None:
            storage = _C._ipc_open(shared, producer).untyped_storage()  # LITERALINCLUDE EMPHASIZE
            reductions.shared_cache[key] = reductions.StorageWeakRef(storage)
        else:
            # Mapped already (or this process's own storage, back home):
            # this send only needs its wait and its release.
            _C._ipc_accept_again(shared, producer)
    # The rest is what PyTorch's reduction of a CPU tensor does with its
    # storage: the layout, and requires_grad (a Parameter's through its
    # constructor).
    return reductions.rebuild_tensor(
        cls, torch.storage.TypedStorage(wrap_storage=storage, dtype=dtype, _internal=True),
        (offset, size, stride, requires_grad))
# LITERALINCLUDE END: CH14_PY_REBUILD


def _reduce_storage(storage):
    """Storages travel inside tensors only, as CUDA's."""
    if storage.device.type == "accinte":
        raise RuntimeError(
            "Cannot pickle accinte storage; try pickling an accinte tensor instead")
    return reductions.reduce_storage(storage)


def ipc_collect() -> None:
    """Frees the device memory of the tensors this process sent that every
    consumer has released, as ``torch.cuda.ipc_collect``.

    Sending a tensor keeps its memory from the caching allocator until the
    consumers release it; each later send collects what was released, and
    this call does it now (for a producer that stops sending).
    """
    device_module._lazy_init()
    _C._ipc_collect()


def _warn_if_in_flight() -> None:
    """At exit: say so if a consumer still holds, or has not yet received,
    a tensor this process sent."""
    if _C._ipc_collect() > 0:
        warnings.warn(
            "accinte: producer process is exiting before all shared accinte "
            "tensors were released by their consumers; a consumer that has "
            "not received its tensor yet will fail to map it",
            stacklevel=1)


# LITERALINCLUDE START: CH14_PY_REGISTER
def register() -> None:
    """Registers the reductions (after PyTorch's, which they wrap)."""
    for cls in (torch.Tensor, torch.nn.parameter.Parameter):
        ForkingPickler.register(cls, _reduce_tensor)
    ForkingPickler.register(torch.UntypedStorage, _reduce_storage)
# LITERALINCLUDE END: CH14_PY_REGISTER
