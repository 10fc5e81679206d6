"""Chapter 04: derivatives of the ``accinte`` operators.

``custom_abs`` (chapter 03) gets its derivative from a kernel for
AutogradPrivateUse1; ``custom_autograd_fn_returns_self`` and
``custom_autograd_fn_aliasing`` are torch::autograd::Function operators that
return their input or a view of it; ``custom_l1_norm`` is
CompositeImplicitAutograd. Gradients are compared with finite differences
(gradcheck, float64) and with the CPU.
"""

import pytest
import torch
import torch._dynamo.testing
import torch_accinte  # noqa: F401
from torch.autograd import gradcheck, gradgradcheck

OPS = torch.ops.accinte
ALIASING_OPS = {
    "returns_self": OPS.custom_autograd_fn_returns_self,
    "aliasing": OPS.custom_autograd_fn_aliasing,
}
DIFFERENTIABLE_OPS = {
    "custom_abs": OPS.custom_abs,
    "custom_l1_norm": OPS.custom_l1_norm,
    **ALIASING_OPS,
}
INPUTS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.t(),
    "step-slice": lambda t: t[::2, 1:],
}


def sample(shape, dtype=torch.float64, seed=0):
    """Deterministic values away from 0, where |x| has no derivative."""
    generator = torch.Generator().manual_seed(seed)
    values = torch.rand(shape, generator=generator, dtype=torch.float64)
    signs = torch.randint(0, 2, shape, generator=generator) * 2 - 1
    return ((values + 0.1) * signs).to(dtype)


def leaf(cpu, device):
    return cpu.to(device, copy=True).requires_grad_()


# --------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------


def test_schemas_and_dispatch_keys():
    def has(op, key):
        return torch._C._dispatch_has_kernel_for_dispatch_key(op, key)

    for name in ("custom_abs", "custom_autograd_fn_returns_self",
                 "custom_autograd_fn_aliasing"):
        for key in ("AutogradPrivateUse1", "AutogradCPU"):
            assert has(f"accinte::{name}", key), (name, key)
    for name in ALIASING_OPS.values():
        schema = str(name.default._schema)
        assert schema.endswith("(Tensor(a) self) -> Tensor(a)"), schema
    # The composite has one kernel, for CompositeImplicitAutograd, and none
    # for accinte or for any autograd key of its own.
    assert has("accinte::custom_l1_norm", "CompositeImplicitAutograd")
    for key in ("PrivateUse1", "AutogradPrivateUse1", "CompositeExplicitAutograd"):
        assert not has("accinte::custom_l1_norm", key), key


# --------------------------------------------------------------------------
# gradcheck and gradgradcheck, float64
# --------------------------------------------------------------------------


@pytest.mark.parametrize("layout", INPUTS.values(), ids=INPUTS.keys())
@pytest.mark.parametrize("op", DIFFERENTIABLE_OPS.values(),
                         ids=DIFFERENTIABLE_OPS.keys())
@pytest.mark.parametrize("device", ["accinte", "cpu"])
def test_gradcheck_and_gradgradcheck(op, layout, device):
    x = layout(sample((4, 5)).to(device)).requires_grad_()
    assert gradcheck(op, (x,))
    assert gradgradcheck(op, (x,))


@pytest.mark.parametrize("op", DIFFERENTIABLE_OPS.values(),
                         ids=DIFFERENTIABLE_OPS.keys())
def test_gradients_live_on_accinte_and_equal_the_cpu(op, accinte):
    cpu = sample((3, 4))
    x, reference = leaf(cpu, accinte), leaf(cpu, "cpu")
    upstream = sample(op(reference).shape, seed=1)
    op(x).backward(upstream.to(accinte))
    op(reference).backward(upstream)
    assert x.grad.device == accinte
    torch.testing.assert_close(x.grad.cpu(), reference.grad)


def test_custom_abs_gradient_is_sign(accinte):
    cpu = sample((6,), torch.float32)
    x = leaf(cpu, accinte)
    OPS.custom_abs(x).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), cpu.sign())
    # Double backward: d/dx of sum(grad * sign(x)) is 0 almost everywhere,
    # and d/d(grad) is sign(x).
    x = leaf(cpu, accinte)
    (grad,) = torch.autograd.grad(OPS.custom_abs(x).sum(), x, create_graph=True)
    assert grad.requires_grad
    (second,) = torch.autograd.grad((grad * grad).sum(), x, allow_unused=True,
                                    materialize_grads=True)
    torch.testing.assert_close(second.cpu(), torch.zeros(6))


def test_custom_abs_of_input_modified_before_backward_is_an_error(accinte):
    x = leaf(sample((5,)), accinte).clone()
    y = OPS.custom_abs(x)
    x.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_custom_l1_norm_decomposes_into_custom_abs_and_sum(accinte):
    cpu = sample((3, 5))
    x = leaf(cpu, accinte)
    norm = OPS.custom_l1_norm(x)
    torch.testing.assert_close(norm.cpu(), cpu.abs().sum())
    # The graph holds the parts' nodes, not one of the composite's own.
    assert norm.grad_fn.name() == "SumBackward0"
    (abs_node, _), = norm.grad_fn.next_functions
    assert abs_node.name().endswith("accinte::CustomAbsFunction>")


