"""What several sections share: comparing with the CPU, and finding the
backend's own operators through the dispatcher."""

from __future__ import annotations

import torch

from ._api import Skip

#: Operator namespaces PyTorch itself registers device kernels in (c10d
#: registers its collectives for every backend key, PrivateUse1 included).
TORCH_NAMESPACES = frozenset({
    "aten", "prims", "prim", "c10d", "_c10d_functional", "_c10d_functional_autograd",
    "_dtensor", "quantized", "_quantized", "inductor", "profiler", "mkldnn", "onednn",
    "higher_order", "debugprims", "rngprims", "_test",
    # NB: the kit's own operators (section 03) are not the backend's.
    "conformance_kit",
})


def to_device(ctx, tensor: torch.Tensor, index: int = 0) -> torch.Tensor:
    """``tensor`` copied to the device: a CPU tensor made first, since the
    device may not fill tensors itself (a stage without the fallback)."""
    return tensor.to(ctx.dev(index))


def assert_same(actual: torch.Tensor, expected: torch.Tensor, what: str,
                exact: bool = False) -> None:
    """``actual`` (on the device) against ``expected`` (on the CPU):
    dtype, shape and values, with the dtype's tolerances unless ``exact``."""
    if actual.dtype != expected.dtype:
        raise AssertionError(f"{what}: dtype {actual.dtype}, the CPU gives {expected.dtype}")
    if actual.shape != expected.shape:
        raise AssertionError(f"{what}: shape {tuple(actual.shape)}, the CPU gives "
                             f"{tuple(expected.shape)}")
    got = actual.detach().cpu()
    if exact:
        if not torch.equal(got, expected.detach()):
            raise AssertionError(f"{what}: values differ from the CPU's")
    else:
        torch.testing.assert_close(got, expected.detach(), msg=lambda m: f"{what}: {m}")


def need_devices(ctx, count: int) -> None:
    """Skips unless the backend has ``count`` devices."""
    have = ctx.module.device_count()
    if have < count:
        raise Skip(f"needs {count} devices, the backend has {have}")


def backend_operators(dispatch_key: str = "PrivateUse1") -> list:
    """The operators of the backend's own namespaces (not PyTorch's) that
    have a kernel for ``dispatch_key``, as ``torch.ops`` overload packets'
    qualified names, sorted."""
    names = torch._C._dispatch_get_registrations_for_dispatch_key(dispatch_key)
    return sorted(name for name in names
                  if name.split("::")[0] not in TORCH_NAMESPACES)


def overload(qualified: str):
    """``torch.ops.NS.NAME.OVERLOAD`` for ``"NS::NAME[.OVERLOAD]"``."""
    namespace, rest = qualified.split("::")
    name, _, overload_name = rest.partition(".")
    packet = getattr(getattr(torch.ops, namespace), name)
    return getattr(packet, overload_name or "default")


def tensor_arguments(op, make):
    """Arguments for ``op`` when every argument without a default is a
    Tensor (``make()`` makes each); None for any other schema."""
    args = []
    for argument in op._schema.arguments:
        if argument.kwarg_only or argument.has_default_value():
            continue
        if str(argument.type) != "Tensor":
            return None
        args.append(make())
    return args
