"""Chapter 09: the native kernels compute what the CPU computes, on the
device's stream, and refuse bad input on the host before anything runs.

Every case also runs under ``torch.accinte.record_fallbacks()``: a case that
silently took the CPU fallback would still match the CPU, and only the
recording tells the native kernel was used.
"""

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch_accinte import _C

# Long enough never to expire while a test runs; short enough that a broken
# test fails instead of hanging.
GATE_TIMEOUT = 30.0


def sample(*shape, dtype=torch.float32, seed=0, low=-3.0, high=3.0):
    generator = torch.Generator().manual_seed(seed)
    values = torch.rand(shape, generator=generator, dtype=torch.float64)
    return (values * (high - low) + low).to(dtype)


def to_device(value):
    if isinstance(value, torch.Tensor):
        return value.to("accinte")
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(item) for item in value)
    return value


def run_both(function, *inputs):
    """``function`` on CPU inputs and on their accinte copies, recording the
    fallback on the device side; returns (cpu result, device result)."""
    expected = function(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    with torch.accinte.record_fallbacks() as record:
        result = function(*to_device(list(inputs)))
    assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    return expected, result


def assert_same(expected, result):
    if isinstance(expected, (tuple, list)):
        assert len(expected) == len(result)
        for e, r in zip(expected, result):
            assert_same(e, r)
        return
    assert result.device.type == "accinte"
    assert result.dtype == expected.dtype
    torch.testing.assert_close(result.cpu(), expected)


a23, b3, c23 = sample(2, 3), sample(3, seed=1), sample(2, 3, seed=2)
positive = sample(4, 5, low=0.1, high=4.0, seed=3)
ints = torch.arange(-6, 6).reshape(3, 4)
matrix, vector = sample(5, 4, seed=4), sample(4, 6, seed=5)
batch = sample(3, 2, 4, seed=6), sample(3, 4, 5, seed=7)
logits, targets = sample(6, 5, seed=8), torch.tensor([0, 4, 2, 1, 3, 2])

CASES = {
    # broadcasting, and type promotion with tensors, 0-dim tensors and
    # Python numbers
    "add broadcast": (lambda x, y: torch.add(x, y, alpha=2), a23, b3),
    "int + float tensor": (torch.add, ints, sample(4)),
    "int + python float": (lambda x: x + 1.5, ints),
    "float + 0-dim double on CPU": (lambda x: x + torch.tensor(2.0, dtype=torch.float64), a23),
    "int * 0-dim float on CPU": (lambda x: x * torch.tensor(0.5), ints),
    "sub": (torch.sub, a23, c23),
    "mul": (torch.mul, a23, b3),
    "div": (torch.div, a23, positive[:2, :3]),
    "div floor": (lambda x, y: torch.div(x, y, rounding_mode="floor"), ints, torch.tensor(4)),
    "true division of ints": (torch.div, ints, torch.tensor([3, 2, 5, 7])),
    "maximum": (torch.maximum, a23, c23),
    "minimum": (torch.minimum, a23, b3),
    "pow scalar": (lambda x: x ** 2, a23),
    "pow tensor": (torch.pow, positive, sample(5, seed=9)),
    "addcmul": (lambda x, y, z: torch.addcmul(x, y, z, value=0.5), a23, b3, c23),
    "addcdiv": (lambda x, y, z: torch.addcdiv(x, y, z, value=2), a23, c23, positive[1, :3]),
    "lerp": (lambda x, y: torch.lerp(x, y, 0.25), a23, c23),
    "comparisons": (lambda x, y: (x < y, x <= y, x > y, x >= y, x == y, x != y), a23, b3),
    "comparisons with a scalar": (lambda x: (x < 0, x <= 1, x > 0, x >= 1, x == 0, x != 0), ints),
    "isneginf isin": (lambda x, y: (torch.isneginf(x), torch.isin(x, y), torch.isin(x, y, invert=True)),
                      torch.tensor([1.0, -float("inf"), float("inf"), 2.0, -3.0]),
                      torch.tensor([2.0, -3.0, 7.0])),
    # masks: bitwise operators and triangles
    "bitwise": (lambda x, y: (x & y, x | y, ~x, x.clone().bitwise_and_(y), x.clone().bitwise_or_(y),
                              x.clone().bitwise_not_()), ints, ints.flip(0)),
    "bitwise on bools": (lambda x, y: (x & y, x | y, ~x), a23 > 0, c23 > 0),
    "tril": (lambda x: (x.tril(), x.tril(-1), x.clone().tril_(1)), sample(4, 5)),
    # unary functions and activations
    "exp log sqrt rsqrt": (lambda x: (x.exp(), x.log(), x.sqrt(), x.rsqrt()), positive),
    "sigmoid tanh relu gelu silu": (lambda x: (x.sigmoid(), x.tanh(), x.relu(), F.gelu(x),
                                               F.gelu(x, approximate="tanh"), F.silu(x)), a23),
    "clamp": (lambda x: (x.clamp(-1, 1), x.clamp(min=0.5), x.clamp_min(0), x.clamp_max(0)), a23),
    "relu of ints": (torch.relu, ints),
    # reductions
    "sum": (lambda x: (x.sum(), x.sum(0), x.sum(1, keepdim=True), x.sum(dtype=torch.float64)), a23),
    "sum of ints": (lambda x: x.sum(1), ints),
    "mean amax amin": (lambda x: (x.mean(), x.mean(1), x.amax(0), x.amin((0, 1))), positive),
    "max min argmax": (lambda x: (*x.max(1), *x.min(0, keepdim=True), x.argmax(), x.argmax(1)), positive),
    "norms": (lambda x: (torch.linalg.vector_norm(x), torch.linalg.vector_norm(x, 1, dim=1)), a23),
    "all any": (lambda x: (x.all(), x.any(), x.all(1), x.any(0, keepdim=True), (x > 0).all(),
                           (x > 0).any(1)), ints),
    "cumsum": (lambda x, i: (x.cumsum(1), x.cumsum(0, dtype=torch.float64), x.clone().cumsum_(1),
                             i.cumsum(0)), a23, ints),
    # indexing
    "gather": (lambda x, i, j: (x.gather(1, i), x.gather(0, j)), sample(3, 4),
               torch.tensor([[0, 3], [1, 1], [2, 0]]), torch.tensor([[2, 0, 1, 2]])),
    "arange into out=": (lambda x: (torch.arange(2, 11, 3, out=x.new_empty(0)),
                                    torch.arange(0.5, 2, 0.25, device=x.device)), a23),
    # pooling, and its backward
    "max_pool2d with indices": (
        lambda x: F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, return_indices=True),
        sample(2, 3, 7, 6)),
    "max_pool2d backward": (
        lambda x, g: torch.autograd.grad(F.max_pool2d(x, 2), x, g)[0],
        sample(2, 3, 6, 6).requires_grad_(), sample(2, 3, 3, 3, seed=1)),
    "replication padding": (lambda x, y, z: (F.pad(x, (1, 2), mode="replicate"),
                                             F.pad(y, (2, 1, 0, 1), mode="replicate"),
                                             F.pad(z, (1, 0, 1, 1, 0, 2), mode="replicate")),
                            sample(2, 3, 5), sample(2, 3, 4, 5, seed=1),
                            sample(1, 2, 3, 4, 3, seed=2)),
    # matrix products
    "mm": (torch.mm, matrix, vector),
    "matmul of a transposed view": (lambda x, y: x.t() @ y, sample(4, 5), vector),
    "addmm": (lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2), sample(6), matrix, vector),
    "bmm": (torch.bmm, *batch),
    "baddbmm": (lambda b, x, y: torch.baddbmm(b, x, y), sample(3, 2, 5), *batch),
    # the overloads torch.compile's generated code calls (chapter 13)
    "bmm baddbmm out=": (lambda b, x, y: (torch.bmm(x, y, out=x.new_empty(0)),
                                          torch.baddbmm(b, x, y, beta=0.5, out=b.new_empty(0))),
                         sample(3, 2, 5), *batch),
    "linear": (F.linear, matrix, sample(3, 4), sample(3)),
    # softmax and losses
    "softmax": (lambda x: (x.softmax(1), x.log_softmax(0)), logits),
    "cross entropy": (F.cross_entropy, logits, targets),
    "nll loss, summed, weighted, ignoring": (
        lambda x, t, w: F.nll_loss(x, t, weight=w, reduction="sum", ignore_index=2),
        logits, targets, sample(5, low=0.5, high=2.0)),
    # operators whose host checks are written by hand
    "layer norm": (lambda x, w, b: (F.layer_norm(x, (5,), w, b), F.layer_norm(x, (4, 5)),
                                    torch.native_layer_norm(x.transpose(0, 1), (5,), w, b, 1e-3)),
                   sample(3, 4, 5), sample(5, seed=1), sample(5, seed=2)),
    "layer norm, bfloat16 with float32 parameters": (
        lambda x, w, b: torch.native_layer_norm(x, (5,), w, b, 1e-5),
        sample(3, 5, dtype=torch.bfloat16), sample(5, seed=1), sample(5, seed=2)),
    "layer norm backward": (
        lambda x, w, b, g: torch.autograd.grad(F.layer_norm(x, (5,), w, b), (x, w, b), g),
        sample(2, 3, 5).requires_grad_(), sample(5, seed=1).requires_grad_(),
        sample(5, seed=2).requires_grad_(), sample(2, 3, 5, seed=3)),
    "where": (lambda c, x, y, n: (torch.where(c, x, y), torch.where(c, x, 2.0),
                                  torch.where(c[0], n, x[0]), x.masked_fill(c, 0.5)),
              sample(3, 4) > 0, sample(3, 4, seed=1), sample(4, dtype=torch.float64, seed=2),
              ints[0]),
    "index_select": (lambda x, i: (x.index_select(0, i), x.index_select(-1, i[:2].int()),
                                   x[0, 0].index_select(0, i[1:2])),
                     sample(4, 5), torch.tensor([3, 0, 3, 1])),
    "embedding backward": (
        lambda w, i, g: torch.autograd.grad(F.embedding(i, w, padding_idx=1), w, g)[0],
        sample(6, 3).requires_grad_(), torch.tensor([[0, 5, 1], [5, 5, 2]]), sample(2, 3, 3, seed=1)),
    # BatchNorm updates its running statistics in place: they are results too
    "batch norm, training": (
        lambda x, w, b, m, v: (F.batch_norm(x, m, v, w, b, training=True, momentum=0.2), m, v),
        sample(4, 3, 5, 5).to(memory_format=torch.channels_last), sample(3, seed=1),
        sample(3, seed=2), torch.zeros(3), torch.ones(3)),
    "batch norm, evaluation": (
        lambda x, w, m, v: F.batch_norm(x, m, v, w, training=False),
        sample(4, 3, 6), sample(3, seed=1), sample(3, seed=2), sample(3, low=0.5, high=2.0, seed=3)),
    "batch norm, bfloat16 with float32 parameters": (
        lambda x, w, b, m, v: (torch.native_batch_norm(x, w, b, m, v, True, 0.1, 1e-5), m, v),
        sample(2, 3, 4, dtype=torch.bfloat16), sample(3, seed=1), sample(3, seed=2),
        torch.zeros(3), torch.ones(3)),
    "batch norm backward": (
        lambda x, w, b, g: torch.autograd.grad(F.batch_norm(x, None, None, w, b, training=True),
                                               (x, w, b), g),
        sample(4, 3, 5).requires_grad_(), sample(3, seed=1).requires_grad_(),
        sample(3, seed=2).requires_grad_(), sample(4, 3, 5, seed=3)),
    "dropout backward": (lambda g, m: (torch.ops.aten.native_dropout_backward(g, m, 2.0),
                                       torch.ops.aten.native_dropout_backward(g.t(), m.t(), 0.5),
                                       torch.ops.aten.native_dropout_backward(g, m.double(), 2.0)),
                         sample(3, 4), sample(3, 4, seed=1) > 0),
    "max of all elements": (lambda x, i: (x.max(), i.max()), sample(3, 4), ints),
    # filling and joining
    "fill zero": (lambda x: (x.clone().fill_(3.5), x.clone().zero_(), torch.zeros_like(x)), a23),
    "cat": (lambda x, y: torch.cat([x, y, x], 1), a23, c23),
}


