"""Chapter 09: scaled dot-product attention as one fused kernel.

``F.scaled_dot_product_attention`` asks the device which backend to take;
accinte answers "overrideable" for the arguments its fused kernel takes and
"math" for the rest. These tests compare both routes with the CPU, forward
and backward, check which route was taken (the profiler names the fused
operators) and that nothing took the CPU fallback.
"""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

DEVICE = "accinte"
FUSED = "aten::_scaled_dot_product_fused_attention_overrideable"
FUSED_BACKWARD = "aten::_scaled_dot_product_fused_attention_overrideable_backward"
fused_op = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
fused_backward_op = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward


def sample(*shape, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)


def operators(fn):
    """The names of the ATen operators ``fn()`` calls, and its result."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        result = fn()
    return {event.name for event in prof.events()}, result


def attention(inputs, mask=None, grad_seed=7, **kwargs):
    """SDPA of ``inputs`` (q, k, v) on their device, and the gradients of a
    random weighting of the output: (output, grads, operators, fallbacks)."""
    leaves = [t.detach().clone().requires_grad_() for t in inputs]

    def run():
        out = F.scaled_dot_product_attention(*leaves, attn_mask=mask, **kwargs)
        weights = sample(*out.shape, dtype=out.dtype, seed=grad_seed).to(out.device)
        (out * weights).sum().backward()
        return out

    with torch.accinte.record_fallbacks() as record:
        ops, out = operators(run)
    return out, [t.grad for t in leaves], ops, record.calls


def reference(inputs, mask=None, **kwargs):
    """The CPU's math path in float64 from the same values."""
    cpu = [t.detach().cpu().double() for t in inputs]
    if mask is not None:
        mask = mask.cpu() if mask.dtype == torch.bool else mask.cpu().double()
    with sdpa_kernel(SDPBackend.MATH):
        out, grads, _, _ = attention(cpu, mask, **kwargs)
    return out, grads


TOLERANCE = {torch.float32: dict(rtol=1e-4, atol=1e-5),
             torch.float16: dict(rtol=1e-2, atol=1e-2),
             torch.bfloat16: dict(rtol=5e-2, atol=5e-2)}


def check_fused(q, k, v, mask=None, dtype=torch.float32, **kwargs):
    inputs = [t.to(DEVICE, dtype) for t in (q, k, v)]
    device_mask = None if mask is None else mask.to(DEVICE)
    if device_mask is not None and device_mask.dtype != torch.bool:
        device_mask = device_mask.to(dtype)
    out, grads, ops, fallbacks = attention(inputs, device_mask, **kwargs)
    assert FUSED in ops and FUSED_BACKWARD in ops, sorted(o for o in ops if "attention" in o)
    assert fallbacks == {}, f"took the CPU fallback: {fallbacks}"
    # The reference takes the same (rounded) values, in float64.
    ref_out, ref_grads = reference(inputs, device_mask, **kwargs)
    tol = TOLERANCE[dtype]
    assert out.dtype == dtype and out.shape == ref_out.shape
    torch.testing.assert_close(out.cpu().double(), ref_out, **tol)
    for name, grad, ref in zip("qkv", grads, ref_grads):
        assert grad.shape == ref.shape and grad.dtype == dtype, name
        torch.testing.assert_close(grad.cpu().double(), ref, **tol, msg=f"grad of {name}")
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_fused_forward_and_backward_agree_with_the_cpu(dtype):
    check_fused(sample(2, 3, 5, 8), sample(2, 3, 7, 8, seed=1), sample(2, 3, 7, 8, seed=2),
                dtype=dtype)


def test_value_embedding_may_differ_and_scale_is_taken():
    q, k, v = sample(2, 2, 4, 8), sample(2, 2, 6, 8, seed=1), sample(2, 2, 6, 5, seed=2)
    out = check_fused(q, k, v)
    assert out.shape == (2, 2, 4, 5)
    check_fused(q, k, v, scale=0.3)
    check_fused(q, k, v, scale=-0.5)


@pytest.mark.parametrize("lengths", [(5, 5), (4, 7), (7, 4)])
def test_causal(lengths):
    L, S = lengths
    check_fused(sample(2, 2, L, 8), sample(2, 2, S, 8, seed=1), sample(2, 2, S, 8, seed=2),
                is_causal=True)


