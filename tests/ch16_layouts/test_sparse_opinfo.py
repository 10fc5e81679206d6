"""Chapter 16: PyTorch's own sparse samples (the OpInfos of ``op_db`` that
have sample inputs of a sparse layout) on accinte against the CPU.

Each sample is run on the CPU and, moved, on accinte; the results must be
on accinte with the CPU's layout, dtype and values. A sample that names a
device of its own (``zeros_like(x, device="cpu")``) is the CPU's on both,
and a sample the CPU refuses is left out: the CPU's errors are
test_sparse_bad_input.py's subject."""

import warnings

import pytest
import torch
import torch_accinte  # noqa: F401
from torch.testing._internal.common_methods_invocations import op_db

DEVICE = "accinte"
# NB: `mul` has a COO sample of a million elements, built to test CPU
# kernels' parallel paths; through the CPU route it only costs copies.
MAX_ELEMENTS = 100_000

# The layouts whose samples an OpInfo may have: its flag, its generator.
LAYOUTS = {
    "coo": ("supports_sparse", "sample_inputs_sparse_coo"),
    "csr": ("supports_sparse_csr", "sample_inputs_sparse_csr"),
    "csc": ("supports_sparse_csc", "sample_inputs_sparse_csc"),
    "bsr": ("supports_sparse_bsr", "sample_inputs_sparse_bsr"),
    "bsc": ("supports_sparse_bsc", "sample_inputs_sparse_bsc"),
}


def _samples(op, layout):
    """The op's float32 samples of `layout` on the CPU, or [] if it has no
    generator for it."""
    flag, generator = LAYOUTS[layout]
    if not getattr(op, flag, False):
        return []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return list(getattr(op, generator)("cpu", torch.float32))
    except NotImplementedError:  # "no sample function specified"
        return []


# NB: made once, at collection: some generators take seconds (mul's).
SAMPLES = {
    (op.full_name, layout): samples
    for op in op_db
    for layout in LAYOUTS
    if (samples := _samples(op, layout))
}
CASES = [
    pytest.param(op, layout, id=f"{op.full_name}-{layout}")
    for op in op_db
    for layout in LAYOUTS
    if (op.full_name, layout) in SAMPLES
]


def _to_device(value):
    return value.to(DEVICE) if isinstance(value, torch.Tensor) else value


def _assert_same(actual, expected, random):
    if isinstance(expected, torch.Tensor):
        assert actual.device.type == DEVICE
        assert (actual.layout, actual.dtype, actual.shape) == (
            expected.layout,
            expected.dtype,
            expected.shape,
        )
        if not random:
            torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _assert_same(a, e, random)
    else:
        assert actual == expected


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("op, layout", CASES)
def test_sparse_samples_match_the_cpu(op, layout):
    random = "rand" in op.name  # randn_like: the layout, dtype and shape only
    compared = 0
    for sample in SAMPLES[op.full_name, layout]:
        if "device" in sample.kwargs or sample.input.numel() > MAX_ELEMENTS:
            continue
        try:
            expected = op(sample.input, *sample.args, **sample.kwargs)
        except Exception:  # noqa: BLE001 - the CPU refuses the sample
            continue
        moved = sample.transform(_to_device)
        _assert_same(op(moved.input, *moved.args, **moved.kwargs), expected, random)
        compared += 1
    assert compared > 0


def test_the_sparse_samples_are_counted():
    # NB: few OpInfos of 2.13 have sparse samples; the sweep must not
    # quietly lose them (a renamed flag or generator would).
    assert len(CASES) >= 10
