"""Chapter 02: every ATen operator runs on accinte, and agrees with the CPU.

Each case builds its inputs on the CPU, runs the same function on CPU copies
and on accinte copies, and compares: same values, same dtypes, and every
tensor result on the inputs' accinte device.
"""

import pytest
import torch
import torch.nn.functional as F
import torch_accinte  # noqa: F401


def sample(*shape, dtype=torch.float32, seed=0, low=-5.0, high=5.0):
    """Deterministic CPU values; integers and bools from the same draw."""
    generator = torch.Generator().manual_seed(seed)
    values = torch.rand(shape, generator=generator, dtype=torch.float64)
    values = values * (high - low) + low
    if dtype == torch.bool:
        return values > 0
    if not dtype.is_floating_point:
        return values.round().to(dtype)
    return values.to(dtype)


def to_device(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


def flatten(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in flatten(v)]
    return []


def check_against_cpu(function, *inputs, device="accinte:0"):
    expected = function(*to_device(inputs, "cpu"))
    actual = function(*to_device(inputs, device))
    for tensor in flatten(actual):
        assert tensor.device == torch.device(device)
    torch.testing.assert_close(to_device(actual, "cpu"), expected,
                               equal_nan=True)
    return actual


FLOAT = sample(4, 5)
FLOAT_B = sample(4, 5, seed=1)
INT = sample(4, 5, dtype=torch.int64, seed=2, low=-20, high=20)
BOOL = sample(4, 5, dtype=torch.bool, seed=3)
POSITIVE = sample(4, 5, seed=4, low=0.1, high=4.0)

# (id, function, inputs): the representative operators.
CASES = [
    # elementwise, binary and unary
    ("add", lambda a, b: a + b, (FLOAT, FLOAT_B)),
    ("sub_alpha", lambda a, b: torch.sub(a, b, alpha=3), (FLOAT, FLOAT_B)),
    ("mul_scalar", lambda a: a * 2.5, (FLOAT,)),
    ("div", lambda a, b: a / b, (FLOAT, POSITIVE)),
    ("div_floor", lambda a, b: torch.div(a, b, rounding_mode="floor"),
     (INT, INT.abs() + 1)),
    ("pow", lambda a: a.pow(3), (FLOAT,)),
    ("exp_log", lambda a: torch.log(torch.exp(a) + 1), (FLOAT,)),
    ("sqrt", torch.sqrt, (POSITIVE,)),
    ("sin_cos", lambda a: torch.sin(a) * torch.cos(a), (FLOAT,)),
    ("tanh_sigmoid", lambda a: torch.tanh(a) + torch.sigmoid(a), (FLOAT,)),
    ("clamp", lambda a: a.clamp(-1, 2), (FLOAT,)),
    ("maximum", torch.maximum, (FLOAT, FLOAT_B)),
    ("broadcast", lambda a, b: a + b, (sample(4, 1), sample(1, 5))),
    ("type_promotion", lambda a, b: a * b, (INT, FLOAT)),
    ("comparison", lambda a, b: a > b, (FLOAT, FLOAT_B)),
    ("isnan", lambda a: torch.isnan(a / a), (sample(3, dtype=torch.float32)
                                             * torch.tensor([0.0, 1.0, 2.0]),)),
    # integer and bool
    ("int_arith", lambda a: (a * 3 - 7) % 5, (INT,)),
    ("bitwise", lambda a, b: (a & b) | (a ^ 3), (INT, INT.flip(0))),
    ("bool_logic", lambda a, b: (a & ~b) | a.logical_xor(b), (BOOL, BOOL.t().t())),
    ("bool_any_all", lambda a: torch.stack([a.any(), a.all()]), (BOOL,)),
    # reductions
    ("sum", lambda a: a.sum(), (FLOAT,)),
    ("sum_dim", lambda a: a.sum(dim=1, keepdim=True), (FLOAT,)),
    ("mean_std", lambda a: torch.stack([a.mean(), a.std()]), (FLOAT,)),
    ("prod_int", lambda a: a.clamp(-2, 2).prod(dim=0), (INT,)),
    ("max_dim", lambda a: a.max(dim=1), (FLOAT,)),
    ("argmin", lambda a: a.argmin(), (FLOAT,)),
    ("norm", lambda a: torch.linalg.vector_norm(a, dim=0), (FLOAT,)),
    ("cumsum", lambda a: a.cumsum(dim=1), (FLOAT,)),
    ("cumsum_int", lambda a: a.cumsum(dim=0), (INT,)),
    # linear algebra
    ("matmul", lambda a, b: a @ b, (FLOAT, FLOAT_B.t())),
    ("bmm", torch.bmm, (sample(2, 3, 4), sample(2, 4, 5, seed=1))),
    ("linear", F.linear, (sample(3, 5), sample(2, 5, seed=1), sample(2, seed=2))),
    ("addmm", lambda c, a, b: torch.addmm(c, a, b, beta=0.5),
     (sample(4, 4), FLOAT, FLOAT_B.t())),
    # neural network functions
    ("softmax", lambda a: torch.softmax(a, dim=1), (FLOAT,)),
    ("log_softmax", lambda a: F.log_softmax(a, dim=0), (FLOAT,)),
    ("relu_gelu", lambda a: F.relu(a) + F.gelu(a), (FLOAT,)),
    ("layer_norm", lambda a, w, b: F.layer_norm(a, (5,), w, b),
     (FLOAT, sample(5, seed=1), sample(5, seed=2))),
    ("mse_loss", F.mse_loss, (FLOAT, FLOAT_B)),
    ("cross_entropy", F.cross_entropy,
     (FLOAT, torch.tensor([0, 4, 2, 1]))),
    ("conv2d", F.conv2d, (sample(1, 2, 6, 6), sample(3, 2, 3, 3, seed=1))),
    ("max_pool2d", lambda a: F.max_pool2d(a, 2), (sample(1, 2, 6, 6),)),
    # sorting and selection
    ("sort", lambda a: a.sort(dim=1), (FLOAT,)),
    ("topk", lambda a: a.topk(3, dim=1), (FLOAT,)),
    ("argsort_int", lambda a: a.argsort(dim=0, stable=True), (INT,)),
    # indexing and masking
    ("index_tensor", lambda a, i: a[i], (FLOAT, torch.tensor([3, 0, 0, 2]))),
    ("index_select", lambda a, i: a.index_select(1, i),
     (FLOAT, torch.tensor([4, 1]))),
    ("gather", lambda a, i: a.gather(1, i), (FLOAT, torch.tensor([[0], [4], [2], [1]]))),
    ("masked_select", lambda a, m: a[m], (FLOAT, BOOL)),
    ("masked_fill", lambda a, m: a.masked_fill(m, -1.0), (FLOAT, BOOL)),
    ("where", torch.where, (BOOL, FLOAT, FLOAT_B)),
    ("nonzero", torch.nonzero, (BOOL,)),
    ("unique", lambda a: torch.unique(a, return_counts=True), (INT.clamp(-3, 3),)),
    # joining and reshaping
    ("cat", lambda a, b: torch.cat([a, b, a], dim=1), (FLOAT, FLOAT_B)),
    ("stack", lambda a, b: torch.stack([a, b]), (FLOAT, FLOAT_B)),
    ("flip_roll", lambda a: a.flip(1).roll(2, dims=0), (FLOAT,)),
    ("repeat", lambda a: a.repeat(2, 1), (FLOAT,)),
    ("tril", torch.tril, (FLOAT,)),
    ("one_hot", lambda i: F.one_hot(i, 6), (torch.tensor([0, 5, 2]),)),
    # dtypes
    ("to_half", lambda a: a.half() * 2, (FLOAT,)),
    ("float64", lambda a: (a.double() ** 2).sum(0), (FLOAT,)),
    ("complex", lambda a, b: torch.complex(a, b).abs(), (FLOAT, FLOAT_B)),
]


# NB: ATen's own CPU mse_loss.out, which the fallback runs, warns that it
# resized its out= tensor; the same call on the CPU warns the same way.
RESIZE_WARNING = pytest.mark.filterwarnings(
    "ignore:An output with one or more elements was resized")


@pytest.mark.parametrize(
    "function,inputs",
    [pytest.param(*case[1:], marks=RESIZE_WARNING if case[0] == "mse_loss" else ())
     for case in CASES],
    ids=[c[0] for c in CASES])
def test_operator_matches_cpu(function, inputs):
    check_against_cpu(function, *inputs)


@pytest.mark.parametrize("name", ["add", "cumsum", "sort", "cat", "nonzero",
                                  "layer_norm", "masked_select"])
def test_results_stay_on_the_second_device(name):
    function, inputs = next(case[1:] for case in CASES if case[0] == name)
    check_against_cpu(function, *inputs, device="accinte:1")


def test_scalar_results_and_item():
    on_device = FLOAT.to("accinte")
    total = on_device.sum()
    assert total.dim() == 0 and total.device.type == "accinte"
    assert total.item() == pytest.approx(FLOAT.sum().item(), rel=1e-5)
    assert bool((on_device > 100).any()) is False


@pytest.mark.parametrize(
    "function",
    [lambda t: t.add_(1.5), lambda t: t.mul_(-2), lambda t: t.clamp_(max=1.0),
     lambda t: t.zero_(), lambda t: t.fill_(3.0), lambda t: t.exp_(),
     lambda t: t.masked_fill_(t > 0, 0.0), lambda t: t.index_fill_(1, torch.tensor([1, 3]).to(t.device), -1.0)],
    ids=["add_", "mul_", "clamp_", "zero_", "fill_", "exp_", "masked_fill_", "index_fill_"],
)
def test_in_place_operators_write_the_device_tensor(function):
    cpu = FLOAT.clone()
    on_device = cpu.to("accinte")
    storage = on_device.untyped_storage().data_ptr()
    result = function(on_device)
    function(cpu)
    assert result is on_device
    assert on_device.untyped_storage().data_ptr() == storage
    torch.testing.assert_close(on_device.cpu(), cpu)


def test_in_place_on_a_strided_view_keeps_the_gaps():
    cpu = FLOAT.clone()
    on_device = cpu.to("accinte")
    on_device[:, ::2].mul_(10)
    cpu[:, ::2].mul_(10)
    on_device.t()[1].add_(100)
    cpu.t()[1].add_(100)
    torch.testing.assert_close(on_device.cpu(), cpu)


def test_out_variants():
    a, b = FLOAT.to("accinte"), FLOAT_B.to("accinte")
    out = torch.empty(4, 5, device="accinte")
    storage = out.untyped_storage().data_ptr()
    assert torch.add(a, b, out=out) is out
    assert out.untyped_storage().data_ptr() == storage
    torch.testing.assert_close(out.cpu(), FLOAT + FLOAT_B)
    # out= resizes an empty output, like on the CPU
    grown = torch.empty(0, device="accinte")
    torch.matmul(a, b.t(), out=grown)
    assert grown.shape == (4, 4) and grown.device.type == "accinte"
    torch.testing.assert_close(grown.cpu(), FLOAT @ FLOAT_B.t())
    # several outputs
    values = torch.empty(0, device="accinte")
    indices = torch.empty(0, dtype=torch.int64, device="accinte")
    torch.sort(a, dim=1, out=(values, indices))
    expected = FLOAT.sort(dim=1)
    torch.testing.assert_close((values.cpu(), indices.cpu()), tuple(expected))
    # out= into a strided view
    target = torch.zeros(4, 10, device="accinte")
    torch.mul(a, 2, out=target[:, ::2])
    expected = torch.zeros(4, 10)
    expected[:, ::2] = FLOAT * 2
    torch.testing.assert_close(target.cpu(), expected)


def test_tensor_lists_in_and_out():
    parts = [sample(2, 3, seed=s) for s in range(3)]
    on_device = [p.to("accinte") for p in parts]
    torch.testing.assert_close(torch.cat(on_device).cpu(), torch.cat(parts))
    chunks = torch.cat(on_device).chunk(3)
    assert all(chunk.device.type == "accinte" for chunk in chunks)
    torch.testing.assert_close([c.cpu() for c in chunks], parts)
    # a foreach operator writes every tensor of the list in place
    torch._foreach_mul_(on_device, 3.0)
    torch.testing.assert_close([t.cpu() for t in on_device], [p * 3 for p in parts])


@pytest.mark.parametrize(
    "make_view",
    [lambda t: t.t(), lambda t: t[1:, ::2], lambda t: t[:, 3],
     lambda t: t.unsqueeze(0).expand(3, 4, 5), lambda t: t.as_strided((3, 3), (1, 5), 1)],
    ids=["transpose", "step-slice", "column", "expand", "as_strided"],
)
def test_non_contiguous_inputs(make_view):
    check_against_cpu(lambda t: make_view(t).exp() + make_view(t).sum(), FLOAT)
    check_against_cpu(lambda t, u: torch.maximum(make_view(t), make_view(u)),
                      FLOAT, FLOAT_B)


def test_views_alias_their_base():
    base = torch.zeros(8, device="accinte")
    windows = base.unfold(0, 4, 2)  # a native view, not a fallback copy
    windows[1].fill_(5.0)
    torch.testing.assert_close(base.cpu(), torch.tensor([0, 0, 5, 5, 5, 5, 0, 0.0]))
    complex_values = torch.zeros(3, dtype=torch.complex64, device="accinte")
    torch.view_as_real(complex_values)[:, 1].fill_(2.0)
    torch.testing.assert_close(complex_values.cpu(), torch.full((3,), 2j, dtype=torch.complex64))
    pairs = torch.arange(6.0, device="accinte").reshape(3, 2)
    torch.testing.assert_close(torch.view_as_complex(pairs).cpu(),
                               torch.view_as_complex(torch.arange(6.0).reshape(3, 2)))


FACTORIES = [
    ("arange", lambda d: torch.arange(2, 11, 3, device=d)),
    ("arange_float", lambda d: torch.arange(0, 1, 0.25, device=d)),
    ("zeros", lambda d: torch.zeros(2, 3, device=d)),
    ("ones_int", lambda d: torch.ones(4, dtype=torch.int32, device=d)),
    ("full", lambda d: torch.full((2, 2), 7.5, device=d)),
    ("full_bool", lambda d: torch.full((3,), True, device=d)),
    ("eye", lambda d: torch.eye(3, 4, device=d)),
    ("linspace", lambda d: torch.linspace(-1, 1, 7, device=d)),
    ("logspace", lambda d: torch.logspace(0, 2, 3, device=d)),
    ("tensor", lambda d: torch.tensor([[1, 2], [3, 4]], device=d)),
    ("zeros_like", lambda d: torch.zeros_like(torch.empty(2, 3, device=d))),
    ("full_like", lambda d: torch.full_like(torch.empty(3, device=d), 2.0)),
    ("tril_indices", lambda d: torch.tril_indices(3, 3, device=d)),
]


@pytest.mark.parametrize("make", [f[1] for f in FACTORIES], ids=[f[0] for f in FACTORIES])
@pytest.mark.parametrize("device", ["accinte", "accinte:0", "accinte:1"])
def test_factory_functions(make, device):
    result = make(device)
    expected_index = torch.accinte.current_device() if device == "accinte" else int(device[-1])
    assert result.device == torch.device("accinte", expected_index)
    torch.testing.assert_close(result.cpu(), make("cpu"))


def test_factory_without_index_follows_the_current_device():
    with torch.accinte.device(1):
        assert torch.arange(3, device="accinte").device == torch.device("accinte:1")
        assert torch.full((2,), 1.0, device="accinte").device == torch.device("accinte:1")
    assert torch.arange(3, device="accinte").device == torch.device("accinte:0")


def takes_the_fallback(operator):
    return not torch._C._dispatch_has_kernel_for_dispatch_key(operator, "PrivateUse1")


def test_cpu_scalars_mix_with_device_tensors():
    # Operators that reach the fallback, with a 0-dim CPU tensor first: the
    # fallback's own rule (results on the first tensor's device) would put
    # these results on the CPU.
    assert takes_the_fallback("aten::hypot.out")
    assert takes_the_fallback("aten::atan2.out")
    cases = [
        (lambda c, a: torch.hypot(c, a), torch.tensor(0.5)),
        (lambda c, a: torch.hypot(c, -a), torch.tensor(-2.0)),
        (lambda c, a: torch.atan2(c, a), torch.tensor(0.5)),
        (lambda c, a: torch.maximum(c, a), torch.tensor(0.5)),
    ]
    for device in ("accinte:0", "accinte:1"):
        for function, scalar in cases:
            result = function(scalar, FLOAT.to(device))  # the scalar stays on the CPU
            assert result.device == torch.device(device)
            torch.testing.assert_close(result.cpu(), function(scalar, FLOAT))
    on_one = FLOAT.to("accinte:1")
    torch.testing.assert_close((on_one * torch.tensor(3.0)).cpu(), FLOAT * 3)


@pytest.mark.parametrize("function", [
    lambda c, a: torch.where(c > 0, a, a),
    lambda c, a: c + a,
    lambda c, a: torch.cat([a, c]),
    lambda c, a: torch.add(a, a, out=c),
], ids=["where", "add", "cat", "out"])
def test_cpu_tensors_that_are_not_scalars_are_refused(function):
    on_device = FLOAT.to("accinte")
    with pytest.raises(RuntimeError,
                       match=r"same device.*(accinte:0 and cpu|cpu and accinte:0)"):
        function(FLOAT.clone(), on_device)
    torch.testing.assert_close(on_device.cpu(), FLOAT)


def test_indices_may_stay_on_the_host():
    # As on CUDA, advanced indexing accepts indices on the CPU.
    index = torch.tensor([3, 0, 2])
    check_against_cpu(lambda a: a[index], FLOAT)
    on_device = FLOAT.to("accinte")
    cpu = FLOAT.clone()
    on_device[index] = torch.tensor(-1.0)
    cpu[index] = torch.tensor(-1.0)
    torch.testing.assert_close(on_device.cpu(), cpu)


COMPLEX = torch.complex(sample(4, 4), sample(4, 4, seed=5))


@pytest.mark.parametrize("function", [
    lambda z: z.conj() * 1,
    lambda z: z @ z.mH,
    lambda z: z.conj().resolve_conj(),
    lambda z: torch.exp(z._neg_view()),
    lambda z: (z.conj() + z).real,
    lambda z: z.conj().sum(),
], ids=["mul", "matmul-mH", "resolve_conj", "neg-view", "real", "sum"])
def test_lazy_conjugate_and_negative_views_compute(function):
    # Until fixed, each of these recursed without end and killed the process.
    check_against_cpu(function, COMPLEX)


def test_training_step_matches_cpu():
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 2))
    on_device = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.ReLU(),
                                    torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 2))
    on_device.load_state_dict(model.state_dict())
    on_device.to("accinte")
    images, labels = sample(5, 2, 6, 6), torch.tensor([0, 1, 1, 0, 1])
    for net, device in ((model, "cpu"), (on_device, "accinte")):
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        for _ in range(2):
            optimizer.zero_grad()
            loss = F.cross_entropy(net(images.to(device)), labels.to(device))
            loss.backward()
            optimizer.step()
    for expected, actual in zip(model.parameters(), on_device.parameters()):
        assert actual.device.type == "accinte" and actual.grad.device.type == "accinte"
        torch.testing.assert_close(actual.grad.cpu(), expected.grad, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(actual.detach().cpu(), expected.detach(), rtol=1e-4, atol=1e-5)
