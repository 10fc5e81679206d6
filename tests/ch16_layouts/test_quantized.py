"""Chapter 16, quantized tensors: made, viewed, copied and computed on
accinte, compared with the CPU (integers bit for bit, q-parameters, strides,
errors)."""

import copy

import pytest
import torch
import torch_accinte  # noqa: F401

# PyTorch 2.13 deprecates the quantized creation functions; the warning is
# PyTorch's own and says nothing about the backend.
pytestmark = pytest.mark.filterwarnings("ignore:.*quantized tensor creation functions.*:UserWarning")

DEVICE = "accinte"
QTYPES = [torch.qint8, torch.quint8, torch.qint32]
ZERO_POINT = {torch.qint8: -3, torch.quint8: 7, torch.qint32: 11}


def values(*shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator) * 4


def assert_same_qtensor(actual, expected):
    """Same device kind, dtype, scheme, q-parameters, shape, strides, and the
    same integers bit for bit."""
    assert actual.device.type == DEVICE
    assert actual.is_quantized
    assert actual.dtype == expected.dtype
    assert actual.qscheme() == expected.qscheme()
    assert actual.shape == expected.shape
    assert actual.stride() == expected.stride()
    if expected.qscheme() == torch.per_tensor_affine:
        assert actual.q_scale() == expected.q_scale()
        assert actual.q_zero_point() == expected.q_zero_point()
    else:
        torch.testing.assert_close(actual.q_per_channel_scales(), expected.q_per_channel_scales(), rtol=0, atol=0)
        torch.testing.assert_close(
            actual.q_per_channel_zero_points(), expected.q_per_channel_zero_points(), rtol=0, atol=0
        )
        assert actual.q_per_channel_axis() == expected.q_per_channel_axis()
    torch.testing.assert_close(actual.int_repr().cpu(), expected.int_repr(), rtol=0, atol=0)
    torch.testing.assert_close(actual.dequantize().cpu(), expected.dequantize(), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", QTYPES)
def test_quantize_per_tensor_matches_the_cpu_bit_for_bit(dtype):
    # Ties (x.5 after scaling) round half to even, and far values saturate:
    # a device that rounded half away from zero or wrapped would differ.
    ties = torch.tensor([0.05, 0.15, 0.25, 0.35, -0.05, -0.15, -0.25, 1e6, -1e6, 0.0])
    x = torch.cat([ties, values(30)])
    for scale in (0.1, 0.37):
        expected = torch.quantize_per_tensor(x, scale, ZERO_POINT[dtype], dtype)
        actual = torch.quantize_per_tensor(x.to(DEVICE), scale, ZERO_POINT[dtype], dtype)
        assert_same_qtensor(actual, expected)


def test_quantize_per_tensor_with_tensor_qparams():
    x = values(4, 5)
    scale, zero_point = torch.tensor(0.2), torch.tensor(5)
    expected = torch.quantize_per_tensor(x, scale, zero_point, torch.quint8)
    for where in ("cpu", DEVICE):
        actual = torch.quantize_per_tensor(x.to(DEVICE), scale.to(where), zero_point.to(where), torch.quint8)
        assert_same_qtensor(actual, expected)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", [torch.qint8, torch.quint8])
def test_quantize_per_channel_matches_the_cpu(axis, dtype):
    x = values(3, 4)
    channels = x.shape[axis]
    scales = torch.linspace(0.05, 0.3, channels, dtype=torch.float64)
    zero_points = torch.arange(channels) + (0 if dtype == torch.qint8 else 100)
    expected = torch.quantize_per_channel(x, scales, zero_points, axis, dtype)
    actual = torch.quantize_per_channel(x.to(DEVICE), scales, zero_points, axis, dtype)
    assert_same_qtensor(actual, expected)
    # q-parameters given on the device are read from there.
    again = torch.quantize_per_channel(x.to(DEVICE), scales.to(DEVICE), zero_points.to(DEVICE), axis, dtype)
    assert_same_qtensor(again, expected)


def test_quantize_per_channel_with_float_qparams():
    x = values(4, 6)
    scales = torch.rand(4) + 0.05
    zero_points = torch.rand(4) * 3
    expected = torch.quantize_per_channel(x, scales, zero_points, 0, torch.quint8)
    actual = torch.quantize_per_channel(x.to(DEVICE), scales, zero_points, 0, torch.quint8)
    assert actual.qscheme() == torch.per_channel_affine_float_qparams
    assert_same_qtensor(actual, expected)


def test_channels_last_input_keeps_its_layout():
    x = values(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    expected = torch.quantize_per_tensor(x, 0.1, 2, torch.quint8)
    actual = torch.quantize_per_tensor(x.to(DEVICE), 0.1, 2, torch.quint8)
    assert_same_qtensor(actual, expected)
    assert actual.dequantize().stride() == expected.dequantize().stride()


@pytest.mark.parametrize("dtype", [torch.quint4x2, torch.quint2x4])
def test_sub_byte_dtypes_round_trip(dtype):
    x = values(4, 6)
    expected = torch.quantize_per_tensor(x, 0.5, 1, dtype)
    actual = torch.quantize_per_tensor(x.to(DEVICE), 0.5, 1, dtype)
    assert actual.dtype == dtype
    torch.testing.assert_close(actual.dequantize().cpu(), expected.dequantize(), rtol=0, atol=0)
    torch.testing.assert_close(actual.cpu().int_repr(), expected.int_repr(), rtol=0, atol=0)
    torch.testing.assert_close(expected.to(DEVICE).dequantize().cpu(), expected.dequantize(), rtol=0, atol=0)


def test_empty_quantized_factories():
    a = torch._empty_affine_quantized([2, 3], scale=0.5, zero_point=4, dtype=torch.quint8, device=DEVICE)
    assert (a.device.type, a.dtype, a.shape, a.q_scale(), a.q_zero_point()) == (DEVICE, torch.quint8, (2, 3), 0.5, 4)
    scales, zero_points = torch.tensor([0.1, 0.2, 0.3]), torch.tensor([1, 2, 3])
    c = torch._empty_per_channel_affine_quantized(
        [2, 3], scales=scales, zero_points=zero_points, axis=1, dtype=torch.qint8, device=DEVICE
    )
    assert c.device.type == DEVICE and c.q_per_channel_axis() == 1
    torch.testing.assert_close(c.q_per_channel_scales(), scales.double(), rtol=0, atol=0)
    like = torch.empty_like(c)
    assert like.device == c.device and like.qscheme() == c.qscheme() and like.shape == c.shape
    e = torch.empty_quantized([4], a, device=DEVICE)
    assert (e.device, e.q_scale(), e.q_zero_point(), e.dtype) == (a.device, 0.5, 4, torch.quint8)
    unknown = torch.empty(3, dtype=torch.qint8, device=DEVICE)
    assert unknown.device.type == DEVICE and unknown.dtype == torch.qint8


VIEWS = {
    "view": lambda q: q.view(4, 6),
    "flatten": lambda q: q.flatten(),
    "ravel": lambda q: q.ravel(),
    "slice": lambda q: q[1:, ::2],
    "select": lambda q: q[2],
    "transpose": lambda q: q.t(),
    "permute": lambda q: q.permute(1, 0),
    "unsqueeze": lambda q: q.unsqueeze(1),
    "squeeze": lambda q: q.unsqueeze(0).squeeze(0),
    "unfold": lambda q: q.unfold(1, 2, 2),
    "as_strided": lambda q: q.as_strided((3, 2), (2, 5), 1),
    "expand": lambda q: q[:1].expand(3, 6),
    "reshape of a transpose": lambda q: q.t().reshape(-1),
}


@pytest.mark.parametrize("name", VIEWS)
def test_views_match_the_cpu(name):
    q = torch.quantize_per_tensor(values(4, 6), 0.1, 3, torch.quint8)
    qa = q.to(DEVICE)
    expected, actual = VIEWS[name](q), VIEWS[name](qa)
    assert_same_qtensor(actual, expected)
    assert actual.storage_offset() == expected.storage_offset()
    # A view, not a copy: it shares the device memory of its base, except
    # where the CPU copies too (reshape of a transpose).
    assert (actual.untyped_storage().data_ptr() == qa.untyped_storage().data_ptr()) == (
        expected.untyped_storage().data_ptr() == q.untyped_storage().data_ptr()
    )


def test_flip_and_a_write_through_a_view():
    q = torch.quantize_per_tensor(values(4, 6), 0.1, 3, torch.quint8)
    qa = q.to(DEVICE)
    assert_same_qtensor(qa.flip(0, 1), q.flip(0, 1))
    row = values(6, seed=1)
    q[2].copy_(row)
    qa[2].copy_(row.to(DEVICE))  # a float row quantized into the view
    assert_same_qtensor(qa, q)


def test_clone_and_contiguous_are_independent_copies():
    q = torch.quantize_per_tensor(values(4, 6), 0.1, 3, torch.qint8)
    qa = q.to(DEVICE)
    for expected, actual in ((q.clone(), qa.clone()), (q.t().contiguous(), qa.t().contiguous())):
        assert_same_qtensor(actual, expected)
        assert actual.untyped_storage().data_ptr() != qa.untyped_storage().data_ptr()
    clone = qa.clone()
    qa.copy_(values(4, 6, seed=2).to(DEVICE))
    assert_same_qtensor(clone, q)


def test_copies_carry_the_quantizer_across_devices():
    x = values(3, 5)
    q = torch.quantize_per_channel(x, torch.tensor([0.1, 0.2, 0.3]), torch.tensor([0, 1, 2]), 0, torch.qint8)
    qa = q.to(DEVICE)
    assert_same_qtensor(qa, q)
    back = qa.cpu()
    assert back.device.type == "cpu"
    assert back.qscheme() == q.qscheme() and torch.equal(back.int_repr(), q.int_repr())
    # copy_ between quantized tensors takes the source's quantizer, as on the CPU.
    other = torch.quantize_per_tensor(x * 2, 0.5, 1, torch.quint8)
    target_cpu = torch.quantize_per_tensor(torch.zeros(3, 5), 0.05, 9, torch.quint8)
    target = target_cpu.to(DEVICE)
    target_cpu.copy_(other)
    target.copy_(other)  # host to device
    assert_same_qtensor(target, target_cpu)
    again = torch.quantize_per_tensor(torch.zeros(3, 5, device=DEVICE), 0.05, 9, torch.quint8)
    again.copy_(target)  # device to device
    assert_same_qtensor(again, target_cpu)
    host = torch.quantize_per_tensor(torch.zeros(3, 5), 0.05, 9, torch.quint8)
    host.copy_(again)  # device to host
    assert host.q_scale() == 0.5 and torch.equal(host.int_repr(), target_cpu.int_repr())


def test_equal():
    q = torch.quantize_per_tensor(values(8), 0.1, 3, torch.quint8)
    qa = q.to(DEVICE)
    assert torch.equal(qa, qa.clone())
    assert not torch.equal(qa, torch.quantize_per_tensor(values(8), 0.2, 3, torch.quint8).to(DEVICE))
    changed = q.clone()
    changed[0] = 5.0
    assert torch.equal(q, q.clone()) and not torch.equal(q, changed)
    assert not torch.equal(qa, changed.to(DEVICE))


def test_operators_without_a_kernel_run_on_the_cpu_and_come_back():
    q = torch.quantize_per_tensor(values(2, 3, 4, 4), 0.1, 60, torch.quint8)
    qa = q.to(DEVICE)
    for op in (
        torch.relu,
        lambda t: torch.nn.functional.max_pool2d(t, 2),
        lambda t: torch.cat([t, t], dim=1),
        lambda t: t.sort(dim=-1)[0],
        lambda t: torch.nn.functional.avg_pool2d(t, 2),
        lambda t: t.clamp(-0.5, 0.5),
        lambda t: t.max(dim=1)[0],
    ):
        assert_same_qtensor(op(qa), op(q))
    inplace_cpu, inplace = q.clone(), qa.clone()
    inplace_cpu.relu_()
    inplace.relu_()
    assert_same_qtensor(inplace, inplace_cpu)


@pytest.mark.filterwarnings("ignore:torch.ao.quantization is deprecated:DeprecationWarning")
@pytest.mark.skipif(
    not hasattr(torch.ao.quantization, "quantize_dynamic"),
    reason="this release of PyTorch has removed torch.ao.quantization's eager mode",
)
def test_dynamic_quantization_of_linear_layers_on_accinte():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x = values(5, 8)
    on_cpu = torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8)
    expected = on_cpu(x)
    # Quantized from the model on the device: the weights are quantized on
    # accinte, then prepacked (a CPU object); every output comes back.
    on_device = torch.ao.quantization.quantize_dynamic(
        copy.deepcopy(model).to(DEVICE), {torch.nn.Linear}, dtype=torch.qint8
    )
    actual = on_device(x.to(DEVICE))
    assert actual.device.type == DEVICE
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)
    torch.testing.assert_close(on_device[0].weight().int_repr(), on_cpu[0].weight().int_repr(), rtol=0, atol=0)
    # A model quantized on the CPU and moved runs on accinte inputs too.
    moved = on_cpu.to(DEVICE)(x.to(DEVICE))
    assert moved.device.type == DEVICE
    torch.testing.assert_close(moved.cpu(), expected, rtol=0, atol=0)