@pytest.mark.parametrize("device", ["accinte", "cpu"])
def test_bad_dtype_is_the_same_error_with_autograd(device):
    z = torch.ones(3, dtype=torch.complex64, device=device, requires_grad=True)
    for op in (OPS.custom_abs, OPS.custom_l1_norm):
        with pytest.raises(RuntimeError, match="accinte::custom_abs: expected "
                           "a floating-point or integer tensor, got ComplexFloat"):
            op(z)


# --------------------------------------------------------------------------
# opcheck
# --------------------------------------------------------------------------

# NB: opcheck's test_aot_dispatch_* utilities need torch.accinte's random
# number generator state (see chapter 03's tests); chapter 08 adds it.
OPCHECK_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor")
# NB: AOTAutograd saves and restores every device's random state, so its
# check can run once accinte has a generator (chapter 08).
AOT_DISPATCH = hasattr(torch.accinte, "get_rng_state")
if AOT_DISPATCH:
    OPCHECK_UTILS += ("test_aot_dispatch_dynamic",)
# Functionalization, which AOTAutograd runs, refuses a custom operator whose
# result is a view of its input (a `Tensor(a) -> Tensor(a)` schema whose
# kernel really aliases); see test_aot_dispatch_refuses_a_custom_view.
NOT_FUNCTIONALIZABLE = {"aliasing"}


@pytest.mark.parametrize("layout", INPUTS.values(), ids=INPUTS.keys())
@pytest.mark.parametrize("op", DIFFERENTIABLE_OPS.values(),
                         ids=DIFFERENTIABLE_OPS.keys())
@pytest.mark.parametrize("device", ["accinte", "cpu"])
def test_opcheck_with_inputs_that_require_grad(op, layout, device):
    x = layout(sample((4, 6), torch.float32).to(device)).requires_grad_()
    utils = OPCHECK_UTILS
    if device == "accinte":
        # opcheck's autograd registration check knows only the CPU, CUDA and
        # XPU autograd keys; for accinte, check the key it would look up.
        with pytest.raises(Exception, match="NYI devices other than CPU"):
            torch.library.opcheck(op.default, (x,),
                                  test_utils="test_autograd_registration")
        name = op.default.name()
        assert any(torch._C._dispatch_has_kernel_for_dispatch_key(name, key)
                   for key in ("AutogradPrivateUse1", "Autograd",
                               "CompositeImplicitAutograd"))
        utils = tuple(u for u in utils if u != "test_autograd_registration")
    if any(op is DIFFERENTIABLE_OPS[name] for name in NOT_FUNCTIONALIZABLE):
        utils = tuple(u for u in utils if u != "test_aot_dispatch_dynamic")
    results = torch.library.opcheck(op.default, (x,), test_utils=utils)
    assert results == {name: "SUCCESS" for name in utils}


@pytest.mark.skipif(not AOT_DISPATCH, reason="needs accinte's random state (chapter 08)")
@pytest.mark.parametrize("device", ["accinte", "cpu"])
def test_aot_dispatch_refuses_a_custom_view(device):
    # PyTorch's own limitation, not the backend's: a custom operator that
    # returns a view cannot be functionalized, so it cannot be traced by
    # AOTAutograd (torch.compile's backward); built-in views can.
    x = sample((4, 6), torch.float32).to(device).requires_grad_()
    for name in NOT_FUNCTIONALIZABLE:
        with pytest.raises(Exception, match="whose output has alias annotations"):
            torch.library.opcheck(DIFFERENTIABLE_OPS[name].default, (x,),
                                  test_utils="test_aot_dispatch_dynamic")


# --------------------------------------------------------------------------
# Views and version counters
# --------------------------------------------------------------------------


@pytest.mark.parametrize("op", ALIASING_OPS.values(), ids=ALIASING_OPS.keys())
def test_result_is_a_view_of_the_input(op, accinte):
    x = leaf(sample((2, 3)), accinte)
    y = op(x)
    assert y._is_view() and y._base is x and y is not x
    assert y.data_ptr() == x.data_ptr() and y.device == accinte
    assert type(y.grad_fn).__name__ == "CppFunction"
    y.backward(torch.full((2, 3), 3.0, dtype=torch.float64, device=accinte))
    assert x.grad.device == accinte
    torch.testing.assert_close(x.grad.cpu(), torch.full((2, 3), 3.0,
                                                        dtype=torch.float64))


@pytest.mark.parametrize("grad", [True, False], ids=["requires-grad", "plain"])
@pytest.mark.parametrize("op", ALIASING_OPS.values(), ids=ALIASING_OPS.keys())
def test_result_shares_memory_and_version_counter(op, grad, accinte):
    base = sample((4,)).to(accinte).requires_grad_(grad).clone()
    y = op(base)
    before = base._version
    with torch.no_grad():
        y.mul_(-1)
    assert base._version == y._version == before + 1
    torch.testing.assert_close(base.detach().cpu(), -sample((4,)))
    with torch.no_grad():
        base.add_(1)
    assert y._version == before + 2
    torch.testing.assert_close(y.detach().cpu(), 1 - sample((4,)))


