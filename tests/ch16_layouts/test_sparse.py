"""Chapter 16, sparse COO tensors on accinte: every result is compared with
the CPU's (layout, dtype, indices after coalescing, values, gradients), and
every sparse result's indices and values must live on the device."""

import copy
import io

import pytest
import torch
import torch_accinte  # noqa: F401

DEVICE = "accinte"


def _generator(seed=0):
    return torch.Generator().manual_seed(seed)


def _sparse_matrix(rows=5, cols=4, dtype=torch.float32, seed=0):
    """A dense CPU matrix with about half its elements zero."""
    dense = torch.randn(rows, cols, generator=_generator(seed)).to(dtype)
    dense[torch.rand(rows, cols, generator=_generator(seed + 1)) < 0.5] = 0
    return dense


def _uncoalesced():
    """A CPU COO tensor with a duplicated index, out of order."""
    indices = torch.tensor([[2, 0, 2, 1], [1, 3, 1, 0]])
    values = torch.tensor([1.0, 2.0, 3.0, 4.0])
    return torch.sparse_coo_tensor(indices, values, (3, 4))


def assert_on_device(tensor):
    """A sparse accinte tensor must hold nothing on the host."""
    assert tensor.device.type == DEVICE
    if tensor.layout == torch.sparse_coo:
        assert tensor._indices().device == tensor.device
        assert tensor._values().device == tensor.device


def assert_flag_is_true(sparse):
    """A COO tensor that says it is coalesced must be: kernels skip the
    sorting and summing for it, and would return wrong results."""
    if sparse.is_coalesced():
        host = sparse.cpu()
        rebuilt = torch.sparse_coo_tensor(host._indices(), host._values(), host.shape)
        assert torch.equal(rebuilt.coalesce().indices(), host._indices())


def assert_same(actual, expected):
    """`actual` (accinte) is `expected` (CPU): layout, dtype, sizes, and
    indices and values (of COO, once coalesced).

    NB: the coalesced flag may differ where autograd decides it (it keeps a
    gradient's header or rebuilds it, by reference counts); a flag that says
    False of coalesced indices costs time, never a result, so only a true
    flag is checked against the indices."""
    assert_on_device(actual)
    assert actual.layout == expected.layout
    assert actual.dtype == expected.dtype
    if actual.layout == torch.sparse_coo:
        assert_flag_is_true(actual)
        assert (actual.sparse_dim(), actual.dense_dim()) == (
            expected.sparse_dim(),
            expected.dense_dim(),
        )
        # NB: two uncoalesced tensors with the same meaning may list their
        # elements differently (a duplicate summed or kept, by the flag).
        torch.testing.assert_close(actual.cpu().coalesce(), expected.coalesce())
    else:
        torch.testing.assert_close(actual.cpu(), expected)


# --- construction, the header, copies -------------------------------------


def test_to_sparse_and_back():
    dense = _sparse_matrix()
    sparse = dense.to(DEVICE).to_sparse()
    assert_same(sparse, dense.to_sparse())
    assert sparse._nnz() == int((dense != 0).sum())
    assert (sparse.sparse_dim(), sparse.dense_dim()) == (2, 0)
    assert sparse.is_coalesced()
    torch.testing.assert_close(sparse.to_dense().cpu(), dense)
    assert sparse.to_dense().device.type == DEVICE
    # A hybrid tensor: one sparse dimension, one dense.
    assert_same(dense.to(DEVICE).to_sparse(1), dense.to_sparse(1))


def test_sparse_coo_tensor_on_the_device():
    indices = torch.tensor([[0, 1, 1], [2, 0, 2]])
    values = torch.tensor([3.0, 4.0, 5.0])
    expected = torch.sparse_coo_tensor(indices, values, (2, 3))
    # Host indices and values moved by the constructor, or device ones.
    assert_same(
        torch.sparse_coo_tensor(indices, values, (2, 3), device=DEVICE), expected
    )
    actual = torch.sparse_coo_tensor(
        indices.to(DEVICE), values.to(DEVICE), (2, 3), check_invariants=True
    )
    assert_same(actual, expected)
    # Sizes inferred from the indices, and an empty tensor of a given size.
    assert torch.sparse_coo_tensor(indices.to(DEVICE), values.to(DEVICE)).shape == (2, 3)
    empty = torch.sparse_coo_tensor(size=(4, 5), device=DEVICE)
    assert_same(empty, torch.sparse_coo_tensor(size=(4, 5)))
    assert empty._nnz() == 0
    assert_same(
        torch.zeros(3, 2, layout=torch.sparse_coo, device=DEVICE),
        torch.zeros(3, 2, layout=torch.sparse_coo),
    )


