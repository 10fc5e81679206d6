"""Chapter 16, nested tensors: the strided layout (a NestedTensorImpl whose
operators dispatch on NestedTensorPrivateUse1) and the jagged layout (a
Python subclass over dense accinte tensors), each compared with the CPU on
the same inputs: every component's values, dtype and device, padded
tensors, gradients, and the CPU's errors."""

import pytest
import torch
import torch.nn.functional as F
import torch_accinte  # noqa: F401

pytestmark = pytest.mark.filterwarnings(
    "ignore:The PyTorch API of nested tensors is in prototype stage:UserWarning")

DEVICE = "accinte"


def components(shapes, dtype=torch.float32, seed=0):
    """Host tensors of the given shapes, from a generator of the test's own
    (the global CPU seed is state the suite checks)."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator, dtype=dtype) for shape in shapes]


def pair(shapes, dtype=torch.float32, seed=0, layout=torch.strided):
    """The same nested tensor on the CPU and on accinte."""
    parts = components(shapes, dtype, seed)
    cpu = torch.nested.nested_tensor(parts, layout=layout)
    device = torch.nested.nested_tensor(parts, layout=layout, device=DEVICE)
    return cpu, device


def assert_nested_close(actual, expected, **tolerances):
    """`actual` is a nested accinte tensor equal to the CPU's `expected`:
    same layout, same components (sizes, dtype, values), each on accinte."""
    assert actual.is_nested and expected.is_nested
    assert actual.layout == expected.layout
    assert actual.device.type == DEVICE
    assert actual.dtype == expected.dtype
    got, want = actual.unbind(), expected.unbind()
    assert len(got) == len(want)
    for a, e in zip(got, want):
        assert a.device.type == DEVICE, "a component came back on the host"
        assert not a.is_nested
        torch.testing.assert_close(a.cpu(), e, **tolerances)


SHAPES = [(2, 3), (4, 3), (1, 3)]


# --- The strided layout: construction and conversions -----------------------

def test_construction_dispatches_on_nested_accinte():
    cpu, nt = pair(SHAPES)
    assert nt.is_nested and nt.layout == torch.strided
    assert nt.device == torch.device("accinte:0")
    keys = str(torch._C._dispatch_keys(nt))
    assert "NestedTensorPrivateUse1" in keys and "AutogradNestedTensor" in keys
    assert_nested_close(nt, cpu, rtol=0, atol=0)
    assert torch.equal(nt._nested_tensor_size(), cpu._nested_tensor_size())
    assert torch.equal(nt._nested_tensor_strides(), cpu._nested_tensor_strides())


def test_as_nested_tensor_of_device_and_host_tensors():
    parts = components(SHAPES, dtype=torch.float64)
    expected = torch.nested.as_nested_tensor(parts)
    from_device = torch.nested.as_nested_tensor([p.to(DEVICE) for p in parts])
    from_host = torch.nested.as_nested_tensor(parts, device=DEVICE)
    assert_nested_close(from_device, expected, rtol=0, atol=0)
    assert_nested_close(from_host, expected, rtol=0, atol=0)


def test_to_the_device_and_back():
    cpu, _ = pair(SHAPES)
    nt = cpu.to(DEVICE)
    assert_nested_close(nt, cpu, rtol=0, atol=0)
    back = nt.to("cpu")
    assert back.is_nested and back.device.type == "cpu"
    for a, e in zip(back.unbind(), cpu.unbind()):
        assert torch.equal(a, e)
    assert_nested_close(nt.to(torch.float64), cpu.to(torch.float64), rtol=0, atol=0)
    assert_nested_close(nt.clone(), cpu.clone(), rtol=0, atol=0)


@pytest.mark.parametrize("output_size", [None, (3, 5, 4)])
def test_to_padded_tensor(output_size):
    cpu, nt = pair(SHAPES)
    padded = torch.nested.to_padded_tensor(nt, -1.5, output_size)
    expected = torch.nested.to_padded_tensor(cpu, -1.5, output_size)
    assert padded.device.type == DEVICE and not padded.is_nested
    torch.testing.assert_close(padded.cpu(), expected, rtol=0, atol=0)


def test_unbind_components_are_views_of_the_buffer():
    _, nt = pair(SHAPES)
    first = nt.unbind()[0]
    first.zero_()  # a view: the nested tensor sees the write
    assert torch.equal(nt.unbind()[0].cpu(), torch.zeros(2, 3))


def test_repr_prints_the_components_on_the_device():
    cpu, nt = pair([(1, 2), (2, 2)])
    text = repr(nt)
    assert text.startswith("nested_tensor([")
    assert "device='accinte:0'" in text
    # The values printed are the CPU's.
    assert text.replace(", device='accinte:0'", "") == repr(cpu)


# --- Operators, against the CPU ---------------------------------------------

UNARY = {
    "relu": torch.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "silu": F.silu,
    "tanh": torch.tanh,
    "neg": torch.neg,
    "abs": torch.abs,
    "sin": torch.sin,
    "cos": torch.cos,
    "sqrt_of_abs": lambda t: torch.sqrt(torch.abs(t)),
    "softmax_last": lambda t: torch.softmax(t, -1),
    "mul_scalar": lambda t: t * 2.5,
    "div_scalar": lambda t: t / 4,
    "add_0dim": lambda t: t + torch.tensor(3.0, device=t.device),
    "gt_scalar": lambda t: t > 0,
    "eq_scalar": lambda t: t == 0,
    "isnan": torch.isnan,
    "unsqueeze": lambda t: t.unsqueeze(-1),
    "transpose_ragged_and_regular": lambda t: t.transpose(1, 2).contiguous(),
    "narrow": lambda t: t.narrow(0, 1, 2),
    "cat": lambda t: torch.cat([t, t * 2], 0),
    "chunk_last": lambda t: t.chunk(3, -1)[1],
    "split_last": lambda t: t.split_with_sizes([1, 2], -1)[1],
    "squeeze": lambda t: t.unsqueeze(-1).squeeze(-1),
    "all_last": lambda t: (t > -1).all(-1),
    "masked_fill": lambda t: t.masked_fill(t > 0, 7.0),
    "logical_not": lambda t: torch.logical_not(t > 0),
    "isinf": lambda t: torch.isinf(t / 0),
    "sgn": torch.sgn,
    "ones_like": torch.ones_like,
    "zeros_like": torch.zeros_like,
    "zero_": lambda t: t.clone().zero_(),
    "fill_": lambda t: t.clone().fill_(2.0),
    "view": lambda t: t.view(3, -1, 3, 1),
    "reshape": lambda t: t.reshape(3, -1, 1, 3),
    "detach": lambda t: t.detach(),
    "dropout_eval": lambda t: F.dropout(t, 0.5, training=False),
    "to_double": lambda t: t.to(torch.float64),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_operator_matches_the_cpu(name):
    cpu, nt = pair(SHAPES)
    assert_nested_close(UNARY[name](nt), UNARY[name](cpu))


BINARY = {
    "add": torch.add,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=-2),
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_operator_matches_the_cpu(name):
    cpu_a, a = pair(SHAPES, seed=1)
    cpu_b, b = pair(SHAPES, seed=2)
    assert_nested_close(BINARY[name](a, b), BINARY[name](cpu_a, cpu_b))


def test_operators_with_dense_results_match_the_cpu():
    cpu, nt = pair(SHAPES)
    for op in (lambda t: t.select(0, 1), lambda t: t.values(),
               lambda t: torch.nested.to_padded_tensor(t.transpose(1, 2).contiguous(), 0.0)):
        got, want = op(nt), op(cpu)
        assert got.device.type == DEVICE and not got.is_nested
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)


def test_dropout_in_training_keeps_or_scales_each_element():
    _, nt = pair(SHAPES)
    out = F.dropout(nt, 0.5, training=True)
    for a, x in zip(out.unbind(), nt.unbind()):
        assert a.device.type == DEVICE
        a, x = a.cpu(), x.cpu()
        kept = a != 0
        torch.testing.assert_close(a[kept], x[kept] * 2)


def test_in_place_operators_write_the_buffer():
    cpu_a, a = pair(SHAPES, seed=1)
    cpu_b, b = pair(SHAPES, seed=2)
    a.add_(b, alpha=0.5).mul_(b).relu_()
    cpu_a.add_(cpu_b, alpha=0.5).mul_(cpu_b).relu_()
    assert_nested_close(a, cpu_a)


def test_bmm_and_matmul():
    cpu_a, a = pair([(2, 3), (4, 5)], seed=1)
    cpu_b, b = pair([(3, 6), (5, 2)], seed=2)
    assert_nested_close(torch.bmm(a, b), torch.bmm(cpu_a, cpu_b))
    assert_nested_close(torch.matmul(a, b), torch.matmul(cpu_a, cpu_b))
    # (B, heads, *, D) by (B, heads, D, *): 4-d matmul.
    cpu_q, q = pair([(2, 3, 4), (2, 5, 4)], seed=3)
    cpu_k, k = pair([(2, 4, 3), (2, 4, 5)], seed=4)
    assert_nested_close(q @ k, cpu_q @ cpu_k)


def test_linear_on_a_nested_input_and_its_gradients():
    linear = torch.nn.Linear(3, 5)
    device_linear = torch.nn.Linear(3, 5).to(DEVICE)
    device_linear.load_state_dict(linear.state_dict())
    cpu = torch.nested.nested_tensor(components(SHAPES), requires_grad=True)
    nt = torch.nested.nested_tensor(components(SHAPES), device=DEVICE, requires_grad=True)
    out, expected = device_linear(nt), linear(cpu)
    assert_nested_close(out, expected)
    torch.nested.to_padded_tensor(out, 0.0).sum().backward()
    torch.nested.to_padded_tensor(expected, 0.0).sum().backward()
    assert nt.grad is not None and nt.grad.is_nested
    assert_nested_close(nt.grad, cpu.grad)
    for p, q in zip(device_linear.parameters(), linear.parameters()):
        assert p.grad.device.type == DEVICE
        torch.testing.assert_close(p.grad.cpu(), q.grad)


def test_layer_norm_and_its_gradients():
    norm = torch.nn.LayerNorm(3)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5, generator=torch.Generator().manual_seed(5))
        norm.bias.fill_(0.25)
    device_norm = torch.nn.LayerNorm(3).to(DEVICE)
    device_norm.load_state_dict(norm.state_dict())
    cpu = torch.nested.nested_tensor(components(SHAPES), requires_grad=True)
    nt = torch.nested.nested_tensor(components(SHAPES), device=DEVICE, requires_grad=True)
    out, expected = device_norm(nt), norm(cpu)
    assert_nested_close(out, expected)
    weights = torch.nested.nested_tensor(components(SHAPES, seed=9))
    (torch.nested.to_padded_tensor(out, 0.0) * torch.nested.to_padded_tensor(weights, 0.0).to(DEVICE)).sum().backward()
    (torch.nested.to_padded_tensor(expected, 0.0) * torch.nested.to_padded_tensor(weights, 0.0)).sum().backward()
    assert_nested_close(nt.grad, cpu.grad)
    for p, q in zip(device_norm.parameters(), norm.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad)


def test_sum_over_the_last_dimension_runs_through_the_cpu_and_comes_back():
    cpu = torch.nested.nested_tensor(components(SHAPES), requires_grad=True)
    nt = torch.nested.nested_tensor(components(SHAPES), device=DEVICE, requires_grad=True)
    out, expected = nt.sum(-1, keepdim=True), cpu.sum(-1, keepdim=True)
    assert_nested_close(out, expected)
    torch.nested.to_padded_tensor(out, 0.0).sum().backward()
    torch.nested.to_padded_tensor(expected, 0.0).sum().backward()
    assert_nested_close(nt.grad, cpu.grad)


def test_scaled_dot_product_attention_with_nested_inputs():
    # (B, *, heads, D) transposed to (B, heads, *, D), as a transformer does.
    shapes = [(3, 2, 4), (5, 2, 4)]
    qkv = [pair(shapes, seed=s) for s in (11, 12, 13)]
    cpu = [c.transpose(1, 2) for c, _ in qkv]
    dev = [d.transpose(1, 2) for _, d in qkv]
    # The CPU refuses non-contiguous nested inputs; so does accinte.
    with pytest.raises(RuntimeError, match="must be contiguous"):
        F.scaled_dot_product_attention(*cpu)
    with pytest.raises(RuntimeError, match="must be contiguous"):
        F.scaled_dot_product_attention(*dev)
    cpu = [t.contiguous() for t in cpu]
    dev = [t.contiguous() for t in dev]
    assert_nested_close(F.scaled_dot_product_attention(*dev),
                        F.scaled_dot_product_attention(*cpu))
    assert torch.ops.aten._fused_sdp_choice(*dev) == torch.ops.aten._fused_sdp_choice(*cpu)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer_and_attention_fast_paths(norm_first):
    # In inference, nn.MultiheadAttention and nn.TransformerEncoderLayer take
    # nested inputs only through their fast paths (fused ATen operators).
    cpu_layer = torch.nn.TransformerEncoderLayer(
        8, 2, dim_feedforward=16, batch_first=True, norm_first=norm_first).eval()
    layer = torch.nn.TransformerEncoderLayer(
        8, 2, dim_feedforward=16, batch_first=True, norm_first=norm_first).to(DEVICE).eval()
    layer.load_state_dict(cpu_layer.state_dict())
    cpu, nt = pair([(3, 8), (5, 8)])
    with torch.no_grad():
        assert_nested_close(layer(nt), cpu_layer(cpu))
        attention = layer.self_attn
        got = attention(nt, nt, nt, need_weights=False)[0]
        want = cpu_layer.self_attn(cpu, cpu, cpu, need_weights=False)[0]
        assert_nested_close(got, want)


# --- Autograd -----------------------------------------------------------------

def test_gradients_through_elementwise_operators_and_to_padded_tensor():
    cpu = torch.nested.nested_tensor(components(SHAPES), requires_grad=True)
    nt = torch.nested.nested_tensor(components(SHAPES), device=DEVICE, requires_grad=True)
    grad = torch.randn(3, 4, 3, generator=torch.Generator().manual_seed(7))

    def loss(t, g):
        y = torch.softmax(F.gelu(t * 3 + t), -1)
        return (torch.nested.to_padded_tensor(y, 0.0) * g).sum()

    loss(nt, grad.to(DEVICE)).backward()
    loss(cpu, grad).backward()
    assert_nested_close(nt.grad, cpu.grad)


# --- Errors: the CPU's, at the call -------------------------------------------

def test_an_operator_without_nested_support_raises_the_cpus_error():
    cpu, nt = pair(SHAPES)
    with pytest.raises(NotImplementedError, match="Could not run 'aten::cumsum' with arguments from the 'NestedTensorCPU' backend"):
        torch.cumsum(cpu, 1)
    with pytest.raises(NotImplementedError, match="Could not run 'aten::cumsum' with arguments from the 'NestedTensoraccinte' backend"):
        torch.cumsum(nt, 1)


def test_reductions_without_nested_kernels_raise_as_on_the_cpu():
    cpu, nt = pair(SHAPES)
    for op, name in ((lambda t: t.max(-1), "max.dim"), (lambda t: t.mean(-1, keepdim=True), "mean.dim")):
        with pytest.raises(NotImplementedError, match=f"'aten::{name}' with arguments from the 'NestedTensorCPU'"):
            op(cpu)
        with pytest.raises(NotImplementedError, match=f"'aten::{name}' with arguments from the 'NestedTensoraccinte'"):
            op(nt)


def test_mixing_a_device_nested_tensor_with_a_host_one_is_refused():
    cpu, nt = pair(SHAPES)
    for op in (torch.add, torch.mul, torch.bmm):
        other = cpu.transpose(1, 2).contiguous() if op is torch.bmm else cpu
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            op(nt, other)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.nn.functional.linear(nt, torch.randn(5, 3))
    # The operators that run through the CPU check before they copy: the
    # copies would otherwise put both on the host and compute silently.
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, "
                       "but found at least two devices, accinte:0 and cpu"):
        torch.ops.aten._nested_sum_backward(cpu, nt, [-1], True)


@pytest.mark.parametrize("device", ["cpu", DEVICE])
def test_nested_and_dense_are_refused_as_on_the_cpu(device):
    _, nt = pair(SHAPES)
    nt = nt.to(device)
    with pytest.raises(RuntimeError, match="Expected both self and other to be nested"):
        nt + torch.randn(3, 4, 3, device=device)
    with pytest.raises(RuntimeError, match="self must not be nested"):
        torch.where(nt > 0, nt, nt)


def test_bmm_of_nested_and_dense_matches_the_cpu():
    # The CPU takes a dense batch as the second factor; so does accinte.
    cpu, nt = pair(SHAPES)
    dense = torch.randn(3, 3, 2, generator=torch.Generator().manual_seed(4))
    assert_nested_close(torch.bmm(nt, dense.to(DEVICE)), torch.bmm(cpu, dense))


@pytest.mark.parametrize("device", ["cpu", DEVICE])
def test_mismatched_shapes_raise_the_cpus_error(device):
    a = torch.nested.nested_tensor(components([(2, 3), (4, 3)]), device=device)
    b = torch.nested.nested_tensor(components([(2, 3), (5, 3)]), device=device)
    with pytest.raises(RuntimeError, match="add does not support broadcasting when given a NestedTensor"):
        a + b
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.bmm(a, b)
    with pytest.raises(RuntimeError, match="NestedTensor can only be reduced across the last dimension"):
        a.sum(1, keepdim=True)
    with pytest.raises(RuntimeError, match="must have the same dimension"):
        torch.nested.nested_tensor([torch.ones(2), torch.ones(2, 2)], device=device)
    with pytest.raises(RuntimeError, match="NestedTensor can only be unbound along dimension 0"):
        a.unbind(1)


# --- The jagged layout: a Python subclass over dense accinte tensors ----------

def test_jagged_construction_and_components():
    cpu, nt = pair(SHAPES, layout=torch.jagged)
    assert nt.layout == torch.jagged and nt.device.type == DEVICE
    assert nt.values().device.type == DEVICE and nt.offsets().device.type == DEVICE
    torch.testing.assert_close(nt.offsets().cpu(), cpu.offsets())
    assert_nested_close(nt, cpu, rtol=0, atol=0)


def test_jagged_operators_match_the_cpu():
    cpu, nt = pair(SHAPES, layout=torch.jagged)
    cpu_b = torch.nested.nested_tensor_from_jagged(torch.randn(7, 3, generator=torch.Generator().manual_seed(3)), cpu.offsets())
    b = torch.nested.nested_tensor_from_jagged(cpu_b.values().to(DEVICE), nt.offsets())
    assert_nested_close(torch.sin(nt) + b * 2, torch.sin(cpu) + cpu_b * 2)
    torch.testing.assert_close(
        torch.nested.to_padded_tensor(nt, 0.5).cpu(), torch.nested.to_padded_tensor(cpu, 0.5))
    linear = torch.nn.Linear(3, 2)
    device_linear = torch.nn.Linear(3, 2).to(DEVICE)
    device_linear.load_state_dict(linear.state_dict())
    assert_nested_close(device_linear(nt), linear(cpu))


def test_jagged_scaled_dot_product_attention_matches_the_cpu():
    shapes = [(3, 2, 4), (5, 2, 4)]
    qkv = [pair(shapes, seed=s, layout=torch.jagged) for s in (21, 22, 23)]
    cpu = [c.transpose(1, 2) for c, _ in qkv]
    dev = [d.transpose(1, 2) for _, d in qkv]
    assert_nested_close(F.scaled_dot_product_attention(*dev).transpose(1, 2),
                        F.scaled_dot_product_attention(*cpu).transpose(1, 2))
