"""``torch_accinte.ops``: the operators of the ``accinte`` namespace.

The operators themselves live in PyTorch's dispatcher as
``torch.ops.accinte.*`` and work on accinte and CPU tensors, under
FakeTensor and under :py:func:`torch.compile`. These functions are typed,
documented entry points to them, the way ``torchvision.ops`` wraps
``torch.ops.torchvision``.
"""

import torch
from torch import Tensor

__all__ = ["custom_abs", "scaled_add"]


# LITERALINCLUDE START: CH03_PY_OPS_WRAPPERS
def custom_abs(x: Tensor) -> Tensor:
    """Element-wise absolute value of a floating-point or integer tensor.

    Returns a new contiguous tensor on ``x``'s device.
    """
    return torch.ops.accinte.custom_abs.default(x)


def scaled_add(x: Tensor, y: Tensor, alpha: float = 1.0) -> Tensor:
    """``x + alpha * y`` for two floating-point tensors of one shape, dtype
    and device. The result is laid out like ``x``."""
    return torch.ops.accinte.scaled_add.default(x, y, alpha)
# LITERALINCLUDE END: CH03_PY_OPS_WRAPPERS
