"""Chapter 01: torch.accelerator.get_device_capability, from the guard.

Each dtype the device reports must really work: a tensor of it goes to the
device and back unchanged, and converts on the device to each other reported
dtype exactly as on the CPU.
"""

import itertools

import pytest
import torch
import torch_accinte  # noqa: F401

from conftest import stage_has

#: What chapter 01's guard reports: every dense dtype the CPU converts
#: between. No quantized dtype before chapter 16 (its layouts add them, and
#: test them), no bits, float4 or sub-byte integer dtype (their bytes
#: round-trip, but nothing converts them).
DENSE_DTYPES = {
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.uint16, torch.uint32, torch.uint64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64,
    torch.complex32, torch.complex64, torch.complex128,
    torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2,
    torch.float8_e5m2fnuz, torch.float8_e8m0fnu,
}
QUANTIZED_DTYPES = {torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4}

# NB: PyTorch warns on every complex32 tensor it makes, and on each complex
# to real conversion, which the capability promises too.
pytestmark = [pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental"),
              pytest.mark.filterwarnings("ignore:Casting complex values to real")]


def reported(device=None):
    capability = torch.accelerator.get_device_capability(device)
    assert isinstance(capability, dict) and "supported_dtypes" in capability
    dtypes = capability["supported_dtypes"]
    assert all(isinstance(dtype, torch.dtype) for dtype in dtypes)
    return set(dtypes)


def supported(device=None):
    """The dense dtypes reported: the quantized ones, which chapter 16 adds,
    convert by quantizing, and chapter 16's tests check them."""
    return reported(device) - QUANTIZED_DTYPES


def sample(dtype):
    """Varied values of ``dtype``, made on the CPU (negative only where the
    dtype has a sign)."""
    values = torch.linspace(-40, 40, 37, dtype=torch.float64)
    if dtype == torch.bool:
        return values > 0
    if dtype.is_complex:
        return torch.complex(values, -values).to(dtype)
    if not dtype.is_floating_point and not dtype.is_signed:
        values = values.abs()
    return values.to(dtype)


def assert_same_bits(actual, expected, what):
    """Same dtype, shape and bytes (NaN included): the device must not
    change a value, not even within a tolerance."""
    assert actual.device == expected.device, what
    assert actual.dtype == expected.dtype, f"{what}: {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, what
    assert torch.equal(actual.view(torch.uint8), expected.view(torch.uint8)), what
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True,
                               msg=lambda message: f"{what}: {message}")


def test_every_form_of_the_device_reports_the_same_dense_dtypes():
    expected = supported(0)
    assert expected == DENSE_DTYPES
    for device in (None, "accinte", "accinte:0", torch.device("accinte:0")):
        assert supported(device) == expected
    assert supported(1) == supported("accinte:1") == expected
    quantized = QUANTIZED_DTYPES if stage_has("16_layouts") else set()
    for device in (None, 0, 1, "accinte:1"):
        assert reported(device) & QUANTIZED_DTYPES == quantized


@pytest.mark.parametrize("index", [0, 1])
def test_every_reported_dtype_round_trips(index):
    device = torch.device("accinte", index)
    for dtype in sorted(supported(index), key=str):
        cpu = sample(dtype)
        on_device = cpu.to(device)
        assert on_device.device == device and on_device.dtype == dtype
        assert_same_bits(on_device.cpu(), cpu, f"a {dtype} round trip through {device}")


def test_every_reported_dtype_converts_to_every_other_on_the_device():
    dtypes = sorted(supported(), key=str)
    # NB: non-negative values, in the range of every integer dtype: a float
    # out of an integer's range converts to whatever the C++ cast gives.
    values = torch.tensor([0.0, 0.5, 1.0, 2.0, 3.25, 7.0, 16.0, 100.0])
    for source, target in itertools.product(dtypes, dtypes):
        cpu = values.to(source)
        converted = cpu.to("accinte").to(target)
        assert converted.device == torch.device("accinte:0")
        assert_same_bits(converted.cpu(), cpu.to(target),
                         f"{source} to {target} on the device")


@pytest.mark.parametrize("device", [2, 5, "accinte:2", torch.device("accinte:7"), -1, -2])
def test_a_bad_device_index_is_refused(device):
    index = device if isinstance(device, int) else torch.device(device).index
    with pytest.raises(RuntimeError,
                       match=rf"accinte: invalid device index {index}: there are 2 accinte "
                             r"devices \(valid indices 0 to 1\)"):
        torch.accelerator.get_device_capability(device)
    assert supported() == DENSE_DTYPES
