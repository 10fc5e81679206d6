"""Chapter 05: automatic mixed precision on accinte.

The cast policies are C++ kernels on the ``AutocastPrivateUse1`` dispatch key,
registered when ``torch_accinte._C`` loads. What :py:class:`torch.autocast` and
``torch.amp.GradScaler`` look up in Python, the device module's AMP functions,
is added here, with ``torch.accinte.amp``: the deprecated ``torch.cuda.amp``
spellings for accinte.
"""

import sys

import torch
from torch_accinte import amp, device_module


# LITERALINCLUDE START: CH05_PY_AMP_DTYPES
def get_amp_supported_dtype() -> list:
    """The dtypes ``torch.autocast("accinte", dtype=...)`` accepts.

    ``torch.autocast`` calls this for a PrivateUse1 device; for any other
    dtype it warns and disables autocast for the region.
    """
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether accinte computes in bfloat16 (as ``torch.cuda``'s)."""
    return True


device_module._extend(
    get_amp_supported_dtype=get_amp_supported_dtype,
    is_bf16_supported=is_bf16_supported,
)
# LITERALINCLUDE END: CH05_PY_AMP_DTYPES


# LITERALINCLUDE START: CH05_PY_AMP_MODULE
# ``torch.accinte.amp``, importable by that name as ``torch.cuda.amp`` is
# (``from torch.accinte.amp import GradScaler``): torch._register_device_module
# put ``torch.accinte`` in sys.modules, and the submodule goes beside it.
device_module._extend(amp=amp)
sys.modules["torch.accinte.amp"] = amp
# LITERALINCLUDE END: CH05_PY_AMP_MODULE
