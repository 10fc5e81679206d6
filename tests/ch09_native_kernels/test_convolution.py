"""Chapter 09: the convolutions and their backward as native kernels.

Chapter 02 registers `convolution` and `convolution_backward` for the
device (its CPU route); from this stage on, the kernels this chapter
installs behind that registration run them. Every case compares with the
CPU inside ``record_fallbacks()``, which a case that took the CPU route
fails.
"""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch_accinte import _C

GATE_TIMEOUT = 30.0
convolution = torch.ops.aten.convolution
convolution_backward = torch.ops.aten.convolution_backward


def sample(*shape, seed=0, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=generator, dtype=torch.float64) * 2 - 1).to(dtype)


# (input shape, weight shape, bias, stride, padding, dilation, transposed,
#  output_padding, groups)
CONFIGURATIONS = {
    "conv1d": ((2, 3, 9), (4, 3, 3), True, [1], [0], [1], False, [0], 1),
    "conv1d strided, padded": ((2, 4, 10), (6, 2, 3), True, [2], [1], [2], False, [0], 2),
    "conv2d": ((2, 3, 7, 6), (5, 3, 3, 3), True, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
    "conv2d no bias": ((1, 3, 6, 6), (2, 3, 2, 3), False, [1, 1], [1, 0], [1, 1], False, [0, 0], 1),
    "conv2d stride 2, padding, dilation": ((2, 2, 9, 8), (3, 2, 3, 3), True, [2, 1], [1, 2], [2, 1],
                                           False, [0, 0], 1),
    "conv2d groups": ((2, 6, 5, 5), (9, 2, 3, 3), True, [1, 1], [1, 1], [1, 1], False, [0, 0], 3),
    "conv2d depthwise": ((2, 4, 5, 5), (4, 1, 3, 3), True, [1, 1], [1, 1], [1, 1], False, [0, 0], 4),
    "conv2d 1x1": ((3, 4, 4, 4), (2, 4, 1, 1), True, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
    "conv2d single value params": ((1, 2, 7, 7), (3, 2, 3, 3), True, [2], [1], [1], False, [0], 1),
    "conv3d": ((1, 2, 5, 4, 5), (3, 2, 2, 3, 2), True, [1, 2, 1], [1, 0, 1], [1, 1, 1], False,
               [0, 0, 0], 1),
    "transposed conv1d": ((2, 3, 5), (3, 2, 3), True, [2], [1], [1], True, [1], 1),
    "transposed conv2d": ((2, 4, 4, 3), (4, 3, 3, 3), True, [2, 2], [1, 0], [1, 1], True,
                          [1, 0], 1),
    "transposed conv2d groups, dilation": ((1, 4, 3, 3), (4, 1, 2, 2), False, [1, 1], [0, 0],
                                           [2, 2], True, [0, 0], 2),
    "transposed conv3d": ((1, 2, 3, 3, 2), (2, 2, 2, 2, 2), True, [2, 1, 1], [0, 0, 0],
                          [1, 1, 1], True, [1, 0, 0], 1),
    "empty batch": ((0, 3, 5, 5), (4, 3, 3, 3), True, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
    # The CPU gives no output channel: a host check that gave the weight's
    # two failed the launch, at the next synchronize.
    "no input channel": ((1, 0, 4, 4), (2, 0, 3, 3), True, [1, 1], [0, 0], [1, 1], False,
                         [0, 0], 1),
}


def operands(name, dtype=torch.float64):
    input_shape, weight_shape, bias, *_ = CONFIGURATIONS[name]
    return (sample(*input_shape, seed=1, dtype=dtype), sample(*weight_shape, seed=2, dtype=dtype),
            sample(weight_shape[0] if not CONFIGURATIONS[name][6]
                   else weight_shape[1] * CONFIGURATIONS[name][8], seed=3, dtype=dtype)
            if bias else None)


def parameters(name):
    return CONFIGURATIONS[name][3:]


def on_device(*tensors):
    return [None if t is None else t.to("accinte") for t in tensors]


@pytest.mark.parametrize("name", list(CONFIGURATIONS))
def test_forward_and_backward_match_the_cpu(name):
    x, w, b = operands(name)
    expected = convolution(x, w, b, *parameters(name))
    grad_output = sample(*expected.shape, seed=4)
    mask = [True, True, b is not None]
    expected_grads = convolution_backward(grad_output, x, w, None if b is None else [b.numel()],
                                          *parameters(name), mask)
    with torch.accinte.record_fallbacks() as record:
        result = convolution(*on_device(x, w, b), *parameters(name))
        grads = convolution_backward(grad_output.to("accinte"), *on_device(x, w),
                                     None if b is None else [b.numel()], *parameters(name), mask)
    assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    assert result.device.type == "accinte" and result.shape == expected.shape
    torch.testing.assert_close(result.cpu(), expected)
    for grad, expected_grad in zip(grads, expected_grads):
        if expected_grad is None:
            assert grad is None
        else:
            torch.testing.assert_close(grad.cpu(), expected_grad)


@pytest.mark.parametrize("mask", [[True, False, False], [False, True, False],
                                  [False, False, True], [False, True, True]])
def test_backward_computes_what_output_mask_asks_for(mask):
    x, w, b = operands("conv2d groups")
    grad_output = sample(*convolution(x, w, b, *parameters("conv2d groups")).shape, seed=4)
    expected = convolution_backward(grad_output, x, w, [b.numel()], *parameters("conv2d groups"),
                                    mask)
    with torch.accinte.record_fallbacks() as record:
        result = convolution_backward(grad_output.to("accinte"), *on_device(x, w), [b.numel()],
                                      *parameters("conv2d groups"), mask)
    assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    for wanted, grad, expected_grad in zip(mask, result, expected):
        assert (grad is not None) == wanted
        if wanted:
            torch.testing.assert_close(grad.cpu(), expected_grad)


@pytest.mark.parametrize("name", ["conv1d strided, padded", "conv2d stride 2, padding, dilation",
                                  "conv2d groups", "transposed conv2d", "conv3d"])
def test_gradcheck_through_the_native_kernels(name):
    x, w, b = [None if t is None else t.to("accinte").requires_grad_() for t in operands(name)]
    arguments = parameters(name)
    inputs = (x, w) if b is None else (x, w, b)

    def function(*tensors):
        return convolution(tensors[0], tensors[1], tensors[2] if len(tensors) > 2 else None,
                           *arguments)

    with torch.accinte.record_fallbacks() as record:
        assert torch.autograd.gradcheck(function, inputs)
    assert record.calls == {}, f"took the CPU fallback: {record.calls}"


@pytest.mark.parametrize("layout", ["input", "weight", "both"])
def test_channels_last_gives_the_format_pytorch_predicts(layout):
    # As chapter 02's route: contiguous results, which PyTorch's fake
    # convolution predicts for the device (the CPU gives channels-last ones).
    x, w, b = operands("conv2d groups", dtype=torch.float32)
    if layout in ("input", "both"):
        x = x.to(memory_format=torch.channels_last)
    if layout in ("weight", "both"):
        w = w.to(memory_format=torch.channels_last)
    expected = F.conv2d(x, w, b, padding=1, groups=3)
    grad_output = sample(*expected.shape, seed=4, dtype=torch.float32)
    arguments = dict(bias_sizes=[9], stride=[1, 1], padding=[1, 1], dilation=[1, 1],
                     transposed=False, output_padding=[0, 0], groups=3,
                     output_mask=[True, True, True])
    expected_grads = convolution_backward(grad_output, x, w, **arguments)
    with torch.accinte.record_fallbacks() as record:
        result = F.conv2d(*on_device(x, w, b), padding=1, groups=3)
        grads = convolution_backward(grad_output.to("accinte"), *on_device(x, w), **arguments)
    assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    assert result.is_contiguous()
    torch.testing.assert_close(result.cpu(), expected)
    for grad, expected_grad in zip(grads, expected_grads):
        assert grad.is_contiguous()
        torch.testing.assert_close(grad.cpu(), expected_grad)


def test_modules_train_without_the_fallback():
    with torch.random.fork_rng(devices=range(torch.accinte.device_count()),
                               device_type="accinte"):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(),
                                    torch.nn.ConvTranspose2d(4, 2, 2, stride=2))
    device_model = copy.deepcopy(model).to("accinte")
    images = sample(2, 3, 6, 6, dtype=torch.float32)
    model(images).square().mean().backward()
    with torch.accinte.record_fallbacks() as record:
        device_model(images.to("accinte")).square().mean().backward()
    assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    for parameter, device_parameter in zip(model.parameters(), device_model.parameters()):
        torch.testing.assert_close(device_parameter.grad.cpu(), parameter.grad)


def test_the_kernel_is_queued_on_the_current_stream():
    x, w, b = on_device(*operands("conv2d", dtype=torch.float32))
    torch.accinte.synchronize()
    stream = torch.Stream(device="accinte:0")
    with torch.accinte.stream(stream):
        gate = _C._testing.StreamGate(0, timeout_seconds=GATE_TIMEOUT)
        result = F.conv2d(x, w, b)  # returns at once: queued behind the gate
        assert not stream.query()
        gate.open()
        torch.testing.assert_close(result.cpu(), F.conv2d(x.cpu(), w.cpu(), b.cpu()))


def bad(input_shape, weight_shape, bias_size=None, stride=(1, 1), padding=(0, 0),
        dilation=(1, 1), transposed=False, output_padding=(0, 0), groups=1,
        weight_dtype=torch.float32):
    def call(device):
        x = torch.ones(input_shape, device=device)
        w = torch.ones(weight_shape, device=device, dtype=weight_dtype)
        b = None if bias_size is None else torch.ones(bias_size, device=device)
        return convolution(x, w, b, list(stride), list(padding), list(dilation), transposed,
                           list(output_padding), groups)
    return call


BAD = {
    "negative padding": bad((2, 4, 8, 8), (6, 2, 3, 3), padding=(-1, 0), groups=2),
    "negative output padding": bad((2, 4, 8, 8), (4, 3, 3, 3), stride=(2, 2), transposed=True,
                                   output_padding=(-1, 0)),
    "zero stride": bad((2, 4, 8, 8), (6, 2, 3, 3), stride=(0, 1), groups=2),
    "zero dilation": bad((2, 4, 8, 8), (6, 2, 3, 3), dilation=(0, 1), groups=2),
    "zero groups": bad((2, 4, 8, 8), (6, 2, 3, 3), groups=0),
    "input dimensions": bad((4, 8, 8), (6, 2, 3, 3), groups=2),
    "groups above out channels": bad((2, 4, 8, 8), (6, 2, 3, 3), groups=8),
    "groups not dividing": bad((2, 4, 8, 8), (6, 2, 3, 3), groups=4),
    "input channels": bad((2, 4, 8, 8), (6, 2, 3, 3), groups=3),
    "bias size": bad((2, 4, 8, 8), (6, 2, 3, 3), bias_size=5, groups=2),
    "kernel larger than input": bad((2, 4, 2, 2), (6, 2, 3, 3), groups=2),
    "weight of 2 dimensions": bad((2, 4, 8, 8), (6, 2)),
    "stride of 3 values": bad((2, 4, 8, 8), (6, 2, 3, 3), stride=(1, 1, 1), groups=2),
    "transposed input channels": bad((2, 4, 8, 8), (6, 2, 3, 3), transposed=True),
    "transposed bias size": bad((2, 4, 8, 8), (4, 3, 3, 3), bias_size=6, transposed=True),
    "transposed output padding": bad((2, 4, 8, 8), (4, 3, 3, 3), transposed=True,
                                     output_padding=(1, 1)),
    "transposed output too small": bad((1, 4, 2, 2), (4, 3, 3, 3), padding=(3, 3),
                                       transposed=True),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_arguments_raise_the_cpus_errors_on_the_host(name):
    with pytest.raises(RuntimeError) as on_cpu:
        BAD[name]("cpu")
    with pytest.raises(RuntimeError) as on_device:
        BAD[name]("accinte")
    assert str(on_device.value).splitlines()[0] == str(on_cpu.value).splitlines()[0]
    # Nothing was launched: the stream has no failure to report.
    torch.accinte.synchronize()


def test_mixed_dtypes_raise_cudas_error():
    # The CPU's message adds a clause about MKLDNN tensors, which the device
    # has not: the device's is CUDA's, with the device's type names.
    with pytest.raises(RuntimeError, match=r"Input type \(torch.accinte.FloatTensor\) and "
                                           r"weight type \(torch.accinte.DoubleTensor\) should "
                                           r"be the same"):
        bad((2, 4, 8, 8), (6, 2, 3, 3), groups=2, weight_dtype=torch.float64)("accinte")
    torch.accinte.synchronize()


def test_a_gradient_of_the_wrong_size_is_refused():
    x, w = on_device(*operands("conv2d")[:2])
    with pytest.raises(RuntimeError, match=r"convolution_backward: grad_output of size "
                                           r"\[2, 5, 4, 4\] for an output of size \[2, 5, 5, 4\]"):
        convolution_backward(torch.ones(2, 5, 4, 4, dtype=torch.float64, device="accinte"), x, w,
                             None, *parameters("conv2d"), [True, True, False])
    torch.accinte.synchronize()