@pytest.mark.parametrize("mask_shape", [(5, 7), (1, 5, 7), (2, 1, 5, 7), (2, 3, 5, 7), (7,), (2, 3, 1, 7)])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_masks_broadcast(mask_shape, kind):
    if kind == "bool":
        mask = sample(*mask_shape, seed=3) > -0.5
    else:
        mask = sample(*mask_shape, seed=3)
    check_fused(sample(2, 3, 5, 8), sample(2, 3, 7, 8, seed=1), sample(2, 3, 7, 8, seed=2), mask)


def test_a_row_the_mask_hides_entirely_gives_zeros_as_on_the_cpu():
    mask = torch.ones(5, 7, dtype=torch.bool)
    mask[2] = False
    out = check_fused(sample(1, 2, 5, 8), sample(1, 2, 7, 8, seed=1), sample(1, 2, 7, 8, seed=2),
                      mask)
    assert torch.equal(out[:, :, 2].cpu(), torch.zeros(1, 2, 8))


def test_gradient_of_a_float_mask():
    q, k, v = (sample(2, 3, 5, 8, seed=s).to(DEVICE) for s in range(3))
    for shape in [(2, 3, 5, 5), (1, 3, 1, 5), (5, 5)]:
        mask = sample(*shape, seed=4)
        grads = []
        for device in (DEVICE, "cpu"):
            m = mask.to(device).requires_grad_()
            out = F.scaled_dot_product_attention(q.to(device), k.to(device), v.to(device),
                                                 attn_mask=m)
            (out * sample(*out.shape, seed=5).to(device)).sum().backward()
            grads.append(m.grad)
        assert grads[0].shape == mask.shape
        torch.testing.assert_close(grads[0].cpu(), grads[1], rtol=1e-4, atol=1e-5)


def test_non_contiguous_inputs():
    # (batch, length, heads, embedding) transposed to (batch, heads, ...), as
    # attention layers do, and a value sliced along its embedding.
    q = sample(2, 5, 3, 8).transpose(1, 2)
    k = sample(2, 7, 3, 8, seed=1).transpose(1, 2)
    v = sample(2, 3, 7, 12, seed=2)[..., ::2]
    assert not q.is_contiguous() and not v.is_contiguous()
    out = check_fused(q, k, v)
    # The output's layout is the query's, as PyTorch's Meta function gives it.
    meta = fused_op(q.to("meta"), k.to("meta"), v.to("meta"))[0]
    device = fused_op(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE))[0]
    assert device.stride() == meta.stride()
    assert out.shape == (2, 3, 5, 6)


def test_the_fused_operator_returns_what_its_schema_says():
    q, k, v = (sample(2, 3, 5, 8, seed=s).to(DEVICE) for s in range(3))
    out, lse, cum_q, cum_k, max_q, max_k, seed, offset, debug = fused_op(q, k, v)
    meta = fused_op(q.to("meta"), k.to("meta"), v.to("meta"))
    assert lse.shape == meta[1].shape == (2, 3, 5) and lse.dtype == torch.float32
    assert (max_q, max_k) == (5, 5)
    scores = (q.cpu() @ k.cpu().transpose(-2, -1)) / 8 ** 0.5
    torch.testing.assert_close(lse.cpu(), torch.logsumexp(scores, -1))
    # The backward takes the logsumexp as the forward gave it: a wrong one
    # gives wrong gradients.
    grad = sample(2, 3, 5, 8, seed=9).to(DEVICE)
    args = (grad, q, k, v, None, [True, True, True, False], out)
    rest = (cum_q, cum_k, max_q, max_k, 0.0, False, seed, offset)
    good = fused_backward_op(*args, lse, *rest)
    bad = fused_backward_op(*args, lse + 1, *rest)
    assert not torch.allclose(good[0].cpu(), bad[0].cpu())


