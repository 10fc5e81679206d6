"""Chapter 14: accinte tensors shared between processes.

Registers accinte's reductions with ``torch.multiprocessing`` (see
``torch_accinte/ipc.py``), so that its Queues, Pipes and ``Process``
arguments carry accinte tensors as they carry CUDA tensors, and adds
``torch.accinte.ipc_collect``.
"""

import os
from multiprocessing import util

from torch_accinte import _C, device_module, ipc

# LITERALINCLUDE START: CH14_PY_PLUGIN
ipc.register()
device_module._extend(ipc_collect=ipc.ipc_collect)


# NB: multiprocessing's finalizers, not atexit: they run when any process
# ends, children of fork and forkserver included (those end in os._exit(),
# which skips atexit), after the Queues have flushed (priority -5). At equal
# priority the later made runs first: a process releases what it received,
# then says whether what it sent is still held.


def _finalize_at_exit(*_) -> None:
    util.Finalize(None, ipc._warn_if_in_flight, exitpriority=-10)
    util.Finalize(None, _C._ipc_release_received_at_exit, exitpriority=-10)


_finalize_at_exit()
# A finalizer runs only in the process that made it, and a child process of
# multiprocessing drops its parent's: a child of fork makes its own, after
# multiprocessing has dropped them (register_after_fork) or, outside
# multiprocessing, at the fork.
util.register_after_fork(ipc, _finalize_at_exit)
os.register_at_fork(after_in_child=_finalize_at_exit)
# LITERALINCLUDE END: CH14_PY_PLUGIN
