"""Chapter 16, sparse tensors used wrongly on accinte: the CPU's error (same
type, same message) at the call, never a crash or a result the CPU would
refuse. Each case runs on both devices and the errors are compared."""

import re

import pytest
import torch
import torch_accinte  # noqa: F401

DEVICE = "accinte"

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")


def _error(call, device):
    with pytest.raises(Exception) as info:
        call(device)
    return info.value


def assert_same_error(call, match):
    """`call(device)` raises on the CPU and on accinte, the same type with
    the same first line, which `match` finds."""
    expected, actual = _error(call, "cpu"), _error(call, DEVICE)
    assert type(actual) is type(expected)
    first_line = str(expected).splitlines()[0]
    assert str(actual).splitlines()[0] == first_line
    assert re.search(match, first_line)


def _coo(device, dtype=torch.float32):
    return torch.eye(3, dtype=dtype).to_sparse().to(device)


def _uncoalesced(device):
    return torch.sparse_coo_tensor(
        torch.tensor([[0, 0]]), torch.tensor([1.0, 2.0]), (3,), device=device
    )


CASES = {
    "coo_plus_csr": (
        lambda d: _coo(d) + torch.eye(3, device=d).to_sparse_csr(),
        "only supported by strided tensors",
    ),
    "coo_mm_csr": (
        lambda d: torch.mm(_coo(d), torch.eye(3, device=d).to_sparse_csr()),
        "not implemented for Sparse",
    ),
    "crow_indices_of_coo": (lambda d: _coo(d).crow_indices(), "expected sparse row compressed"),
    "indices_of_csr": (
        lambda d: torch.eye(3, device=d).to_sparse_csr().indices(),
        "expected sparse coordinate",
    ),
    "values_of_uncoalesced": (lambda d: _uncoalesced(d).values(), "uncoalesced"),
    "indices_of_uncoalesced": (lambda d: _uncoalesced(d).indices(), "uncoalesced"),
    "index_out_of_range": (
        lambda d: torch.sparse_coo_tensor(
            torch.tensor([[0, 5]]), torch.tensor([1.0, 2.0]), (3,), device=d, check_invariants=True
        ),
        "found index 5",
    ),
    "negative_index": (
        lambda d: torch.sparse_coo_tensor(
            torch.tensor([[0, -1]]), torch.tensor([1.0, 2.0]), (3,), device=d, check_invariants=True
        ),
        "negative index",
    ),
    "csr_bad_crow_indices": (
        lambda d: torch.sparse_csr_tensor(
            torch.tensor([0, 2, 1]),
            torch.tensor([0, 1]),
            torch.tensor([1.0, 2.0]),
            (2, 2),
            device=d,
            check_invariants=True,
        ),
        "crow_indices",
    ),
    "csr_column_out_of_range": (
        lambda d: torch.sparse_csr_tensor(
            torch.tensor([0, 1, 2]),
            torch.tensor([0, 5]),
            torch.tensor([1.0, 2.0]),
            (2, 2),
            device=d,
            check_invariants=True,
        ),
        "col_indices",
    ),
    "mm_sizes": (
        lambda d: torch.sparse.mm(_coo(d), torch.ones(4, 2, device=d)),
        "Expected dim 0 size 3",
    ),
    "mm_dtypes": (
        lambda d: torch.sparse.mm(_coo(d), torch.ones(3, 2, device=d, dtype=torch.float64)),
        "expected scalar type Float but found Double",
    ),
    "mm_bool": (
        lambda d: torch.sparse.mm(_coo(d, torch.bool), torch.ones(3, 2, dtype=torch.bool, device=d)),
        "not implemented for 'Bool'",
    ),
    "csr_mm_int": (
        lambda d: torch.mm(
            torch.eye(3, dtype=torch.int32, device=d).to_sparse_csr(),
            torch.ones(3, 2, dtype=torch.int32, device=d),
        ),
        "not implemented for 'Int'",
    ),
    "mm_3d": (
        lambda d: torch.sparse.mm(torch.ones(2, 2, 2).to_sparse().to(d), torch.ones(2, 2, device=d)),
        "matrices expected",
    ),
    "add_sizes": (
        lambda d: _coo(d) + torch.eye(4).to_sparse().to(d),
        "expected sizes of 'self' and 'other' to match",
    ),
    "sum_dim": (lambda d: torch.sparse.sum(_coo(d), dim=5), "Dimension out of range"),
    "bsr_blocksize": (
        lambda d: torch.eye(3, device=d).to_sparse_bsr((2, 2)),
        "divisible by given blocksize",
    ),
    "shrink_sparse_resize": (
        lambda d: _coo(d).sparse_resize_((2, 2), 2, 0),
        "shrinking the size of sparse dimensions",
    ),
    "addmm_sparse_self": (
        lambda d: torch.addmm(_coo(d), _coo(d), torch.ones(3, 3, device=d)),
        "expected strided result tensor",
    ),
    # A view the CPU has no sparse kernel for: the CPU's own error, not the
    # fallback's refusal.
    "view": (lambda d: _coo(d).view(9), "Could not run 'aten::view'"),
}


@pytest.mark.parametrize("name", CASES)
def test_the_cpu_error(name):
    call, match = CASES[name]
    assert_same_error(call, match)


SAME_DEVICE = "Expected all tensors to be on the same device"


@pytest.mark.parametrize(
    "call",
    [
        lambda: _coo(DEVICE) + _coo("cpu"),
        lambda: _coo(DEVICE) + _coo(f"{DEVICE}:1"),
        lambda: torch.sparse.mm(_coo(DEVICE), torch.ones(3, 2)),
        lambda: torch.sparse.mm(_coo("cpu"), torch.ones(3, 2, device=DEVICE)),
        lambda: torch.ones(3, 3, device=DEVICE).add_(_coo("cpu")),
        lambda: torch.mv(torch.eye(3, device=DEVICE).to_sparse_csr(), torch.ones(3)),
        lambda: torch.addmm(torch.ones(3, 3), _coo(DEVICE), torch.ones(3, 3, device=DEVICE)),
    ],
    ids=[
        "coo_host",
        "coo_second_device",
        "mm_host_dense",
        "mm_host_sparse",
        "dense_add_host_sparse",
        "csr_mv_host_vector",
        "addmm_host_bias",
    ],
)
def test_mixed_devices_are_refused(call):
    # NB: CUDA refuses these as the dense operators do; the CPU fallback
    # would otherwise copy everything to the host and return an answer.
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        call()


def test_a_host_scalar_is_taken():
    scalar = torch.tensor(2.0)
    product = _coo(DEVICE) * scalar
    assert product.device.type == DEVICE
    assert product._values().device.type == DEVICE
    torch.testing.assert_close(product.cpu(), _coo("cpu") * scalar)


def test_a_failed_in_place_call_leaves_the_tensor_as_it_was():
    sparse = _coo(DEVICE)
    with pytest.raises(RuntimeError):
        sparse.add_(torch.eye(4).to_sparse().to(DEVICE))
    torch.testing.assert_close(sparse.cpu(), _coo("cpu"))
    assert sparse._indices().device.type == DEVICE