x24 = values(2, 4)
BAD_INPUT = {
    "int input": lambda d: torch.quantize_per_tensor(torch.ones(2, dtype=torch.int32, device=d), 0.1, 0, torch.qint8),
    "half input": lambda d: torch.quantize_per_tensor(x24.half().to(d), 0.1, 0, torch.qint8),
    "float dtype": lambda d: torch.quantize_per_tensor(x24.to(d), 0.1, 0, torch.float),
    "zero point above": lambda d: torch.quantize_per_tensor(x24.to(d), 0.1, 200, torch.qint8),
    "zero point below": lambda d: torch.quantize_per_tensor(x24.to(d), 0.1, -1, torch.quint8),
    "two scales": lambda d: torch.quantize_per_tensor(x24.to(d), torch.tensor([0.1, 0.2]), torch.tensor(0), torch.qint8),
    "axis": lambda d: torch.quantize_per_channel(x24.to(d), torch.ones(4), torch.zeros(4, dtype=torch.long), 2, torch.qint8),
    "negative axis": lambda d: torch.quantize_per_channel(x24.to(d), torch.ones(4), torch.zeros(4, dtype=torch.long), -1, torch.qint8),
    "channels": lambda d: torch.quantize_per_channel(x24.to(d), torch.ones(3), torch.zeros(3, dtype=torch.long), 1, torch.qint8),
    "zero points": lambda d: torch.quantize_per_channel(x24.to(d), torch.ones(4), torch.zeros(3, dtype=torch.long), 1, torch.qint8),
    "integer scales": lambda d: torch.quantize_per_channel(x24.to(d), torch.ones(4, dtype=torch.long), torch.zeros(4, dtype=torch.long), 1, torch.qint8),
    "2-d scales": lambda d: torch.quantize_per_channel(x24.to(d), torch.ones(1, 4), torch.zeros(4, dtype=torch.long), 1, torch.qint8),
    "channel zero point": lambda d: torch.quantize_per_channel(x24.to(d), torch.ones(4), torch.tensor([0, 0, 300, 0]), 1, torch.qint8),
    "empty with a float dtype": lambda d: torch._empty_affine_quantized([2], dtype=torch.float, device=d),
    "negative size": lambda d: torch._empty_affine_quantized([-1], dtype=torch.qint8, device=d),
    "per channel empty": lambda d: torch._empty_per_channel_affine_quantized(
        [2, 3], scales=torch.ones(3), zero_points=torch.zeros(3, dtype=torch.long), axis=1, dtype=torch.float, device=d
    ),
    "q_scale of per channel": lambda d: torch.quantize_per_channel(
        x24.to(d), torch.ones(4), torch.zeros(4, dtype=torch.long), 1, torch.qint8
    ).q_scale(),
    "q_per_channel_scales of per tensor": lambda d: torch.quantize_per_tensor(x24.to(d), 0.1, 0, torch.qint8).q_per_channel_scales(),
    "copy to float": lambda d: x24.to(d).copy_(torch.quantize_per_tensor(x24.to(d), 0.1, 0, torch.qint8)),
    "copy from double": lambda d: torch.quantize_per_tensor(x24.to(d), 0.1, 0, torch.qint8).copy_(x24.double().to(d)),
    "copy from another shape": lambda d: torch.quantize_per_tensor(x24.to(d), 0.1, 0, torch.qint8).copy_(torch.ones(4, 2, device=d)),
    "copy across dtypes": lambda d: torch.quantize_per_tensor(x24.to(d), 0.1, 0, torch.qint8).copy_(
        torch.quantize_per_tensor(x24.to(d), 0.1, 0, torch.quint8)
    ),
    "copy across schemes": lambda d: torch.quantize_per_tensor(x24.to(d), 0.1, 0, torch.qint8).copy_(
        torch.quantize_per_channel(x24.to(d), torch.ones(4), torch.zeros(4, dtype=torch.long), 1, torch.qint8)
    ),
    "sum": lambda d: torch.quantize_per_tensor(x24.to(d), 0.1, 0, torch.qint8).sum(),
    "add out": lambda d: torch.add(*[torch.quantize_per_tensor(x24.to(d), 0.1, 0, torch.qint8)] * 2),
}