def test_coalesce_sums_duplicates_and_sorts():
    cpu = _uncoalesced()
    sparse = cpu.to(DEVICE)
    assert not sparse.is_coalesced()
    assert sparse._nnz() == 4
    coalesced = sparse.coalesce()
    expected = cpu.coalesce()
    assert coalesced.is_coalesced()
    assert_on_device(coalesced)
    # The indices themselves, in the CPU's order, and the summed values.
    torch.testing.assert_close(coalesced.indices().cpu(), expected.indices())
    torch.testing.assert_close(coalesced.values().cpu(), expected.values())
    assert coalesced.indices().device.type == DEVICE
    # The uncoalesced tensor is left as it was.
    torch.testing.assert_close(sparse._indices().cpu(), cpu._indices())


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.bool, torch.complex64]
)
@pytest.mark.parametrize("dense_shape", [(), (2,)], ids=["plain", "hybrid"])
def test_coalesce_matches_the_cpu_exactly(dtype, dense_shape):
    # Duplicates of one position, three times, out of order, in a 3-d index.
    indices = torch.tensor([[1, 0, 1, 1, 0, 1], [2, 0, 2, 0, 0, 2], [0, 1, 0, 1, 1, 0]])
    values = torch.arange(1.0, 7.0).reshape(6, *([1] * len(dense_shape))).expand(6, *dense_shape)
    values = (values * 0.3).to(dtype)
    cpu = torch.sparse_coo_tensor(indices, values, (2, 3, 2, *dense_shape)).coalesce()
    actual = torch.sparse_coo_tensor(
        indices, values, (2, 3, 2, *dense_shape), device=DEVICE
    ).coalesce()
    assert actual.is_coalesced()
    assert_on_device(actual)
    # NB: bit for bit, values included: the duplicates are summed in the
    # CPU's order.
    assert torch.equal(actual.indices().cpu(), cpu.indices())
    assert torch.equal(actual.values().cpu(), cpu.values())
    assert actual.values().dtype == dtype


def test_coalesce_of_few_elements_and_no_sparse_dimension():
    for cpu in (
        torch.sparse_coo_tensor(size=(3, 3)),
        torch.sparse_coo_tensor(torch.tensor([[2], [1]]), torch.tensor([5.0]), (3, 3)),
        torch.sparse_coo_tensor(torch.zeros(0, 3, dtype=torch.long), torch.ones(3, 2), (2,)),
    ):
        on_device = cpu.to(DEVICE)
        actual = on_device.coalesce()
        assert actual.is_coalesced()
        assert_same(actual, cpu.coalesce())
        # A new tensor: the input keeps its flag, as on the CPU.
        assert on_device.is_coalesced() == cpu.is_coalesced()


def test_coalesce_runs_on_the_device():
    # NB: chapter 09's recorder counts the operators that copy their tensors
    # to the host; `_coalesce` is a kernel of this chapter, made of dense
    # operators, and must not be one of them.
    sparse = _uncoalesced().to(DEVICE)
    with torch.accinte.record_fallbacks() as record:
        sparse.coalesce()
        torch.sparse.mm(sparse, torch.ones(4, 2, device=DEVICE))
    assert "aten::_coalesce" not in record.calls
    assert "aten::addmm" in record.calls  # the recorder sees the sparse route


def test_coalesce_gradient():
    cpu = _uncoalesced()
    grads = {}
    for device in ("cpu", DEVICE):
        s = _leaf(cpu, device)
        (s.coalesce().to_dense() * torch.arange(4.0, device=device)).sum().backward()
        grads[device] = s.grad
    assert_same(grads[DEVICE], grads["cpu"])