@pytest.mark.parametrize("name", CASES)
def test_matches_cpu_without_the_fallback(name):
    function, *inputs = CASES[name]
    assert_same(*run_both(function, *inputs))


def column_major(x):
    """The same values with the last two dimensions stored transposed."""
    return x.transpose(-1, -2).contiguous().transpose(-1, -2) if x.dim() >= 2 else x


def every_other(x):
    """The same values, as a view of every other element of a larger tensor."""
    if x.dim() == 0:
        return x
    larger = x.new_zeros(*x.shape[:-1], 2 * x.shape[-1])
    larger[..., ::2] = x
    return larger[..., ::2]


def channels_last(x):
    return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x


LAYOUTS = {"column-major": column_major, "every other element": every_other,
           "channels_last": channels_last}


def laid_out(value, layout, device="cpu"):
    """``value`` on ``device``, stored as ``layout`` stores it; a tensor that
    requires grad stays a leaf that does."""
    if not isinstance(value, torch.Tensor):
        return value
    tensor = LAYOUTS[layout](value.detach().to(device, copy=True))
    return tensor.requires_grad_() if value.requires_grad else tensor


def assert_same_layout(expected, result):
    """Values, dtype and strides (of the dimensions longer than 1)."""
    if isinstance(expected, (tuple, list)):
        for e, r in zip(expected, result, strict=True):
            assert_same_layout(e, r)
        return
    assert_same(expected, result)
    strides = [(e, r) for size, e, r in zip(expected.shape, expected.stride(), result.stride())
               if size > 1]
    assert [r for _, r in strides] == [e for e, _ in strides], (
        f"strides {result.stride()} where the CPU gives {expected.stride()}")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", CASES)