@pytest.mark.parametrize("name", BAD_INPUT)
def test_bad_input_gets_the_cpu_error(name):
    with pytest.raises(Exception) as on_cpu:
        BAD_INPUT[name]("cpu")
    with pytest.raises(type(on_cpu.value)) as on_device:
        BAD_INPUT[name](DEVICE)
    # The first line: the rest is a C++ backtrace of where it was raised.
    expected = str(on_cpu.value).splitlines()[0].replace("CPU", "").replace("cpu", "")
    actual = str(on_device.value).splitlines()[0].replace("CPU", "").replace("cpu", "")
    assert actual == expected
    # The device is still fine afterwards.
    assert torch.quantize_per_tensor(torch.ones(2, device=DEVICE), 0.5, 0, torch.quint8).int_repr().cpu().tolist() == [2, 2]


def test_mixing_a_quantized_accinte_tensor_with_a_cpu_one_raises():
    q = torch.quantize_per_tensor(values(6), 0.1, 3, torch.quint8)
    qa = q.to(DEVICE)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.cat([qa, q])
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.equal(qa, q)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.quantize_per_tensor(values(6), torch.tensor(0.1, device=DEVICE), torch.tensor(0, device=DEVICE), torch.quint8)


QUANTIZED_DTYPES = {torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4}