def test_indices_and_values_are_views():
    sparse = _sparse_matrix().to(DEVICE).to_sparse()
    values = sparse.values()
    values.mul_(2)
    torch.testing.assert_close(sparse.to_dense().cpu(), _sparse_matrix() * 2)
    assert sparse._values()._base is not None or sparse._values().data_ptr() == values.data_ptr()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool])
def test_copies_both_ways_keep_the_dtype(dtype):
    cpu = _sparse_matrix().to(dtype).to_sparse()
    on_device = cpu.to(DEVICE)
    assert_same(on_device, cpu)
    back = on_device.cpu()
    assert back.device.type == "cpu" and back._indices().device.type == "cpu"
    torch.testing.assert_close(back, cpu)
    # copy_ in both directions, into a tensor of another nnz.
    target = torch.sparse_coo_tensor(size=cpu.shape, dtype=dtype, device=DEVICE)
    target.copy_(cpu)
    assert_same(target, cpu)
    host = torch.sparse_coo_tensor(size=cpu.shape, dtype=dtype)
    host.copy_(on_device)
    torch.testing.assert_close(host, cpu)
    # A dtype change on the way.
    assert_same(cpu.to(DEVICE, torch.float64), cpu.to(torch.float64))


def test_copies_between_devices():
    cpu = _sparse_matrix().to_sparse()
    second = cpu.to(DEVICE).to(f"{DEVICE}:1")
    assert second.device == torch.device(DEVICE, 1)
    assert second._indices().device == second.device
    torch.testing.assert_close(second.cpu(), cpu)


# --- arithmetic and products -----------------------------------------------


def test_add_mul_sum():
    a, b = _sparse_matrix(seed=0), _sparse_matrix(seed=5)
    sa, sb = a.to_sparse(), b.to_sparse()
    da, db = sa.to(DEVICE), sb.to(DEVICE)
    assert_same(da + db, sa + sb)
    assert_same(torch.add(da, db, alpha=2), torch.add(sa, sb, alpha=2))
    assert_same(da - db, sa - sb)
    assert_same(da * 3, sa * 3)
    assert_same(da * db, sa * sb)
    assert_same(da / 2, sa / 2)
    assert_same(-da, -sa)
    assert_same(da.sin(), sa.sin())
    # sparse + dense is dense.
    assert_same(a.to(DEVICE) + da, a + sa)
    # sum: everything (a dense 0-dim tensor), or some dimensions.
    assert_same(da.sum(), sa.sum())
    assert_same(torch.sparse.sum(da), torch.sparse.sum(sa))
    assert_same(torch.sparse.sum(da, dim=0), torch.sparse.sum(sa, dim=0))
    assert_same(da.sum(dim=1), sa.sum(dim=1))


def test_in_place_updates_write_to_the_device_tensor():
    a, b = _sparse_matrix(seed=0).to_sparse(), _sparse_matrix(seed=5).to_sparse()
    da, db = a.to(DEVICE), b.to(DEVICE)
    result = da.add_(db)
    assert result is da
    assert_same(da, a.add_(b))
    da.mul_(2)
    assert_same(da, a.mul_(2))
    da.zero_()
    assert_same(da, a.zero_())
    dense = torch.ones(5, 4)
    on_device = dense.to(DEVICE)
    on_device.add_(db)
    assert_same(on_device, dense.add_(b))


def test_uncoalesced_operands_give_the_cpu_result():
    cpu = _uncoalesced()
    sparse = cpu.to(DEVICE)
    assert_same(sparse + sparse, cpu + cpu)
    assert_same(sparse * 2, cpu * 2)
    assert_same(sparse.sum(), cpu.sum())
    assert_same(sparse.to_dense(), cpu.to_dense())
    dense = torch.randn(4, 2, generator=_generator(3))
    assert_same(torch.sparse.mm(sparse, dense.to(DEVICE)), torch.sparse.mm(cpu, dense))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_products(dtype):
    matrix = _sparse_matrix(dtype=dtype)
    sparse, on_device = matrix.to_sparse(), matrix.to_sparse().to(DEVICE)
    dense = torch.randn(4, 3, generator=_generator(7)).to(dtype)
    bias = torch.randn(5, 3, generator=_generator(8)).to(dtype)
    vector = torch.randn(4, generator=_generator(9)).to(dtype)
    d_dense, d_bias, d_vector = dense.to(DEVICE), bias.to(DEVICE), vector.to(DEVICE)
    assert_same(torch.sparse.mm(on_device, d_dense), torch.sparse.mm(sparse, dense))
    assert_same(torch.mm(on_device, d_dense), torch.mm(sparse, dense))
    assert_same(on_device @ d_dense, sparse @ dense)
    assert_same(torch.mv(on_device, d_vector), torch.mv(sparse, vector))
    assert_same(
        torch.addmm(d_bias, on_device, d_dense, beta=0.5, alpha=2),
        torch.addmm(bias, sparse, dense, beta=0.5, alpha=2),
    )
    assert_same(
        torch.sparse.addmm(d_bias, on_device, d_dense),
        torch.sparse.addmm(bias, sparse, dense),
    )
    # sparse @ sparse is sparse.
    square = _sparse_matrix(4, 4, dtype=dtype, seed=11).to_sparse()
    assert_same(
        torch.sparse.mm(on_device, square.to(DEVICE)), torch.sparse.mm(sparse, square)
    )