@pytest.mark.parametrize("op", ALIASING_OPS.values(), ids=ALIASING_OPS.keys())
def test_in_place_on_the_result_with_grad_is_refused(op, accinte):
    y = op(leaf(sample((3,)), accinte).clone())
    with pytest.raises(RuntimeError, match="is a view and is being modified "
                       "inplace. This view was created inside a custom Function"):
        y.mul_(2)


VIEWS = {**ALIASING_OPS, "builtin-view_as": lambda t: t.view_as(t)}
# A built-in view reports the saved tensor's version; an output of a custom
# Function, whose view history autograd may not rewrite, says that instead.
MODIFIED = ("modified by an inplace operation|its base or another view of "
            "its base has been modified inplace")


@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
def test_in_place_on_a_saved_result_fails_backward(view, accinte):
    """As for PyTorch's own views: a write through the result after autograd
    saved it is caught when backward needs the saved value."""
    y = view(leaf(sample((3,)), accinte).clone())
    loss = (y * y).sum()  # saves y
    with torch.no_grad():
        y.mul_(2)
    with pytest.raises(RuntimeError, match=MODIFIED):
        loss.backward()


@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
def test_in_place_on_the_base_of_a_saved_result_fails_backward(view, accinte):
    y = view(leaf(sample((3,)), accinte).clone())
    loss = (y * y).sum()
    y._base.mul_(2)
    with pytest.raises(RuntimeError, match=MODIFIED):
        loss.backward()


@pytest.mark.parametrize("op", ALIASING_OPS.values(), ids=ALIASING_OPS.keys())
def test_write_through_the_result_invalidates_what_custom_abs_saved(op, accinte):
    """The one version counter is what tells custom_abs's backward that its
    saved input changed; a result with a counter of its own would let
    backward compute with the new values, silently."""
    x = leaf(sample((3,)), accinte).clone()
    absolute = OPS.custom_abs(x)  # saves x
    y = op(x)
    with torch.no_grad():
        y.mul_(-1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        absolute.sum().backward()


@pytest.mark.parametrize("op", ALIASING_OPS.values(), ids=ALIASING_OPS.keys())
def test_below_autograd_the_kernel_returns_a_view(op, accinte):
    """In inference mode the autograd kernel does not run: the backend kernel
    does, and it must return a view, not the input object."""
    x = sample((3,)).to(accinte)
    with torch.inference_mode():
        y = op(x)
    assert y is not x and y.data_ptr() == x.data_ptr()


# --------------------------------------------------------------------------
# torch.compile: AOTAutograd traces through the autograd kernels
# --------------------------------------------------------------------------


def with_abs(x):
    return OPS.custom_abs(x * 2).sum() + OPS.custom_l1_norm(x)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_compiled_backward_equals_eager(dynamic, accinte):
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(with_abs, backend=counter, fullgraph=True,
                             dynamic=dynamic)
    for shape in [(4, 5), (3, 2)]:
        cpu = sample(shape, torch.float32)
        eager, traced = leaf(cpu, accinte), leaf(cpu, accinte)
        with_abs(eager).backward()
        compiled(traced).backward()
        assert traced.grad.device == accinte
        torch.testing.assert_close(traced.grad.cpu(), eager.grad.cpu())
        torch.testing.assert_close(traced.grad.cpu(), 3 * cpu.sign())
    assert counter.frame_count >= 1
    torch._dynamo.reset()


# --------------------------------------------------------------------------
# The autograd engine on accinte: devices and streams
# --------------------------------------------------------------------------


def test_backward_on_the_second_device():
    """The engine runs accinte backward nodes on a worker thread per device,
    with that device made current by chapter 01's guard."""
    device = torch.device("accinte:1")
    cpu = sample((5, 4))
    x = leaf(cpu, device)
    (OPS.custom_l1_norm(x) + OPS.custom_autograd_fn_aliasing(x).sum()).backward()
    assert x.grad.device == device
    torch.testing.assert_close(x.grad.cpu(), cpu.sign() + 1)
    assert torch.accinte.current_device() == 0


def test_backward_of_a_forward_on_a_side_stream(accinte):
    """Each backward node runs on the stream its forward ran on; the engine
    orders it after the gradient arriving from the default stream."""
    cpu = sample((256, 64), torch.float32)
    x = leaf(cpu, accinte)
    stream = torch.Stream(device=accinte)
    with stream:
        y = OPS.custom_abs(x) * 3
    torch.accinte.current_stream(accinte.index).wait_stream(stream)
    y.sum().backward()
    torch.accinte.synchronize(accinte.index)
    torch.testing.assert_close(x.grad.cpu(), 3 * cpu.sign())