def test_matches_cpu_on_inputs_of_every_layout(name, layout):
    """Every case on inputs stored column-major, as strided views and
    channels_last: the kernels read the real strides, and shape their
    results as the CPU kernel does, memory format included."""
    function, *inputs = CASES[name]
    expected = function(*[laid_out(x, layout) for x in inputs])
    device_inputs = [laid_out(x, layout, "accinte") for x in inputs]
    with torch.accinte.record_fallbacks() as record:
        result = function(*device_inputs)
    assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    assert_same_layout(expected, result)


@pytest.mark.parametrize("name", ["add_", "sub_", "mul_", "div_", "pow_", "lerp_",
                                  "exp_", "sqrt_", "sigmoid_", "tanh_", "relu_",
                                  "clamp_min_", "addcmul_", "addcdiv_"])
def test_in_place_on_a_strided_view(name):
    base = sample(6, 8, low=0.5, high=2.0)
    arguments = {
        "add_": (sample(3, 1),), "sub_": (sample(4),), "mul_": (2.0,), "div_": (sample(3, 4, seed=3),),
        "pow_": (2,), "lerp_": (sample(4), 0.5), "clamp_min_": (1.0,),
        "addcmul_": (sample(4), sample(3, 4)), "addcdiv_": (sample(4), sample(3, 4, low=1.0)),
    }.get(name, ())

    def in_place(x, *args):
        getattr(x[::2, 1::2], name)(*args)
        return x

    assert_same(*run_both(in_place, base, *arguments))