def test_transpose_and_permute():
    sparse = _sparse_matrix().to_sparse()
    on_device = sparse.to(DEVICE)
    assert_same(on_device.t(), sparse.t())
    assert_same(on_device.transpose(0, 1).coalesce(), sparse.transpose(0, 1).coalesce())
    assert_same(on_device.permute(1, 0), sparse.permute(1, 0))
    assert_same(on_device.unsqueeze(0), sparse.unsqueeze(0))


# --- autograd --------------------------------------------------------------


def _leaf(tensor, device):
    return tensor.to(device).detach().requires_grad_()


def test_gradients_of_products_and_to_dense():
    matrix = _sparse_matrix().to_sparse()
    dense = torch.randn(4, 3, generator=_generator(2))
    grads = {}
    for device in ("cpu", DEVICE):
        s, d = _leaf(matrix, device), _leaf(dense, device)
        (torch.sparse.mm(s, d).sum() + s.to_dense().pow(2).sum()).backward()
        grads[device] = (s.grad, d.grad)
    assert_same(grads[DEVICE][0], grads["cpu"][0])
    assert_same(grads[DEVICE][1], grads["cpu"][1])
    assert grads[DEVICE][0].layout == torch.sparse_coo


def test_gradient_through_sum_and_values():
    matrix = _sparse_matrix().to_sparse()
    grads = {}
    for device in ("cpu", DEVICE):
        s = _leaf(matrix, device)
        (torch.sparse.sum(s) * 3 + (s * 2).coalesce().values().sum()).backward()
        grads[device] = s.grad
    assert_same(grads[DEVICE], grads["cpu"])


def test_gradcheck_of_sparse_mm():
    sparse = _sparse_matrix(4, 3, dtype=torch.float64).to_sparse()
    dense = torch.randn(3, 2, dtype=torch.float64, generator=_generator(4))

    def check(device):
        return torch.autograd.gradcheck(
            torch.sparse.mm,
            (_leaf(sparse, device), _leaf(dense, device)),
            masked=True,
            fast_mode=True,
        )

    assert check("cpu")
    assert check(DEVICE)


def test_embedding_sparse_gradient():
    weights = torch.randn(10, 3, generator=_generator(1))
    index = torch.tensor([[1, 2, 4], [4, 3, 1]])
    grads = {}
    for device in ("cpu", DEVICE):
        embedding = torch.nn.Embedding(10, 3, sparse=True, _weight=weights.clone()).to(device)
        (embedding(index.to(device)) * torch.arange(3.0, device=device)).sum().backward()
        grads[device] = embedding.weight.grad
    assert grads[DEVICE].layout == torch.sparse_coo
    assert not grads[DEVICE].is_coalesced()
    assert_same(grads[DEVICE], grads["cpu"])
    # Two backwards accumulate into one sparse gradient.
    embedding = torch.nn.Embedding(10, 3, sparse=True, _weight=weights.clone()).to(DEVICE)
    reference = torch.nn.Embedding(10, 3, sparse=True, _weight=weights.clone())
    for module, device in ((embedding, DEVICE), (reference, "cpu")):
        for rows in ([1, 2], [2, 9]):
            module(torch.tensor(rows, device=device)).sum().backward()
    assert_same(embedding.weight.grad, reference.weight.grad)


