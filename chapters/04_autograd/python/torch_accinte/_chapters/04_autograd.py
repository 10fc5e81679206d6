"""Chapter 04: autograd on accinte.

The C++ side does the work (the autograd kernels and the new ``accinte``
operators are registered when ``torch_accinte._C`` loads). This module
registers the exit hook that lets autograd's device threads finish a
backward pass's last steps before the interpreter finalizes.
"""

import atexit

import torch
from torch_accinte import _C


# LITERALINCLUDE START: CH04_PY_EXIT_HOOK
def _drain_autograd_device_threads() -> None:
    """Exit hook: waits, with the GIL released, until autograd's accinte
    device threads have let go of every finished backward pass.

    Such a thread drops its last reference to a pass after the pass has
    returned to Python, and that can release a Python object, which takes
    the GIL. Once the interpreter finalizes, a thread that asks for the GIL
    is ended by unwinding it, which aborts the process. Exit hooks run
    before that, while the GIL can still be handed over.
    """
    # NB: no accinte tensor, hence no accinte backward, before the device's
    # lazy initialization; a forked child may not use the device at all.
    if not torch.accinte.is_initialized():
        return
    try:
        _C._drain_autograd_device_threads()
    except RuntimeError:
        # NB: best effort: a device in an error state must not turn a clean
        # exit into a traceback.
        pass


atexit.register(_drain_autograd_device_threads)
# LITERALINCLUDE END: CH04_PY_EXIT_HOOK