@pytest.mark.parametrize("index", [0, 1])
def test_the_device_reports_the_quantized_dtypes_it_converts(index):
    reported = set(torch.accelerator.get_device_capability(index)["supported_dtypes"])
    assert QUANTIZED_DTYPES <= reported
    # Each one is made from float on the device and comes back as the CPU's.
    x = values(3, 8)
    for dtype in sorted(QUANTIZED_DTYPES, key=str):
        expected = torch.quantize_per_tensor(x, 0.25, 1, dtype)
        actual = torch.quantize_per_tensor(x.to(f"accinte:{index}"), 0.25, 1, dtype)
        assert actual.device == torch.device("accinte", index) and actual.dtype == dtype
        back = actual.cpu()
        torch.testing.assert_close(back.int_repr(), expected.int_repr(), rtol=0, atol=0)
        torch.testing.assert_close(actual.int_repr().cpu(), expected.int_repr(), rtol=0, atol=0)
        torch.testing.assert_close(actual.dequantize().cpu(), expected.dequantize(), rtol=0, atol=0)


def test_a_float_copied_into_a_host_quantized_tensor_from_the_device():
    x = values(2, 5)
    expected = torch.quantize_per_tensor(torch.zeros(2, 5), 0.1, 3, torch.quint8)
    actual = expected.clone()
    expected.copy_(x)
    actual.copy_(x.to(DEVICE))
    assert torch.equal(actual.int_repr(), expected.int_repr())


def test_per_channel_qparams_on_the_device_are_kept_on_the_host():
    scales = torch.tensor([0.1, 0.2, 0.3], device=DEVICE)
    zero_points = torch.tensor([0, 1, 2], device=DEVICE)
    made = torch._empty_per_channel_affine_quantized([2, 3], scales=scales, zero_points=zero_points, axis=1,
                                                     dtype=torch.qint8, device=DEVICE)
    assert made.device.type == DEVICE and made.q_per_channel_scales().device.type == "cpu"
    # A factory's device defaults to the CPU, whatever its tensor arguments.
    host = torch._empty_per_channel_affine_quantized([2, 3], scales=scales, zero_points=zero_points, axis=1,
                                                     dtype=torch.qint8)
    assert host.device.type == "cpu" and host.q_per_channel_scales().device.type == "cpu"
    x = values(2, 3)
    expected = torch.quantize_per_channel(x, scales.cpu(), zero_points.cpu(), 1, torch.qint8)
    target = made.clone()
    target.copy_(expected.to(DEVICE))
    assert_same_qtensor(target, expected)
