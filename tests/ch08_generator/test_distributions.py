"""Chapter 08: each random operator on accinte, against its distribution.

With a fixed seed (inside fork_rng), every check is deterministic: the
moments, the range, and a Kolmogorov-Smirnov or chi-square statistic against
the exact distribution at a 0.1% level. A transform with the wrong scale,
shift, tail or support fails them.
"""

import math

import pytest
import torch
import torch.nn.functional as F
import torch_accinte  # noqa: F401
from rng_guard import forked, seeds_are_left_untouched  # noqa: F401

N = 20000
FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
# 1.95 / sqrt(n) is the 0.1% critical value of the one-sample KS statistic.
KS_LIMIT = 1.95 / math.sqrt(N)


@pytest.fixture(autouse=True)
def seeded(forked):
    torch.accinte.manual_seed_all(2024)


def ks_statistic(samples, cdf):
    values, _ = samples.double().cpu().flatten().sort()
    n = values.numel()
    expected = cdf(values)
    above = torch.arange(1, n + 1, dtype=torch.float64) / n - expected
    below = expected - torch.arange(0, n, dtype=torch.float64) / n
    return max(above.max().item(), below.max().item())


def chi_square_ok(counts, probabilities):
    """Pearson's statistic below the 0.1% critical value (Wilson-Hilferty)."""
    counts = counts.double()
    expected = probabilities.double() * counts.sum()
    statistic = ((counts - expected) ** 2 / expected).sum().item()
    k = counts.numel() - 1
    critical = k * (1 - 2 / (9 * k) + 3.09 * math.sqrt(2 / (9 * k))) ** 3
    return statistic < critical


def normal_cdf(x):
    return 0.5 * (1 + torch.erf(x / math.sqrt(2)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_uniform(dtype):
    x = torch.empty(N, device="accinte:1", dtype=dtype).uniform_(-2.0, 3.0)
    assert x.device == torch.device("accinte:1") and x.dtype == dtype
    values = x.cpu().double()
    assert values.min() >= -2.0 and values.max() < 3.0
    assert abs(values.mean() - 0.5) < 0.05
    assert abs(values.var() - 25 / 12) < 0.1
    if dtype in (torch.float32, torch.float64):
        assert ks_statistic(values, lambda v: (v + 2) / 5) < KS_LIMIT
    rand = torch.rand(N, device="accinte", dtype=dtype).cpu().double()
    assert rand.min() >= 0 and rand.max() < 1


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_normal(dtype):
    x = torch.empty(N, device="accinte", dtype=dtype).normal_(1.5, 2.0)
    values = x.cpu().double()
    assert abs(values.mean() - 1.5) < 0.06
    assert abs(values.std() - 2.0) < 0.06
    if dtype in (torch.float32, torch.float64):
        assert ks_statistic(values, lambda v: normal_cdf((v - 1.5) / 2)) < KS_LIMIT
    randn = torch.randn(N, device="accinte", dtype=dtype).cpu().double()
    assert ks_statistic(randn, normal_cdf) < (
        KS_LIMIT if dtype in (torch.float32, torch.float64) else 0.02)


def test_normal_overloads():
    """normal(Tensor, float), normal(float, Tensor), normal(Tensor, Tensor),
    their out= forms and normal(float, float, size) all draw on accinte."""
    mean = torch.tensor([-10.0, 0.0, 10.0], device="accinte").repeat(4000)
    std = torch.tensor([0.5, 1.0, 2.0], device="accinte").repeat(4000)
    cases = [
        (torch.normal(mean, 1.0), mean, torch.ones_like(std)),
        (torch.normal(0.0, std), torch.zeros_like(mean), std),
        (torch.normal(mean, std), mean, std),
    ]
    out = torch.empty(12000, device="accinte")
    cases.append((torch.normal(mean, std, out=out), mean, std))
    cases.append((torch.normal(mean, 1.0, out=torch.empty(12000, device="accinte")),
                  mean, torch.ones_like(std)))
    cases.append((torch.normal(0.0, std, out=torch.empty(12000, device="accinte")),
                  torch.zeros_like(mean), std))
    cases.append((torch.normal(3.0, 0.5, size=(12000,), device="accinte"),
                  torch.full_like(mean, 3.0), torch.full_like(std, 0.5)))
    for drawn, mu, sigma in cases:
        assert drawn.device.type == "accinte"
        z = ((drawn - mu) / sigma).cpu().double()
        assert ks_statistic(z, normal_cdf) < 1.95 / math.sqrt(12000)


def test_normal_rejects_negative_std():
    with pytest.raises(RuntimeError, match="std"):
        torch.empty(3, device="accinte").normal_(0.0, -1.0)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16,
                                   torch.int32, torch.int64, torch.float32,
                                   torch.float64, torch.float16, torch.bfloat16],
                         ids=str)
