"""Chapter 16, layouts: sparse, quantized and nested tensors on the device.

Each layout is its own dispatch key on top of the device's backend bit
(``SparsePrivateUse1``, ``SparseCsrPrivateUse1``, ``QuantizedPrivateUse1``,
``NestedTensorPrivateUse1``). Public APIs only: each check makes a tensor
of the layout on the device, checks that every dense part of it (indices,
values, integer representation, components) is on the device, and compares
what users compute with it against the CPU.
"""

import warnings

import torch

from .._api import Section
from .._helpers import COPIES, DEVICE, OPERATORS, assert_same

SECTION = Section(
    chapter="16", title="Layouts", requires=(DEVICE, COPIES, OPERATORS),
    missing="a sparse, quantized or nested tensor cannot be made or used on the "
            "device (no kernels for the layout's dispatch key)")


def _on_device(ctx, tensor: torch.Tensor, what: str) -> None:
    if tensor.device != ctx.dev(0):
        raise AssertionError(f"{what} is on {tensor.device}, not {ctx.dev(0)}")


def _matrix():
    # NB: zeros on purpose, so that the sparse forms hold fewer elements.
    return torch.tensor([[0.0, 1.5, 0.0, -2.0],
                         [3.0, 0.0, 0.0, 0.5],
                         [0.0, 0.0, 0.0, 0.0]])


@SECTION.check(missing="sparse COO tensors cannot be made, coalesced or multiplied on "
                       "the device (no SparsePrivateUse1 kernels)")
def sparse_coo(ctx):
    dense = _matrix()
    indices = torch.tensor([[1, 0, 1, 0], [0, 1, 0, 3]])
    values = torch.tensor([1.0, 2.0, 4.0, -1.0])
    expected = torch.sparse_coo_tensor(indices, values, (3, 4)).coalesce()
    actual = torch.sparse_coo_tensor(indices.to(ctx.dev(0)), values.to(ctx.dev(0)),
                                     (3, 4)).coalesce()
    _on_device(ctx, actual.indices(), "a coalesced tensor's indices")
    _on_device(ctx, actual.values(), "a coalesced tensor's values")
    assert_same(actual.indices(), expected.indices(), "indices after coalesce", exact=True)
    assert_same(actual.values(), expected.values(), "values after coalesce (duplicates summed)")
    assert_same(actual.to_dense(), expected.to_dense(), "to_dense")
    sparse = dense.to(ctx.dev(0)).to_sparse()
    assert sparse.layout == torch.sparse_coo, f"to_sparse gave {sparse.layout}"
    other = torch.arange(8.0).reshape(4, 2)
    assert_same(torch.sparse.mm(sparse, other.to(ctx.dev(0))),
                torch.sparse.mm(dense.to_sparse(), other), "torch.sparse.mm")


@SECTION.check(missing="a sparse gradient (nn.Embedding(sparse=True)) cannot be made or "
                       "applied on the device")
def sparse_gradients(ctx):
    torch.manual_seed(0)
    cpu = torch.nn.Embedding(6, 3, sparse=True)
    device = torch.nn.Embedding(6, 3, sparse=True).to(ctx.dev(0))
    device.load_state_dict(cpu.state_dict())
    steps = []
    for module in (cpu, device):
        optimizer = torch.optim.SGD(module.parameters(), lr=0.5)
        index = torch.tensor([[1, 4], [4, 0]]).to(module.weight.device)
        module(index).pow(2).sum().backward()
        grad = module.weight.grad
        assert grad.layout == torch.sparse_coo, f"the gradient's layout is {grad.layout}"
        steps.append(grad.coalesce())
        optimizer.step()
    _on_device(ctx, steps[1].values(), "the sparse gradient's values")
    assert_same(steps[1].to_dense(), steps[0].to_dense(), "the sparse gradient")
    assert_same(device.weight, cpu.weight, "the weight after an SGD step")


@SECTION.check(missing="sparse CSR tensors cannot be made or multiplied on the device "
                       "(no SparseCsrPrivateUse1 kernels)")