def test_math_and_dropout_and_gqa_take_the_math_path():
    q, k, v = (sample(2, 4, 5, 8, seed=s).to(DEVICE) for s in range(3))
    cases = {
        "sdpa_kernel(MATH)": (lambda: F.scaled_dot_product_attention(q, k, v), SDPBackend.MATH),
        "dropout": (lambda: F.scaled_dot_product_attention(q, k, v, dropout_p=0.5), None),
        "float64": (lambda: F.scaled_dot_product_attention(q.double(), k.double(), v.double()),
                    None),
        "gqa": (lambda: F.scaled_dot_product_attention(q, k[:, :2], v[:, :2], enable_gqa=True),
                None),
    }
    for name, (fn, backend) in cases.items():
        if backend is None:
            ops, _ = operators(fn)
        else:
            with sdpa_kernel(backend):
                ops, _ = operators(fn)
        assert FUSED not in ops, name
        assert "aten::_scaled_dot_product_attention_math" in ops, name
    ops, _ = operators(lambda: F.scaled_dot_product_attention(q, k, v))
    assert FUSED in ops


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_a_float32_mask_with_a_half_precision_query_takes_the_math_path(dtype):
    """PyTorch takes a float32 mask with a bfloat16 or float16 query; the
    fused kernel adds a bias of the query's dtype, so the choice gives these
    to the math path, and the results are the CPU's."""
    inputs = [sample(2, 2, 4, 8, seed=s).to(DEVICE, dtype) for s in range(3)]
    mask = sample(4, 4, seed=5).to(DEVICE)
    assert torch._fused_sdp_choice(*inputs, mask) == SDPBackend.MATH.value
    out, grads, ops, fallbacks = attention(inputs, mask)
    assert fallbacks == {}, f"took the CPU fallback: {fallbacks}"
    assert FUSED not in ops and "aten::_scaled_dot_product_attention_math" in ops
    ref_out, ref_grads = reference(inputs, mask)
    torch.testing.assert_close(out.cpu().double(), ref_out, **TOLERANCE[dtype])
    for grad, ref in zip(grads, ref_grads):
        torch.testing.assert_close(grad.cpu().double(), ref, **TOLERANCE[dtype])


def test_three_dimensional_inputs_match_the_cpu():
    # NB: the choice refuses what the fused kernel does not take, 3-D inputs
    # among them. Torch 2.13's SDPA asks it about the 3-D inputs, which take
    # the math path; 2.14.1's and 2.15.0's unsqueeze them to 4-D first,
    # which take the fused kernel. Either way the results are the CPU's.
    inputs = [sample(4, 5, 8, seed=s).to(DEVICE) for s in range(3)]
    assert torch._fused_sdp_choice(*inputs) == SDPBackend.MATH.value
    out, grads, ops, fallbacks = attention(inputs)
    assert fallbacks == {}, f"took the CPU fallback: {fallbacks}"
    assert FUSED in ops or "aten::_scaled_dot_product_attention_math" in ops
    ref_out, ref_grads = reference(inputs)
    torch.testing.assert_close(out.cpu().double(), ref_out, **TOLERANCE[torch.float32])
    for grad, ref in zip(grads, ref_grads):
        torch.testing.assert_close(grad.cpu().double(), ref, **TOLERANCE[torch.float32])


def test_choice_operator_and_disabled_backends():
    q, k, v = (sample(2, 4, 5, 8, seed=s).to(DEVICE) for s in range(3))
    assert torch._fused_sdp_choice(q, k, v) == SDPBackend.OVERRIDEABLE.value
    assert torch._fused_sdp_choice(q, k, v, dropout_p=0.1) == SDPBackend.MATH.value
    with sdpa_kernel(SDPBackend.MATH):
        assert torch._fused_sdp_choice(q, k, v) == SDPBackend.MATH.value
    with sdpa_kernel(SDPBackend.OVERRIDEABLE):
        with pytest.raises(RuntimeError, match="no backend is enabled"):
            F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)


def test_dropout_is_reproducible_with_the_device_generator():
    q, k, v = (sample(2, 2, 5, 8, seed=s).to(DEVICE) for s in range(3))
    with torch.random.fork_rng(devices=range(torch.accinte.device_count()),
                               device_type="accinte"):
        torch.accinte.manual_seed(3)
        first = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
        torch.accinte.manual_seed(3)
        second = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert torch.equal(first.cpu(), second.cpu())
    assert not torch.allclose(first.cpu(), F.scaled_dot_product_attention(q, k, v).cpu())


