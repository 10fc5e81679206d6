"""Chapter 03: operators of the ``accinte`` namespace.

``accinte::custom_abs`` is defined in C++ (``csrc/custom_ops.cpp``) and is
registered when ``torch_accinte._C`` loads. This module defines the second
operator, ``accinte::scaled_add``, entirely from Python with
:py:func:`torch.library.custom_op`: its schema, its accinte and CPU kernels and
its fake implementation. ``torch_accinte.ops`` has the public wrappers.
"""

import torch
from torch import Tensor
from torch_accinte import _C


def _check_scaled_add(x: Tensor, y: Tensor) -> None:
    """The argument checks every implementation of scaled_add shares."""
    torch._check(
        x.device == y.device,
        lambda: "accinte::scaled_add: expected x and y on one device, "
        f"got {x.device} and {y.device}",
    )
    torch._check(
        x.dtype == y.dtype and x.dtype.is_floating_point,
        lambda: "accinte::scaled_add: expected x and y of one floating-point "
        f"dtype, got {x.dtype} and {y.dtype}",
    )
    torch._check(
        x.shape == y.shape,
        lambda: "accinte::scaled_add: expected x and y of one shape, "
        f"got {tuple(x.shape)} and {tuple(y.shape)}",
    )


# LITERALINCLUDE START: CH03_PY_SCALED_ADD_DEF
@torch.library.custom_op(
    "accinte::scaled_add", mutates_args=(), device_types="accinte"
)
def scaled_add(x: Tensor, y: Tensor, alpha: float = 1.0) -> Tensor:
    """``x + alpha * y``, computed by a kernel on the current stream."""
    _check_scaled_add(x, y)
    out = torch.empty_like(x)
    _C._launch_scaled_add(out, x, y, alpha)
    return out
# LITERALINCLUDE END: CH03_PY_SCALED_ADD_DEF


# LITERALINCLUDE START: CH03_PY_SCALED_ADD_CPU
@scaled_add.register_kernel("cpu")
def _scaled_add_cpu(x: Tensor, y: Tensor, alpha: float = 1.0) -> Tensor:
    _check_scaled_add(x, y)
    # NB: the result is allocated like the fake implementation's, so that
    # strides agree on every device.
    out = torch.empty_like(x)
    return torch.add(x, y, alpha=alpha, out=out)
# LITERALINCLUDE END: CH03_PY_SCALED_ADD_CPU


# LITERALINCLUDE START: CH03_PY_SCALED_ADD_FAKE
@scaled_add.register_fake
def _scaled_add_fake(x: Tensor, y: Tensor, alpha: float = 1.0) -> Tensor:
    _check_scaled_add(x, y)
    return torch.empty_like(x)
# LITERALINCLUDE END: CH03_PY_SCALED_ADD_FAKE