@pytest.mark.parametrize("function", [
    lambda x, y, out: torch.add(x, y, out=out),
    lambda x, y, out: torch.mm(x, y.t(), out=out),
    lambda x, y, out: torch.cat([x, y], out=out),
    lambda x, y, out: torch.sum(x, 0, out=out),
], ids=["add", "mm", "cat", "sum"])
@pytest.mark.parametrize("out_shape", [(0,), (3, 4)], ids=["empty", "fitting"])
def test_out_arguments_are_resized_and_returned(function, out_shape):
    x, y = sample(3, 4), sample(3, 4, seed=1)
    out = torch.empty(out_shape, device="accinte")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the resize warning, tested below
        expected = function(x, y, torch.empty(out_shape))
        result = function(x.to("accinte"), y.to("accinte"), out)
    assert result is out
    assert out.shape == expected.shape and out.stride() == expected.stride()
    torch.testing.assert_close(out.cpu(), expected)


def test_resizing_a_non_empty_out_warns_as_on_the_cpu():
    x = sample(3, 4)
    with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
        torch.add(x, x, out=torch.empty(5))
    with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
        torch.add(x.to("accinte"), x.to("accinte"), out=torch.empty(5, device="accinte"))


def test_out_into_a_non_contiguous_view():
    x, y = sample(4, 3), sample(4, 3, seed=1)
    target = torch.zeros(3, 4, device="accinte")
    torch.mul(x.to("accinte"), y.to("accinte"), out=target.t())
    torch.testing.assert_close(target.cpu(), (x * y).t())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16,
                                   torch.int32, torch.uint8, torch.bool, torch.complex64],
                         ids=str)