BAD_INPUTS = {
    "dtypes": lambda q, k, v: (q, k.double(), v),
    "mask that does not broadcast": lambda q, k, v: (q, k, v, torch.ones(3, 7)),
    "embedding": lambda q, k, v: (q, k[..., :4], v),
    "mask with is_causal": lambda q, k, v: (q, k, v, torch.ones(5, 7, dtype=torch.bool), 0.0, True),
    "value length": lambda q, k, v: (q, k, v[:, :, :4]),
    "mask dtype": lambda q, k, v: (q, k, v, torch.ones(5, 7, dtype=torch.int64)),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_inputs_fail_as_on_the_cpu(case):
    # NB: as the CPU's math path: the CPU's flash kernel does not check that
    # key and value have the same length.
    q, k, v = sample(2, 3, 5, 8), sample(2, 3, 7, 8, seed=1), sample(2, 3, 7, 8, seed=2)
    cpu_args = BAD_INPUTS[case](q, k, v)
    with pytest.raises(RuntimeError) as cpu_error, sdpa_kernel(SDPBackend.MATH):
        F.scaled_dot_product_attention(*cpu_args)
    device_args = [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in cpu_args]
    with pytest.raises(RuntimeError) as device_error:
        F.scaled_dot_product_attention(*device_args)
        torch.accinte.synchronize()
    assert str(device_error.value).splitlines()[0] == str(cpu_error.value).splitlines()[0]


def test_direct_calls_with_bad_arguments_fail_on_the_host():
    q, k, v = (sample(2, 3, 5, 8, seed=s).to(DEVICE) for s in range(3))
    with pytest.raises(RuntimeError, match="4 dimensions"):
        fused_op(q[0], k[0], v[0])
    with pytest.raises(RuntimeError, match="has no dropout"):
        fused_op(q, k, v, dropout_p=0.1)
    with pytest.raises(RuntimeError, match="float32, float16 or bfloat16"):
        fused_op(q.double(), k.double(), v.double())
    with pytest.raises(RuntimeError, match="same device"):
        fused_op(q, k.cpu(), v)
    with pytest.raises(RuntimeError, match="broadcasts to the scores"):
        fused_op(q, k, v, torch.zeros(3, 5, device=DEVICE))


def test_nn_multihead_attention_and_transformer_layer():
    with torch.random.fork_rng(devices=range(torch.accinte.device_count()),
                               device_type="accinte"):
        torch.manual_seed(0)
        mha = nn.MultiheadAttention(16, 4, batch_first=True)
        layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0,
                                           batch_first=True)
    x = sample(3, 6, 16)
    padding = torch.zeros(3, 6, dtype=torch.bool)
    padding[1, 4:] = True
    causal = nn.Transformer.generate_square_subsequent_mask(6)
    for module, call in [(mha, lambda m, x: m(x, x, x, key_padding_mask=padding.to(x.device),
                                              need_weights=False)[0]),
                         (layer, lambda m, x: m(x, src_mask=causal.to(x.device)))]:
        results = []
        for device in (DEVICE, "cpu"):
            m = copy.deepcopy(module).to(device)
            inp = x.detach().to(device, copy=True).requires_grad_()

            def run():
                out = call(m, inp)
                out.sum().backward()
                return out

            with torch.accinte.record_fallbacks() as record:
                ops, out = operators(run)
            if device == DEVICE:
                assert FUSED in ops and FUSED_BACKWARD in ops, type(module).__name__
                assert record.calls == {}, record.calls
            results.append((out.detach().cpu(), inp.grad.cpu(),
                            [p.grad.cpu() for p in m.parameters() if p.grad is not None]))
        torch.testing.assert_close(results[0], results[1], rtol=1e-4, atol=1e-5)


def test_gpt2_takes_the_fused_kernel():
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    config = transformers.GPT2Config(
        vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=4,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="sdpa")
    with torch.random.fork_rng(devices=range(torch.accinte.device_count()),
                               device_type="accinte"):
        torch.manual_seed(0)
        cpu_model = transformers.GPT2LMHeadModel(config)
    model = copy.deepcopy(cpu_model).to(DEVICE)
    ids = torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(0))
    ops, loss = operators(lambda: model(input_ids=ids.to(DEVICE), labels=ids.to(DEVICE)).loss)
    assert FUSED in ops
    ops, _ = operators(loss.backward)
    assert FUSED_BACKWARD in ops
    cpu_loss = cpu_model(input_ids=ids, labels=ids).loss
    cpu_loss.backward()
    torch.testing.assert_close(loss.cpu(), cpu_loss, rtol=1e-5, atol=1e-5)
    for (name, p), cpu_p in zip(model.named_parameters(), cpu_model.parameters()):
        torch.testing.assert_close(p.grad.cpu(), cpu_p.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_kernel_runs_on_the_current_stream_and_empty_launches_nothing():
    q, k, v = (sample(1, 2, 4, 8, seed=s).to(DEVICE) for s in range(3))
    stream = torch.accinte.Stream()
    with torch.accinte.stream(stream):
        out = F.scaled_dot_product_attention(q, k, v)
    stream.synchronize()
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q.cpu(), k.cpu(), v.cpu()))
    empty = torch.empty(0, 2, 4, 8, device=DEVICE)
    assert F.scaled_dot_product_attention(empty, empty, empty).shape == (0, 2, 4, 8)
