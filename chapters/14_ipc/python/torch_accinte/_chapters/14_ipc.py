"""Chapter 14: accinte tensors shared between processes.

Registers accinte's reductions with ``torch.multiprocessing`` (see
``torch_accinte/ipc.py``), so that its Queues, Pipes and ``Process``
arguments carry accinte tensors as they carry CUDA tensors, and adds
``torch.accinte.ipc_collect``.
"""

import atexit

from torch_accinte import device_module, ipc

# LITERALINCLUDE START: CH14_PY_PLUGIN
ipc.register()
atexit.register(ipc._warn_if_in_flight)
device_module._extend(ipc_collect=ipc.ipc_collect)
# LITERALINCLUDE END: CH14_PY_PLUGIN