def test_random_bounds(dtype):
    x = torch.empty(N, device="accinte", dtype=dtype)
    values = x.random_(-3 if dtype != torch.uint8 else 2, 7).cpu().long()
    low = -3 if dtype != torch.uint8 else 2
    assert values.min() == low and values.max() == 6
    counts = torch.bincount(values - low)
    assert chi_square_ok(counts, torch.full((7 - low,), 1 / (7 - low)))
    assert torch.randint(5, (N,), device="accinte", dtype=dtype).cpu().long().max() == 4
    full = torch.empty(N, device="accinte", dtype=dtype).random_().cpu()
    if dtype.is_floating_point:
        # [0, 2^digits]: every integer of the range is exact in the dtype.
        digits = {torch.float32: 24, torch.float64: 53, torch.float16: 11,
                  torch.bfloat16: 8}[dtype]
        assert full.min() >= 0 and full.double().max() <= 2 ** digits
        assert full.double().max() > 2 ** digits / 2
    else:
        assert full.min() >= 0
        assert full.max() > torch.iinfo(dtype).max // 2


def test_random_full_64_bit_range_and_bool():
    x = torch.empty(N, device="accinte", dtype=torch.int64).random_(-2**63, None)
    values = x.cpu()
    assert values.min() < -2**62 and values.max() > 2**62
    flags = torch.empty(N, device="accinte", dtype=torch.bool).random_().cpu()
    assert chi_square_ok(torch.bincount(flags.long()), torch.tensor([0.5, 0.5]))


def test_random_bounds_are_checked():
    with pytest.raises(RuntimeError, match="from"):
        torch.empty(3, device="accinte").random_(5, 2)
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.empty(3, device="accinte", dtype=torch.int8).random_(0, 1000)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [torch.bool, torch.int64], ids=str)
def test_bernoulli_scalar(dtype):
    x = torch.empty(N, device="accinte", dtype=dtype).bernoulli_(0.3)
    values = x.cpu().long()
    assert set(values.unique().tolist()) == {0, 1}
    assert chi_square_ok(torch.bincount(values), torch.tensor([0.7, 0.3]))
    assert torch.empty(50, device="accinte", dtype=dtype).bernoulli_(0.0).cpu().long().sum() == 0
    assert torch.empty(50, device="accinte", dtype=dtype).bernoulli_(1.0).cpu().long().sum() == 50
    with pytest.raises(RuntimeError, match=r"\[0, 1\]"):
        torch.empty(3, device="accinte", dtype=dtype).bernoulli_(1.5)