def test_dtypes(dtype):
    x = sample(5, 6, dtype=torch.float64, low=0.0, high=5.0).to(dtype)
    y = sample(6, dtype=torch.float64, seed=1, low=0.0, high=5.0).to(dtype)
    assert_same(*run_both(lambda p, q: (p * q, p + q, p == q, p.sum(0)), x, y))


def test_empty_tensors():
    empty = torch.empty(0, 3)
    assert_same(*run_both(lambda x: (x + 1, x.sum(0), x.sum(1), x @ torch.ones(3, 2, device=x.device)),
                          empty))


def test_mlp_training_step_needs_no_fallback():
    with torch.random.fork_rng(devices=range(torch.accinte.device_count()),
                               device_type="accinte"):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                    torch.nn.Linear(32, 32), torch.nn.GELU(),
                                    torch.nn.Linear(32, 4))
        inputs, targets = torch.randn(8, 16), torch.randint(0, 4, (8,))
    device_model = copy.deepcopy(model).to("accinte")
    for net, x, y in ((model, inputs, targets),
                      (device_model, inputs.to("accinte"), targets.to("accinte"))):
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        with torch.accinte.record_fallbacks() as record:
            for _ in range(3):
                optimizer.zero_grad()
                F.cross_entropy(net(x), y).backward()
                optimizer.step()
        if x.device.type == "accinte":
            assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    for cpu_parameter, device_parameter in zip(model.parameters(), device_model.parameters()):
        torch.testing.assert_close(device_parameter.cpu(), cpu_parameter)


def test_gradients_through_native_kernels():
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(5, 4, dtype=torch.float64, generator=generator).to("accinte").requires_grad_()
    bias = torch.randn(5, dtype=torch.float64, generator=generator).to("accinte").requires_grad_()
    x = torch.randn(3, 4, dtype=torch.float64, generator=generator).to("accinte")
    target = torch.tensor([0, 4, 2]).to("accinte")

    def loss(w, b):
        hidden = torch.tanh(F.linear(x, w, b)) * torch.sigmoid(F.linear(x, w, b))
        return F.cross_entropy(hidden, target)

    assert torch.autograd.gradcheck(loss, (weight, bias))


def test_kernels_run_on_the_current_stream():
    host = torch.tensor([[1.0, -2.0], [3.0, -4.0]])
    x = host.to("accinte")
    torch.accinte.synchronize()
    stream = torch.Stream(device="accinte:0")
    with torch.accinte.stream(stream):
        gate = _C._testing.StreamGate(0, timeout_seconds=GATE_TIMEOUT)
        # Each call returns at once: its kernel is queued behind the gate. A
        # fallback would copy x to the host, which waits for the stream.
        y = (x @ x).relu() + 1
        total = y.sum()
        assert not stream.query()
        gate.open()
        torch.testing.assert_close(total.cpu(), ((host @ host).relu() + 1).sum())


