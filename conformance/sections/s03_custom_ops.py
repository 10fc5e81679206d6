"""Chapter 03: custom operators. The kit cannot know a backend's operators
by name: it finds them through the dispatcher (the operators of namespaces
other than PyTorch's that have a PrivateUse1 kernel), builds inputs for
those whose arguments are tensors, and holds each to its CPU kernel and to
``torch.library.opcheck``. It also defines an operator of its own, as a
user of the backend would, with a kernel for the device."""

import torch

from .._api import Section
from .._helpers import COPIES, DEVICE, assert_same, backend_operators, overload, tensor_arguments

SECTION = Section(
    chapter="03", title="Custom operators", requires=(DEVICE, COPIES),
    missing="the backend defines no operator of its own namespace with a device "
            "kernel and a Meta (fake) kernel (TORCH_LIBRARY / torch.library)")


def _operators(ctx):
    names = backend_operators("PrivateUse1")
    if not names:
        raise AssertionError("no operator outside PyTorch's namespaces has a "
                             f"{ctx.device} kernel")
    return names


@SECTION.check
def operators_have_meta_kernels(ctx):
    """Every operator of the backend's namespaces with a device kernel also
    has a Meta kernel (or a fake implementation), which tracing, FakeTensor
    and ``torch.compile`` need."""
    lacking = [name for name in _operators(ctx)
               if not (torch._C._dispatch_has_kernel_for_dispatch_key(name, "Meta")
                       or torch._C._dispatch_has_kernel_for_dispatch_key(
                           name, "CompositeImplicitAutograd"))]
    assert not lacking, f"no Meta kernel: {', '.join(lacking)}"


# LITERALINCLUDE START: KIT_OPCHECK
@SECTION.check
def operators_match_cpu_and_pass_opcheck(ctx):
    """Each operator the kit can build inputs for (tensor arguments only)
    gives its CPU kernel's result on the device and passes ``opcheck``.
    ``test_aot_dispatch_dynamic`` saves the device's random number state, so
    it runs only once the device has a generator (chapter 08)."""
    tested = []
    for name in _operators(ctx):
        op = overload(name)
        args = tensor_arguments(op, lambda: torch.linspace(-2, 2, 12).reshape(3, 4))
        if args is None:
            continue
        device_args = [a.to(ctx.dev(0)) for a in args]
        result = op(*device_args)
        if torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU"):
            assert_same(result, op(*args), f"{name} against its CPU kernel")
        utils = ["test_schema", "test_faketensor"]
        if hasattr(ctx.module, "get_rng_state"):
            utils.append("test_aot_dispatch_dynamic")
        torch.library.opcheck(op, device_args, test_utils=utils)
        tested.append(name)
    assert tested, "no operator of the backend takes only tensor arguments"
# LITERALINCLUDE END: KIT_OPCHECK


_KIT_OPERATOR = {}


def _kit_operator(ctx):
    """``conformance_kit::scale``, defined once, with a CPU kernel and one
    for the device, both made of ATen operators."""
    if "op" in _KIT_OPERATOR:
        return _KIT_OPERATOR["op"]

    @torch.library.custom_op("conformance_kit::scale", mutates_args=())
    def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
        raise NotImplementedError("no kernel for this device")

    @scale.register_kernel("cpu")
    def _(x, factor):
        return x * factor

    @scale.register_kernel(ctx.device)
    def _(x, factor):
        assert x.device.type == ctx.device
        return x * factor

    @scale.register_fake
    def _(x, factor):
        return torch.empty_like(x)

    _KIT_OPERATOR["op"] = scale
    return scale


@SECTION.check(chapter="02", missing="an operator defined with torch.library and a "
               "kernel for the device does not run: its kernel needs ATen operators")
def a_users_operator_with_a_device_kernel(ctx):
    """An operator a user defines with ``torch.library.custom_op`` and
    ``register_kernel(NAME)`` runs its device kernel for device tensors and
    passes ``opcheck`` (this needs only ATen operators, chapter 02)."""
    scale = _kit_operator(ctx)
    x = torch.linspace(-1, 1, 8)
    assert_same(scale(x.to(ctx.dev(0)), 3.0), x * 3.0, "conformance_kit::scale")
    utils = ["test_schema", "test_faketensor"]
    torch.library.opcheck(scale, (x.to(ctx.dev(0)), 3.0), test_utils=utils)
