"""``torch.accinte.amp``: the deprecated spellings ``torch.cuda.amp`` has.

Scripts written for CUDA before ``torch.amp`` became device-generic say
``torch.cuda.amp.autocast()`` and ``torch.cuda.amp.GradScaler()``; ported
to accinte they say ``torch.accinte.amp....``. PyTorch keeps the CUDA
spellings as thin subclasses of the generic classes that warn
(``FutureWarning``) on every use and name the replacement, and this module
does the same for accinte, so that such a script runs and is told what to
write instead.
"""

import warnings

import torch

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]


def _deprecated(old: str, new: str) -> None:
    # NB: stacklevel 3 names the line that called the deprecated spelling,
    # not this helper or the function that calls it.
    warnings.warn(
        f"`torch.accinte.amp.{old}` is deprecated. Please use `{new}` instead.",
        FutureWarning,
        stacklevel=3,
    )


# LITERALINCLUDE START: CH05_PY_DEPRECATED_AMP
class autocast(torch.amp.autocast):
    """``torch.autocast("accinte", ...)`` under its deprecated name.

    As ``torch.cuda.amp.autocast``: float16 unless told otherwise, and a
    ``FutureWarning`` each time one is made.
    """

    def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.float16,
                 cache_enabled: bool = True):
        _deprecated("autocast(args...)", "torch.amp.autocast('accinte', args...)")
        super().__init__("accinte", enabled=enabled, dtype=dtype,
                         cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """``torch.amp.GradScaler("accinte", ...)`` under its deprecated name."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True):
        _deprecated("GradScaler(args...)",
                    "torch.amp.GradScaler('accinte', args...)")
        super().__init__("accinte", init_scale=init_scale,
                         growth_factor=growth_factor,
                         backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)
# LITERALINCLUDE END: CH05_PY_DEPRECATED_AMP


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``torch.amp.custom_fwd(..., device_type="accinte")``, deprecated."""
    _deprecated("custom_fwd(args...)",
                "torch.amp.custom_fwd(args..., device_type='accinte')")
    return torch.amp.custom_fwd(fwd, device_type="accinte",
                                cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """``torch.amp.custom_bwd(..., device_type="accinte")``, deprecated."""
    _deprecated("custom_bwd(args...)",
                "torch.amp.custom_bwd(args..., device_type='accinte')")
    return torch.amp.custom_bwd(bwd, device_type="accinte")