def test_a_cpu_scalar_is_read_when_the_kernel_is_launched():
    x = torch.ones(3).to("accinte")
    scale = torch.tensor(2.0)
    torch.accinte.synchronize()
    stream = torch.Stream(device="accinte:0")
    with torch.accinte.stream(stream):
        gate = _C._testing.StreamGate(0, timeout_seconds=GATE_TIMEOUT)
        y = x * scale
        scale.fill_(100.0)  # after the launch, before the kernel runs
        gate.open()
        torch.testing.assert_close(y.cpu(), torch.full((3,), 2.0))


def test_second_device():
    x, y = sample(3, 4), sample(4, 2, seed=1)
    result = x.to("accinte:1") @ y.to("accinte:1")
    assert result.device == torch.device("accinte:1")
    torch.testing.assert_close(result.cpu(), x @ y)


@pytest.mark.parametrize("call, error", [
    (lambda: torch.ones(2, device="accinte:0") + torch.ones(2, device="accinte:1"),
     "Expected all tensors to be on the same device, but found at least two devices, accinte:0 and accinte:1"),
    (lambda: torch.ones(2, device="accinte") * torch.ones(2),
     "Expected all tensors to be on the same device, but found at least two devices, accinte:0 and cpu"),
    (lambda: torch.ones(2, 3, device="accinte") + torch.ones(4, device="accinte"),
     r"The size of tensor a \(3\) must match the size of tensor b \(4\)"),
    (lambda: torch.ones(2, 3, device="accinte") @ torch.ones(2, 3, device="accinte"),
     r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 2x3\)"),
    (lambda: torch.ones(2, dtype=torch.long, device="accinte").add_(torch.ones(2, device="accinte")),
     "result type Float can't be cast to the desired output type Long"),
    (lambda: torch.ones(3, device="accinte").add_(torch.ones(2, 3, device="accinte")),
     "doesn't match the broadcast shape"),
    (lambda: torch.relu(torch.ones(2, dtype=torch.bool, device="accinte")),
     "Boolean inputs not supported for relu"),
])
def test_bad_input_is_refused_before_the_launch(call, error):
    with pytest.raises(RuntimeError, match=error):
        call()
    # Nothing was launched: the stream has no failure to report.
    torch.accinte.synchronize()


@pytest.mark.parametrize("call", [
    lambda d: F.layer_norm(torch.ones(2, 3, device=d), (4,)),
    lambda d: torch.native_layer_norm(torch.ones(2, 3, device=d), (3,), torch.ones(2, device=d),
                                      None, 1e-5),
    lambda d: torch.native_layer_norm(torch.ones(2, 3, dtype=torch.bfloat16, device=d), (3,),
                                      torch.ones(3, dtype=torch.float64, device=d), None, 1e-5),
    lambda d: torch.where(torch.ones(3, dtype=torch.int32, device=d), torch.ones(3, device=d), 0.0),
    lambda d: torch.where(torch.ones(3, dtype=torch.bool, device=d), torch.ones(3, device=d),
                          torch.ones(2, device=d)),
    lambda d: torch.ones(3, 4, device=d).index_select(0, torch.zeros(2, device=d)),
    lambda d: torch.ones(3, 4, device=d).index_select(0, torch.zeros(2, 2, dtype=torch.long, device=d)),
    lambda d: torch.ones(3, 4, device=d).index_select(2, torch.zeros(2, dtype=torch.long, device=d)),
    lambda d: torch.ones(0, 4, device=d).max(),
    lambda d: torch.ones(3, 4, device=d).masked_fill_(torch.ones(3, 4, device=d), 1.0),
    lambda d: torch.ones(3, 4, device=d).masked_fill_(torch.ones(3, 5, dtype=torch.bool, device=d), 1.0),
    lambda d: torch.ones(3, 4, device=d).masked_fill_(torch.ones(4, dtype=torch.bool, device=d),
                                                       torch.ones(4, device=d)),
], ids=["layer_norm shape", "layer_norm weight", "layer_norm mixed dtype", "where condition",
        "where broadcast", "index_select dtype", "index_select 2-D index", "index_select dim",
        "max of nothing", "masked_fill mask dtype", "masked_fill broadcast", "masked_fill value"])