def sparse_csr(ctx):
    dense = _matrix()
    expected = dense.to_sparse_csr()
    actual = dense.to(ctx.dev(0)).to_sparse_csr()
    assert actual.layout == torch.sparse_csr, f"to_sparse_csr gave {actual.layout}"
    for part in ("crow_indices", "col_indices", "values"):
        _on_device(ctx, getattr(actual, part)(), f"a CSR tensor's {part}")
        assert_same(getattr(actual, part)(), getattr(expected, part)(), part, exact=True)
    vector = torch.tensor([1.0, -1.0, 2.0, 0.5])
    assert_same(actual @ vector.to(ctx.dev(0)), expected @ vector, "CSR matrix @ vector")
    assert_same(actual.to_dense(), dense, "to_dense", exact=True)


@SECTION.check(missing="quantized tensors cannot be made on the device, or quantize "
                       "differently from the CPU (no QuantizedPrivateUse1 kernels)")
def quantized(ctx):
    # NB: ties (0.25 / 0.5 = 0.5, 0.75 / 0.5 = 1.5) and values out of range.
    values = torch.tensor([[-300.0, -1.25, -0.25, 0.0], [0.25, 0.75, 1.0, 300.0]])
    with warnings.catch_warnings():
        # NB: 2.13 warns that quantized creation functions are deprecated.
        warnings.simplefilter("ignore", UserWarning)
        for dtype in (torch.qint8, torch.quint8, torch.qint32):
            expected = torch.quantize_per_tensor(values, 0.5, 3, dtype)
            actual = torch.quantize_per_tensor(values.to(ctx.dev(0)), 0.5, 3, dtype)
            assert actual.is_quantized and actual.dtype == dtype, \
                f"quantize_per_tensor gave {actual.dtype}"
            _on_device(ctx, actual, f"a {dtype} tensor")
            assert_same(actual.int_repr(), expected.int_repr(), f"{dtype}'s int_repr",
                        exact=True)
            assert_same(actual.dequantize(), expected.dequantize(), f"{dtype} dequantized")
            assert (actual.q_scale(), actual.q_zero_point()) == (0.5, 3), \
                f"{dtype}: scale and zero point {actual.q_scale()}, {actual.q_zero_point()}"
        scales, zero_points = torch.tensor([0.5, 0.25]), torch.tensor([0, -2])
        expected = torch.quantize_per_channel(values, scales, zero_points, 0, torch.qint8)
        actual = torch.quantize_per_channel(values.to(ctx.dev(0)), scales.to(ctx.dev(0)),
                                            zero_points.to(ctx.dev(0)), 0, torch.qint8)
        assert_same(actual.int_repr(), expected.int_repr(), "quantize_per_channel's int_repr",
                    exact=True)
        assert_same(actual.cpu().dequantize(), expected.dequantize(),
                    "a per-channel tensor copied to the CPU")


@SECTION.check(missing="nested tensors of the strided layout cannot be made or used on "
                       "the device (no NestedTensorPrivateUse1 kernels)")
def nested(ctx):
    parts = [torch.arange(6.0).reshape(2, 3), torch.arange(3.0).reshape(1, 3) - 1]
    with warnings.catch_warnings():
        # NB: PyTorch warns that the strided layout is a prototype.
        warnings.simplefilter("ignore", UserWarning)
        expected = torch.nested.nested_tensor(parts)
        actual = torch.nested.nested_tensor(parts, device=ctx.dev(0))
    assert actual.is_nested and actual.device == ctx.dev(0), \
        f"nested_tensor gave a tensor on {actual.device}"
    result = (actual * 2 + 1).relu()
    for position, (got, want) in enumerate(zip(result.unbind(), (expected * 2 + 1).relu().unbind())):
        _on_device(ctx, got, f"component {position}")
        assert_same(got, want, f"component {position} of (x * 2 + 1).relu()")
    assert_same(torch.nested.to_padded_tensor(actual, -1.0),
                torch.nested.to_padded_tensor(expected, -1.0), "to_padded_tensor")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        jagged = torch.nested.nested_tensor(parts, layout=torch.jagged, device=ctx.dev(0))
    assert_same(torch.nested.to_padded_tensor(jagged.sin(), 0.0),
                torch.nested.to_padded_tensor(expected.sin(), 0.0), "a jagged tensor's sin")
