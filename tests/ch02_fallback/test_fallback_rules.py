"""Chapter 02: what the fallback refuses, its errors, and how it is registered."""

import gc

import pytest
import torch
import torch_accinte  # noqa: F401
from torch_accinte import _C


def has_kernel(operator, key="PrivateUse1"):
    return torch._C._dispatch_has_kernel_for_dispatch_key(operator, key)


def is_fallthrough(operator, key="PrivateUse1"):
    return torch._C._dispatch_kernel_for_dispatch_key_is_fallthrough(operator, key)


def test_operators_without_a_kernel_reach_the_fallback():
    assert torch._C._dispatch_has_backend_fallback(torch._C.DispatchKey.PrivateUse1)
    assert not has_kernel("aten::atan2.out")


@pytest.mark.parametrize("operator,composite", [
    ("aten::convolution", "CompositeExplicitAutograd"),
    ("aten::convolution_backward", "CompositeExplicitAutograd"),
    ("aten::mse_loss", "CompositeExplicitAutogradNonFunctional"),
    ("aten::smooth_l1_loss", "CompositeExplicitAutogradNonFunctional"),
    ("aten::_batch_norm_no_update", "CompositeExplicitAutograd"),
])
def test_per_operator_boxed_registration_is_a_kernel(operator, composite):
    # A kernel of accinte's own (the boxed fallback registered by name), in
    # front of the composite kernel ATen has for every backend.
    assert has_kernel(operator) and not is_fallthrough(operator)
    assert has_kernel(operator, composite)


def test_per_operator_registration_overrides_a_composite_kernel():
    # Without it, convolution's composite kernel would end in
    # convolution_overrideable, which raises for a backend it does not know.
    assert not has_kernel("aten::convolution_overrideable")
    assert has_kernel("aten::convolution_overrideable", "CompositeExplicitAutograd")
    images = torch.linspace(-1, 1, 2 * 3 * 6 * 6).reshape(2, 3, 6, 6)
    weight = torch.linspace(-1, 1, 4 * 3 * 3 * 3).reshape(4, 3, 3, 3)
    result = torch.nn.functional.conv2d(images.to("accinte:1"), weight.to("accinte:1"))
    assert result.device == torch.device("accinte:1")
    torch.testing.assert_close(result.cpu(), torch.nn.functional.conv2d(images, weight))


@pytest.mark.parametrize("layout", ["input", "weight", "both"])
def test_convolution_results_have_the_format_pytorch_predicts(layout):
    # PyTorch's fake convolution (torch.compile, export) predicts contiguous
    # results for a device it does not know; the CPU would give channels-last
    # ones for channels-last operands, and compiled code checking the
    # strides against the prediction would fail (chapter 13's tests).
    channels_last = torch.channels_last
    images = torch.linspace(-1, 1, 2 * 3 * 6 * 6).reshape(2, 3, 6, 6)
    weight = torch.linspace(-1, 1, 4 * 3 * 3 * 3).reshape(4, 3, 3, 3)
    if layout in ("input", "both"):
        images = images.to(memory_format=channels_last)
    if layout in ("weight", "both"):
        weight = weight.to(memory_format=channels_last)
    expected = torch.nn.functional.conv2d(images, weight, padding=1)
    assert expected.is_contiguous(memory_format=channels_last)  # the CPU's choice
    result = torch.nn.functional.conv2d(images.to("accinte"), weight.to("accinte"), padding=1)
    assert result.is_contiguous()
    torch.testing.assert_close(result.cpu(), expected)
    # The backward: the gradients of the input, the weight and the bias.
    grad_output = torch.linspace(-1, 1, expected.numel()).reshape(expected.shape)
    arguments = dict(bias_sizes=[4], stride=[1, 1], padding=[1, 1], dilation=[1, 1],
                     transposed=False, output_padding=[0, 0], groups=1,
                     output_mask=[True, True, True])
    backward = torch.ops.aten.convolution_backward
    expected = backward(grad_output, images, weight, **arguments)
    result = backward(grad_output.to("accinte"), images.to("accinte"),
                      weight.to("accinte"), **arguments)
    for device_grad, cpu_grad in zip(result, expected):
        assert device_grad.is_contiguous()
        torch.testing.assert_close(device_grad.cpu(), cpu_grad)


@pytest.mark.parametrize("operator", ["aten::abs.out", "aten::neg", "aten::neg_",
                                      "aten::neg.out", "aten::unfold",
                                      "aten::view_as_real", "aten::view_as_complex"])
def test_native_kernels_are_registered(operator):
    assert has_kernel(operator) and not is_fallthrough(operator)


def test_abs_reaches_its_kernel_through_composite_abs():
    # abs and abs_ have no accinte kernel of their own: ATen's
    # CompositeExplicitAutograd kernels call abs.out, registered for accinte.
    for operator in ("aten::abs", "aten::abs_"):
        assert not has_kernel(operator)
        assert has_kernel(operator, "CompositeExplicitAutograd")