def test_hand_written_host_checks_raise_the_cpus_errors(call):
    # The operators with no Meta function in ATen: their host checks, written
    # by hand, refuse what the CPU refuses, with its exception and message.
    with pytest.raises(Exception) as on_cpu:
        call("cpu")
    with pytest.raises(type(on_cpu.value)) as on_device:
        call("accinte")
    assert str(on_device.value).splitlines()[0] == str(on_cpu.value).splitlines()[0]
    # Nothing was launched: the stream has no failure to report.
    torch.accinte.synchronize()


@pytest.mark.parametrize("name", ["weight", "running_mean"])
def test_batch_norm_refuses_statistics_of_the_wrong_size(name):
    # Stricter than the CPU, whose kernel reads past the end of a short
    # tensor: on the device that read would fault outside the allocation.
    x = torch.ones(2, 3, 4, device="accinte")
    tensors = {"weight": None, "running_mean": torch.zeros(3, device="accinte")}
    tensors[name] = torch.ones(2, device="accinte")
    with pytest.raises(RuntimeError, match=f"{name} should contain 3 elements not 2"):
        torch.native_batch_norm(x, tensors["weight"], None, tensors["running_mean"],
                                torch.ones(3, device="accinte"), False, 0.1, 1e-5)
    torch.accinte.synchronize()


SAME_DEVICE = ("Expected all tensors to be on the same device, but found at least "
               "two devices, accinte:0 and cpu!")


def accumulate_in_place(host, value):
    host += value


@pytest.mark.parametrize("write", [
    accumulate_in_place,
    lambda host, value: host.add_(value),
    lambda host, value: host.mul_(value),
    lambda host, value: torch.add(value, value, out=host),
    lambda host, value: torch.mul(value, 2, out=host),
], ids=["+=", "add_", "mul_", "add.out", "mul.out"])
def test_a_cpu_scalar_is_never_written(write):
    # A 0-dim CPU tensor is a scalar input only, as for CUDA: `running +=
    # loss.detach()` with `running` on the CPU once left it unchanged.
    host = torch.tensor(0.5)
    value = torch.tensor(2.0, device="accinte")
    with torch.accinte.record_fallbacks() as record:
        with pytest.raises(RuntimeError, match=SAME_DEVICE):
            write(host, value)
    assert record.calls == {}
    assert host.item() == 0.5
    torch.accinte.synchronize()  # nothing was launched


def test_a_cpu_scalar_still_reads_as_an_input():
    def use(x, scalar):
        return x + scalar, x.clone().add_(scalar), torch.mul(x, scalar, out=x.clone())

    expected = use(a23, torch.tensor(1.5))
    with torch.accinte.record_fallbacks() as record:
        result = use(a23.to("accinte"), torch.tensor(1.5))
    assert record.calls == {}
    assert_same(expected, result)


def test_a_cpu_tensor_is_filled_with_a_device_scalar():
    # As CUDA's fill_: a value on another device is read with item().
    host = torch.zeros(3)
    assert host.fill_(torch.tensor(4.0, device="accinte")) is host
    assert torch.equal(host, torch.full((3,), 4.0))
    scalar = torch.tensor(0.0)
    scalar.fill_(torch.tensor(2.5, device="accinte:1"))
    assert scalar.item() == 2.5
    x = torch.zeros(2, device="accinte:0")
    x.fill_(torch.tensor(7.0, device="accinte:1"))
    assert x.device == torch.device("accinte:0")
    assert torch.equal(x.cpu(), torch.full((2,), 7.0))
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor"):
        torch.zeros(3).fill_(torch.ones(1, device="accinte"))


