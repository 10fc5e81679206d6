"""Chapter 11: ``accl``, the :py:mod:`torch.distributed` backend of accinte.

Registers the backend under the name ``accl`` as the default for the
``accinte`` device, so :py:func:`init_process_group("cpu:gloo,accinte:accl")
<torch.distributed.init_process_group>`, ``init_process_group("accl")`` and
``init_process_group()`` on a machine whose accelerator is accinte all use it
for accinte tensors.
"""

import functools
import inspect

import torch
import torch.distributed as dist
from torch_accinte import _C

#: The name ``init_process_group`` knows the backend by.
BACKEND_NAME = "accl"


# LITERALINCLUDE START: CH11_PY_REGISTER
def _create_backend(options, backend_options):
    """Called by ``torch.distributed`` for every group that uses ``accl``.

    ``options`` (``DistributedBackendOptions``) holds the group's store, this
    process's rank in it, its size and timeout. The bytes travel through a
    gloo backend of CPU tensors over the same store, created here with the
    group's timeout so that a rank that never arrives ends the collective
    with an error instead of a hang.
    """
    host = dist.ProcessGroupGloo(
        options.store, options.group_rank, options.group_size, options.timeout
    )
    return _C._create_accl_backend(options.group_rank, options.group_size, host)


if dist.is_available():
    dist.Backend.register_backend(
        BACKEND_NAME, _create_backend, extended_api=True, devices=["accinte"]
    )
# LITERALINCLUDE END: CH11_PY_REGISTER


# LITERALINCLUDE START: CH11_PY_DEFAULT_BACKEND
#: Releases that choose a group's default backend wrongly when the device's
#: backend is neither NCCL nor XCCL (pytorch/pytorch#189193, fixed in 2.14):
#: a group made with no backend names gloo, which it never created, so that
#: DistributedDataParallel fails with "Could not find backend type 1"; a
#: "cpu:gloo,accinte:accl" group names none. The tests check this list both
#: ways, on every supported release.
NEEDS_DEFAULT_BACKEND_FIX = torch.torch_version.TorchVersion(torch.__version__) < "2.14"


def _with_accl_as_default(create_group):
    """Wraps ``torch.distributed``'s group factory so that a group with accl
    among its backends takes accl (a CUSTOM backend) as its default, as the
    fixed releases do: the accelerator's backend before the CPU's."""
    signature = inspect.signature(create_group)

    @functools.wraps(create_group)
    def create_group_with_accl_as_default(*args, **kwargs):
        group, store = create_group(*args, **kwargs)
        backend = signature.bind(*args, **kwargs).arguments["backend"]
        backends = dist.distributed_c10d.BackendConfig(backend).get_device_backend_map()
        if isinstance(group, dist.ProcessGroup) and BACKEND_NAME in backends.values():
            group._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)
        return group, store

    return create_group_with_accl_as_default


if dist.is_available() and NEEDS_DEFAULT_BACKEND_FIX:
    dist.distributed_c10d._new_process_group_helper = _with_accl_as_default(
        dist.distributed_c10d._new_process_group_helper
    )
# LITERALINCLUDE END: CH11_PY_DEFAULT_BACKEND