def test_refusal_list_is_exposed():
    listed = _C._fallback_native_only_operators()
    names = [entry.split(": ", 1)[0] for entry in listed]
    assert names == ["aten::is_set_to"]
    assert all(": " in entry for entry in listed)


def test_refused_operators_name_themselves():
    x = torch.ones(3, device="accinte")
    with pytest.raises(NotImplementedError,
                       match=r"accinte refuses to run 'aten::is_set_to' on the CPU fallback"):
        x.is_set_to(x)
    # The refusal happens before anything is copied: nothing changed.
    torch.testing.assert_close(x.cpu(), torch.ones(3))


def test_view_operators_are_refused_not_copied():
    # An operator whose schema returns a view, with a CPU kernel and no
    # accinte one: the generic rule refuses it by its schema, with no list
    # entry, before anything is copied.
    library = torch.library.Library("ch02_view_rule", "DEF")
    try:
        library.define("alias_of(Tensor(a) x) -> Tensor(a)")
        library.impl("alias_of", torch.ops.aten.alias.default, "CPU")
        x = torch.ones(2, device="accinte")
        with pytest.raises(NotImplementedError,
                           match=r"'ch02_view_rule::alias_of'.*returns a view"):
            torch.ops.ch02_view_rule.alias_of(x)
    finally:
        library._destroy()


def test_a_view_the_cpu_cannot_run_either_gets_the_cpus_error():
    # aten::_values returns a view and has no dense CPU kernel (it is a
    # sparse tensor's): the fallback lets the CPU raise its own error.
    x = torch.ones(2, device="accinte")
    with pytest.raises(NotImplementedError, match=r"Could not run 'aten::_values'"):
        torch.ops.aten._values(x)


def test_two_accinte_devices_in_one_operator_are_refused():
    a = torch.ones(3, device="accinte:0")
    b = torch.ones(3, device="accinte:1")
    message = r"same device.*accinte:0 and accinte:1"
    with pytest.raises(RuntimeError, match=message):
        a + b
    with pytest.raises(RuntimeError, match=message):
        torch.cat([a, b])
    with pytest.raises(RuntimeError, match=message):
        torch.where(a > 0, a, b)
    with pytest.raises(RuntimeError, match=message):
        torch.add(a, a, out=torch.empty(3, device="accinte:1"))
    with pytest.raises(RuntimeError, match=message):
        torch.neg(a, out=torch.empty(3, device="accinte:1"))
    # Each device on its own is fine.
    torch.testing.assert_close((b + b).cpu(), torch.full((3,), 2.0))


FAILING = [
    ("matmul_shapes", lambda a, b: a @ b, RuntimeError, "cannot be multiplied"),
    ("broadcast", lambda a, b: a + b, RuntimeError, "must match"),
    ("cat_sizes", lambda a, b: torch.cat([a, b]), RuntimeError, "Sizes of tensors must match"),
    # NB: operators no chapter gives a kernel, so that the final stage runs
    # them on the fallback too.
    ("bad_dtype", lambda a, b: torch.bitwise_xor(a, a), RuntimeError, "not implemented for 'Float'"),
    ("bad_index", lambda a, b: torch.take(a, torch.tensor([100]).to(a.device)),
     IndexError, "out of range"),
    ("out_dtype", lambda a, b: torch.mm(a, a.t(), out=torch.empty(0, dtype=torch.int64,
                                                                  device=a.device)),
     RuntimeError, "dtype"),
    ("abs_out_dtype", lambda a, b: torch.abs(a, out=torch.empty(3, 4, dtype=torch.int64,
                                                                device=a.device)),
     RuntimeError, "Found dtype Long but expected Float"),
    ("neg_bool", lambda a, b: -(a > 0), RuntimeError, "bool tensor is not supported"),
    ("neg_out_dtype", lambda a, b: torch.neg(a, out=torch.empty(3, 4, dtype=torch.int64,
                                                                device=a.device)),
     RuntimeError, "Found dtype Long but expected Float"),
]


@pytest.mark.parametrize("function,error,match", [f[1:] for f in FAILING],
                         ids=[f[0] for f in FAILING])
def test_errors_are_pytorch_errors_and_leak_nothing(function, error, match):
    # NB: tensors of earlier tests still held by reference cycles (an
    # exception's traceback) must not be freed in the middle of the counts.
    gc.collect()
    a = torch.ones(3, 4, device="accinte")
    b = torch.ones(5, 6, device="accinte")
    cpu_a, cpu_b = a.cpu(), b.cpu()
    with pytest.raises(error, match=match):
        function(cpu_a, cpu_b)  # the same error as on the CPU ...
    torch.accinte.synchronize()
    before = torch.accelerator.memory_allocated(0)
    with pytest.raises(error, match=match):
        function(a, b)  # ... on accinte,
    torch.accinte.synchronize()
    assert torch.accelerator.memory_allocated(0) == before  # with no leak
    # and the device is still usable.
    torch.testing.assert_close((a + 1).cpu(), torch.full((3, 4), 2.0))