@pytest.mark.parametrize("p_device", ["accinte", "cpu"])
def test_bernoulli_tensor(p_device):
    p = torch.tensor([0.0, 0.25, 0.9, 1.0], device=p_device)
    drawn = torch.empty(N // 4, 4, device="accinte").bernoulli_(p)
    counts = drawn.cpu().sum(0)
    assert counts[0] == 0 and counts[3] == N // 4
    assert abs(counts[1] / (N // 4) - 0.25) < 0.03
    assert abs(counts[2] / (N // 4) - 0.9) < 0.02
    probabilities = torch.rand(N, device="accinte")
    result = torch.bernoulli(probabilities)
    assert result.device.type == "accinte"
    assert abs((result - probabilities).sum().item()) < 4 * math.sqrt(N / 6)
    with pytest.raises(RuntimeError, match=r"\[0, 1\]"):
        torch.bernoulli(torch.tensor([0.5, -0.1], device="accinte"))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_exponential(dtype):
    x = torch.empty(N, device="accinte", dtype=dtype).exponential_(2.0)
    values = x.cpu().double()
    assert values.min() >= 0
    assert abs(values.mean() - 0.5) < 0.02
    if dtype in (torch.float32, torch.float64):
        assert values.min() > 0
        assert ks_statistic(values, lambda v: 1 - torch.exp(-2 * v)) < KS_LIMIT
    with pytest.raises(RuntimeError, match="lambda"):
        torch.empty(3, device="accinte", dtype=dtype).exponential_(-1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64], ids=str)
def test_geometric(dtype):
    p = 0.3
    x = torch.empty(N, device="accinte", dtype=dtype).geometric_(p)
    values = x.cpu().long()
    assert values.min() >= 1 and bool((x.cpu() == values.to(dtype)).all())
    assert abs(values.double().mean() - 1 / p) < 0.1
    # P(X = k) = (1 - p)^(k - 1) p for k = 1..7, the tail in one class.
    head = torch.tensor([(1 - p) ** (k - 1) * p for k in range(1, 8)])
    probabilities = torch.cat([head, 1 - head.sum().reshape(1)])
    counts = torch.bincount(values.clamp(max=8) - 1, minlength=8)
    assert chi_square_ok(counts, probabilities)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_log_normal(dtype):
    x = torch.empty(N, device="accinte", dtype=dtype).log_normal_(0.5, 0.75)
    values = x.cpu().double()
    assert values.min() > 0
    assert ks_statistic(values.log(), lambda v: normal_cdf((v - 0.5) / 0.75)) < KS_LIMIT


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_cauchy(dtype):
    x = torch.empty(N, device="accinte", dtype=dtype).cauchy_(1.0, 2.0)
    values = x.cpu().double()
    assert abs(values.median() - 1.0) < 0.1
    assert ks_statistic(values, lambda v: 0.5 + torch.atan((v - 1) / 2) / math.pi) < KS_LIMIT


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32,
                                   torch.float16, torch.uint8], ids=str)
def test_randperm_is_a_permutation(dtype):
    n = 200
    perm = torch.randperm(n, device="accinte:1", dtype=dtype)
    assert perm.device == torch.device("accinte:1") and perm.dtype == dtype
    torch.testing.assert_close(perm.cpu().sort().values,
                               torch.arange(n, dtype=dtype))
    assert not torch.equal(perm.cpu(), torch.arange(n, dtype=dtype))
    assert torch.randperm(0, device="accinte").numel() == 0
    out = torch.empty(3, device="accinte", dtype=dtype)
    torch.randperm(10, out=out)
    assert out.shape == (10,)


def test_randperm_is_uniform():
    """Each of the 24 orders of 4 elements is equally likely."""
    orders = {}
    draws = 2400
    for _ in range(draws):
        key = tuple(torch.randperm(4, device="accinte").tolist())
        orders[key] = orders.get(key, 0) + 1
    assert len(orders) == 24
    assert chi_square_ok(torch.tensor(list(orders.values())),
                         torch.full((24,), 1 / 24))


def test_randperm_errors():
    with pytest.raises(RuntimeError, match="negative"):
        torch.randperm(-1, device="accinte")
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.randperm(-1, out=torch.empty(0, device="accinte", dtype=torch.long))
    with pytest.raises(RuntimeError, match="2049"):
        torch.randperm(3000, device="accinte", dtype=torch.float16)
    with pytest.raises(RuntimeError, match="too large"):
        torch.randperm(300, device="accinte", dtype=torch.int8)


@pytest.mark.parametrize("replacement", [True, False])
def test_multinomial_frequencies(replacement):
    weights = torch.tensor([1.0, 0.0, 3.0, 6.0], device="accinte")
    rows = weights.repeat(N // 4, 1)
    samples = torch.multinomial(rows, 1 if not replacement else 4,
                                replacement=replacement)
    assert samples.device.type == "accinte" and samples.dtype == torch.int64
    first = samples[:, 0].cpu()
    assert (first != 1).all()
    counts = torch.bincount(first, minlength=4)
    keep = torch.tensor([0, 2, 3])
    assert chi_square_ok(counts[keep], weights.cpu()[keep] / 10)


def test_multinomial_without_replacement_draws_distinct():
    weights = torch.rand(50, 10, device="accinte") + 0.01
    samples = torch.multinomial(weights, 10).cpu()
    torch.testing.assert_close(samples.sort(dim=1).values,
                               torch.arange(10).expand(50, 10))
    one_d = torch.multinomial(torch.ones(6, device="accinte"), 6,
                              replacement=True)
    assert one_d.shape == (6,)


@pytest.mark.parametrize("replacement", [True, False])
def test_multinomial_errors(replacement):
    with pytest.raises(RuntimeError, match="element < 0"):
        torch.multinomial(torch.tensor([0.5, -0.1], device="accinte"), 2,
                          replacement=replacement)
    with pytest.raises(RuntimeError, match="sum of probabilities"):
        torch.multinomial(torch.zeros(2, 3, device="accinte"), 2,
                          replacement=replacement)
    with pytest.raises(RuntimeError, match="inf"):
        torch.multinomial(torch.tensor([1.0, float("nan")], device="accinte"),
                          2, replacement=replacement)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_native_dropout_mask_and_scale(dtype):
    x = torch.randn(N, device="accinte", dtype=dtype)
    output, mask = torch.native_dropout(x, 0.25, True)
    assert mask.dtype == torch.bool and output.dtype == dtype
    kept = mask.cpu()
    torch.testing.assert_close(output.cpu(), (x.cpu().float() * kept / 0.75).to(dtype))
    assert chi_square_ok(torch.bincount(kept.long()), torch.tensor([0.25, 0.75]))
    same, same_mask = torch.native_dropout(x, 0.25, False)
    torch.testing.assert_close(same, x)
    assert bool(same_mask.cpu().all())


@pytest.mark.parametrize("layout", ["channels_last", "permuted", "strided view"])
def test_native_dropout_lays_out_its_results_as_the_cpu(layout):
    """The output and the mask keep the input's memory format, as the CPU's
    do (`nn.Dropout` on a channels_last activation stays channels_last); the
    numbers drawn are those of the same input stored contiguously."""
    make = {"channels_last": lambda t: t.contiguous(memory_format=torch.channels_last),
            "permuted": lambda t: t.permute(0, 1, 3, 2),
            "strided view": lambda t: t.contiguous(memory_format=torch.channels_last)[..., ::2]}
    base = torch.randn(2, 3, 4, 6)
    expected = torch.native_dropout(make[layout](base), 0.5, True)
    x = make[layout](base.to("accinte"))
    state = torch.accinte.get_rng_state()
    output, mask = torch.native_dropout(x, 0.5, True)
    for result, cpu in zip((output, mask), expected):
        assert result.stride() == cpu.stride(), (layout, result.stride(), cpu.stride())
    torch.testing.assert_close(output.cpu(), x.cpu() * mask.cpu() / 0.5)
    torch.accinte.set_rng_state(state)
    _, contiguous_mask = torch.native_dropout(x.contiguous(), 0.5, True)
    assert torch.equal(mask.cpu(), contiguous_mask.cpu())


def test_dropout_reproducible_and_scaled():
    x = torch.ones(N, device="accinte")
    state = torch.accinte.get_rng_state()
    first = F.dropout(x, 0.4, training=True)
    torch.accinte.set_rng_state(state)
    again = F.dropout(x, 0.4, training=True)
    torch.testing.assert_close(first, again, rtol=0, atol=0)
    values = first.cpu()
    assert set(values.unique().tolist()) <= {0.0, torch.tensor(1 / 0.6).item()}
    assert abs((values != 0).double().mean() - 0.6) < 0.02
    torch.testing.assert_close(F.dropout(x, 0.4, training=False), x)
    assert (F.dropout(x, 1.0).cpu() == 0).all()
    torch.testing.assert_close(F.dropout(x, 0.0), x)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        torch.native_dropout(x, 1.5, True)


def test_dropout_gradient_uses_the_mask():
    x = torch.randn(1000, device="accinte", requires_grad=True)
    y = F.dropout(x, 0.5, training=True)
    y.sum().backward()
    kept = (y != 0).cpu()
    torch.testing.assert_close(x.grad.cpu(), kept.float() * 2.0)


def test_random_ops_keep_the_device():
    with torch.accinte.device(1):
        for tensor in (torch.rand(3, device="accinte"),
                       torch.randn(3, device="accinte"),
                       torch.randint(0, 5, (3,), device="accinte"),
                       torch.rand_like(torch.empty(3, device="accinte")),
                       torch.randperm(3, device="accinte")):
            assert tensor.device == torch.device("accinte:1")
