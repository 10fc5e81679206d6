"""Chapter 16, the compressed sparse layouts (CSR, CSC, BSR, BSC) on
accinte, compared with the CPU: construction, the index tensors, copies both
ways, and the products a user reaches first."""

import pytest
import torch
import torch_accinte  # noqa: F401

DEVICE = "accinte"

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")


def _matrix(rows=6, cols=4, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    dense = torch.randn(rows, cols, generator=generator).to(dtype)
    dense[torch.rand(rows, cols, generator=generator) < 0.5] = 0
    return dense


# The layout, the method that makes it, its index accessors.
LAYOUTS = {
    "csr": (torch.sparse_csr, lambda t: t.to_sparse_csr(), ("crow_indices", "col_indices")),
    "csc": (torch.sparse_csc, lambda t: t.to_sparse_csc(), ("ccol_indices", "row_indices")),
    "bsr": (torch.sparse_bsr, lambda t: t.to_sparse_bsr((2, 2)), ("crow_indices", "col_indices")),
    "bsc": (torch.sparse_bsc, lambda t: t.to_sparse_bsc((2, 2)), ("ccol_indices", "row_indices")),
}


def assert_same(actual, expected):
    """`actual` (accinte) is `expected` (CPU), index tensors included, and
    holds nothing on the host."""
    assert actual.device.type == DEVICE
    assert actual.layout == expected.layout
    assert actual.dtype == expected.dtype
    if actual.layout in (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc):
        compressed, plain = LAYOUT_ACCESSORS[actual.layout]
        for name in (compressed, plain):
            index = getattr(actual, name)()
            assert index.device == actual.device
            torch.testing.assert_close(index.cpu(), getattr(expected, name)())
        assert actual.values().device == actual.device
        torch.testing.assert_close(actual.values().cpu(), expected.values())
    torch.testing.assert_close(actual.cpu(), expected)


LAYOUT_ACCESSORS = {layout: names for layout, _, names in LAYOUTS.values()}


@pytest.mark.parametrize("name", LAYOUTS)
def test_conversions_and_accessors(name):
    layout, convert, _ = LAYOUTS[name]
    dense = _matrix()
    expected = convert(dense)
    actual = convert(dense.to(DEVICE))
    assert actual.layout == layout
    assert_same(actual, expected)
    assert actual._nnz() == expected._nnz()
    assert (actual.sparse_dim(), actual.dense_dim()) == (2, 0)
    torch.testing.assert_close(actual.to_dense().cpu(), dense)
    assert actual.to_dense().device.type == DEVICE
    # Copies both ways: .to, .cpu, and a host tensor moved whole.
    assert_same(expected.to(DEVICE), expected)
    back = actual.cpu()
    assert back.values().device.type == "cpu"
    torch.testing.assert_close(back, expected)
    # Between layouts on the device: COO to compressed and back.
    assert_same(actual.to_sparse(), expected.to_sparse())
    assert_same(dense.to(DEVICE).to_sparse().to_sparse_csr(), dense.to_sparse_csr())


def test_constructors_on_the_device():
    crow = torch.tensor([0, 2, 3, 3])
    col = torch.tensor([0, 2, 1])
    values = torch.tensor([1.0, 2.0, 3.0])
    expected = torch.sparse_csr_tensor(crow, col, values, (3, 3))
    assert_same(torch.sparse_csr_tensor(crow, col, values, (3, 3), device=DEVICE), expected)
    assert_same(
        torch.sparse_csr_tensor(
            crow.to(DEVICE), col.to(DEVICE), values.to(DEVICE), (3, 3), check_invariants=True
        ),
        expected,
    )
    assert_same(
        torch.sparse_csc_tensor(crow, col, values, (3, 3), device=DEVICE),
        torch.sparse_csc_tensor(crow, col, values, (3, 3)),
    )
    blocks = torch.arange(8.0).reshape(2, 2, 2)
    assert_same(
        torch.sparse_bsr_tensor(torch.tensor([0, 1, 2]), torch.tensor([1, 0]), blocks, (4, 4), device=DEVICE),
        torch.sparse_bsr_tensor(torch.tensor([0, 1, 2]), torch.tensor([1, 0]), blocks, (4, 4)),
    )
    assert_same(
        torch.sparse_compressed_tensor(
            crow, col, values, (3, 3), layout=torch.sparse_csc, device=DEVICE
        ),
        torch.sparse_compressed_tensor(crow, col, values, (3, 3), layout=torch.sparse_csc),
    )


def test_copy_into_a_compressed_tensor_of_another_nnz():
    source = _matrix(seed=1).to_sparse_csr()
    target = _matrix(seed=2).to(DEVICE).to_sparse_csr()
    if target._nnz() == source._nnz():  # the seeds are chosen so they differ
        pytest.fail("the test needs two matrices of different nnz")
    # NB: the CPU's copy_ requires the same nnz on both sides; copying the
    # host tensor to the device (.to) is the way to replace one.
    with pytest.raises(RuntimeError, match="number of specified elements"):
        _matrix(seed=2).to_sparse_csr().copy_(source)
    with pytest.raises(RuntimeError, match="number of specified elements"):
        target.copy_(source)
    # Of the same nnz, copy_ takes the host values (and indices).
    same = (source * 2).to(DEVICE)
    same.copy_(source)
    assert_same(same, source)


def test_copies_between_devices():
    csr = _matrix().to_sparse_csr()
    second = csr.to(DEVICE).to(f"{DEVICE}:1")
    assert second.device == torch.device(DEVICE, 1)
    assert second.crow_indices().device == second.device
    torch.testing.assert_close(second.cpu(), csr)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["csr", "csc"])
def test_products(name, dtype):
    _, convert, _ = LAYOUTS[name]
    matrix = _matrix(dtype=dtype)
    sparse, on_device = convert(matrix), convert(matrix.to(DEVICE))
    generator = torch.Generator().manual_seed(5)
    dense = torch.randn(4, 3, generator=generator).to(dtype)
    bias = torch.randn(6, 3, generator=generator).to(dtype)
    vector = torch.randn(4, generator=generator).to(dtype)
    assert_same(torch.mm(on_device, dense.to(DEVICE)), torch.mm(sparse, dense))
    assert_same(on_device @ dense.to(DEVICE), sparse @ dense)
    assert_same(torch.mv(on_device, vector.to(DEVICE)), torch.mv(sparse, vector))
    assert_same(on_device @ vector.to(DEVICE), sparse @ vector)
    assert_same(
        torch.addmm(bias.to(DEVICE), on_device, dense.to(DEVICE), beta=0.5, alpha=2),
        torch.addmm(bias, sparse, dense, beta=0.5, alpha=2),
    )


def test_elementwise_and_sum():
    matrix = _matrix()
    csr, on_device = matrix.to_sparse_csr(), matrix.to(DEVICE).to_sparse_csr()
    assert_same(on_device * 2, csr * 2)
    assert_same(on_device.sin(), csr.sin())
    assert_same(-on_device, -csr)
    assert_same(on_device + on_device, csr + csr)
    assert_same(on_device.sum(), csr.sum())
    in_place = matrix.to(DEVICE).to_sparse_csr()
    in_place.mul_(3)
    assert_same(in_place, csr * 3)


def test_gradient_of_a_csr_product():
    matrix = _matrix(dtype=torch.float64)
    dense = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    grads = {}
    for device in ("cpu", DEVICE):
        d = dense.to(device).detach().requires_grad_()
        torch.mm(matrix.to(device).to_sparse_csr(), d).pow(2).sum().backward()
        grads[device] = d.grad
    assert_same(grads[DEVICE], grads["cpu"])
