"""Chapter 11: ``accl``, the ``torch.distributed`` backend of accinte.

Registers the backend under the name ``accl`` as the default for the
``accinte`` device, so ``init_process_group("cpu:gloo,accinte:accl")``,
``init_process_group("accl")`` and ``init_process_group()`` on a machine
whose accelerator is accinte all use it for accinte tensors.
"""

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