def test_masked_fill_reads_a_value_on_the_other_device():
    # As CUDA's masked_fill_: a 0-dim value on another device is read with
    # item(); the mask must be on self's device.
    mask = torch.tensor([True, False, True, False])
    expected = torch.zeros(4).masked_fill_(mask, torch.tensor(3.0))
    x = torch.zeros(4, device="accinte:0")
    value = torch.tensor(3.0, device="accinte:1")
    with torch.accinte.record_fallbacks() as record:
        assert x.masked_fill_(mask.to("accinte:0"), value) is x
        filled = torch.zeros(4, device="accinte:0").masked_fill(mask.to("accinte:0"), value)
    assert record.calls == {}
    assert torch.equal(x.cpu(), expected) and torch.equal(filled.cpu(), expected)
    assert filled.device == torch.device("accinte:0")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x.masked_fill_(mask.to("accinte:1"), 1.0)


def test_a_tensor_is_filled_with_one_of_its_elements():
    # The value is part of the filled tensor: ATen copies it first, where the
    # overlap check once refused the fill.
    x = torch.arange(5.0, device="accinte")
    with torch.accinte.record_fallbacks() as record:
        x.fill_(x[2])
    assert record.calls == {}
    assert torch.equal(x.cpu(), torch.full((5,), 2.0))
    y = torch.arange(6.0, device="accinte").reshape(2, 3)
    y[1].fill_(y[0, 1])
    assert torch.equal(y.cpu(), torch.tensor([[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]]))


def test_partial_overlap_is_refused_on_the_host():
    x = torch.arange(8.0, device="accinte")
    with pytest.raises(RuntimeError, match="unsupported operation"):
        torch.add(x[:6], 1, out=x[2:])
    with pytest.raises(RuntimeError, match="unsupported operation"):
        x[2:].mul_(x[:6])
    with pytest.raises(RuntimeError, match="unsupported operation"):
        x.expand(2, 8).add_(1)  # an output that overlaps itself
    # A fill writes one value through every alias: the CPU allows it.
    one = torch.zeros(1, device="accinte")
    one.expand(3).fill_(2.0)
    torch.testing.assert_close(one.cpu(), torch.tensor([2.0]))
    x.add_(x)  # the same memory, in place: allowed
    torch.testing.assert_close(x.cpu(), torch.arange(8.0) * 2)
    torch.accinte.synchronize()


def test_a_bad_value_fails_on_the_stream_like_a_device_side_assert():
    # Whether every target is a valid class is known only once the kernel
    # reads them: as on CUDA, the error comes at the next synchronization.
    logits = torch.zeros(2, 3, device="accinte")
    loss = F.cross_entropy(logits, torch.tensor([0, 7]).to("accinte"))
    with pytest.raises(RuntimeError, match="accinteErrorLaunchFailure.*Target 7 is out of bounds"):
        torch.accinte.synchronize()
    del loss
    # The failure was reported once: the stream works again.
    torch.testing.assert_close((logits + 1).cpu(), torch.ones(2, 3))


@pytest.mark.parametrize("optimizer", [
    lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    lambda p: torch.optim.Adam(p, lr=0.01),
    lambda p: torch.optim.AdamW(p, lr=0.01, amsgrad=True),
], ids=["SGD", "Adam", "AdamW-amsgrad"])
def test_optimizer_steps_run_their_foreach_operators_natively(optimizer):
    # The optimizers pick their multi-tensor (_foreach_*) implementation on
    # accinte; each _foreach_ operator's composite kernel reaches the
    # native single-tensor kernels.
    parameters = [sample(4, 3), sample(3, seed=1), sample(2, 2, seed=2)]
    gradients = [sample(*p.shape, seed=10 + i) for i, p in enumerate(parameters)]
    results = []
    for device in ("cpu", "accinte"):
        tensors = [p.to(device, copy=True).requires_grad_() for p in parameters]
        step = optimizer(tensors)
        with torch.accinte.record_fallbacks() as record:
            for _ in range(3):
                for tensor, gradient in zip(tensors, gradients):
                    tensor.grad = gradient.to(device)
                step.step()
        if device == "accinte":
            assert record.calls == {}, f"took the CPU fallback: {record.calls}"
        results.append([t.detach().cpu() for t in tensors])
    torch.testing.assert_close(results[1], results[0])