def test_gather_and_index_select_sparse_gradients():
    source = torch.randn(3, 4, generator=_generator(6))
    index = torch.tensor([[0, 1], [1, 2], [3, 3]])
    grads = {}
    for device in ("cpu", DEVICE):
        x = _leaf(source, device)
        torch.gather(x, 1, index.to(device), sparse_grad=True).pow(2).sum().backward()
        grads[device] = x.grad
    assert grads[DEVICE].layout == torch.sparse_coo
    assert_same(grads[DEVICE], grads["cpu"])
    # index_select of a sparse tensor; its backward (index_add_ into a
    # sparse gradient) has no kernel on the CPU either: the same error.
    sparse = _sparse_matrix().to_sparse()
    rows = torch.tensor([4, 0, 4, 2])
    for device in ("cpu", DEVICE):
        s = _leaf(sparse, device)
        selected = s.index_select(0, rows.to(device))
        if device == DEVICE:
            assert_same(selected, sparse.index_select(0, rows))
        with pytest.raises(NotImplementedError, match="index_add_"):
            selected.to_dense().sum().backward()


# --- training with sparse gradients ----------------------------------------


class _Bag(torch.nn.Module):
    """An embedding model as recommenders write it: sparse embedding rows,
    a dense head."""

    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(20, 4, sparse=True)
        self.head = torch.nn.Linear(4, 1)

    def forward(self, index):
        return self.head(self.embedding(index).mean(dim=1)).squeeze(-1)


def _batches(steps=5):
    generator = _generator(12)
    for _ in range(steps):
        yield (
            torch.randint(0, 20, (6, 3), generator=generator),
            torch.randn(6, generator=generator),
        )


def _train(model, device, make_optimizers, move_after=False):
    """Trains `model`; returns its parameters after each step (on the CPU)."""
    if not move_after:
        model = model.to(device)
    optimizers = make_optimizers(model)
    if move_after:
        # NB: the optimizer is built first and the module moved after, as
        # users do; it must still hold the module's (moved) parameters.
        model.to(device)
    history = []
    for index, target in _batches():
        for optimizer in optimizers:
            optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(index.to(device)), target.to(device))
        loss.backward()
        assert model.embedding.weight.grad.layout == torch.sparse_coo
        for optimizer in optimizers:
            optimizer.step()
        history.append([p.detach().cpu().clone() for p in model.parameters()])
    return history


def _sparse_adam_and_adam(model):
    return [
        torch.optim.SparseAdam(list(model.embedding.parameters()), lr=0.05),
        torch.optim.Adam(list(model.head.parameters()), lr=0.05),
    ]


def _sgd(model):
    return [torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.0)]


@pytest.mark.parametrize("make_optimizers", [_sparse_adam_and_adam, _sgd], ids=["SparseAdam", "SGD"])
@pytest.mark.parametrize("move_after", [False, True], ids=["moved_first", "optimizer_first"])
def test_training_with_sparse_gradients_matches_the_cpu(make_optimizers, move_after):
    model = _Bag()
    reference = copy.deepcopy(model)
    initial = [p.detach().clone() for p in model.parameters()]
    expected = _train(reference, "cpu", make_optimizers)
    actual = _train(model, DEVICE, make_optimizers, move_after=move_after)
    assert model.embedding.weight.device.type == DEVICE
    for step, (got, want) in enumerate(zip(actual, expected)):
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, msg=lambda m: f"step {step}: {m}")
    # Every parameter moved: the comparison is not of two untouched models.
    for before, after in zip(initial, actual[-1]):
        assert not torch.equal(before, after)


def test_save_load_and_deepcopy_keep_the_parts_on_the_device():
    coo = _uncoalesced().to(DEVICE)
    csr = _sparse_matrix().to(DEVICE).to_sparse_csr()
    buffer = io.BytesIO()
    torch.save({"coo": coo, "csr": csr}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    assert_same(loaded["coo"], _uncoalesced())
    assert loaded["csr"].crow_indices().device.type == DEVICE
    torch.testing.assert_close(loaded["csr"].cpu(), _sparse_matrix().to_sparse_csr())
    assert_same(copy.deepcopy(coo), _uncoalesced())
