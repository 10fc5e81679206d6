"""Chapter 13: models under ``torch.compile`` (Inductor) on accinte.

Each model runs three ways: compiled on accinte, eager on accinte and eager
on the CPU; the first two must match the third. The models are small (the
C++ compiler's time grows with the number of kernels, not their sizes) but
keep the operators that make Inductor's code differ: reductions fused with
pointwise code (LayerNorm, softmax, BatchNorm), matmuls and convolutions
left to their ATen kernels, buffers written in place (BatchNorm's running
statistics), backward graphs and optimizers' steps.
"""

import copy

import pytest
import torch
import torch._inductor.config
import torch.nn.functional as F
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend

from compiling import (  # noqa: F401
    GATE_TIMEOUT, assert_three_way, fresh_dynamo, graph_breaks, seeded, to_cpu)
from torch_accinte import _C

ACCINTE = torch.device("accinte:0")


class Block(nn.Module):
    """A pre-norm transformer block: causal softmax attention, GELU MLP."""

    def __init__(self, width: int = 32, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        batch, tokens, width = x.shape
        q, k, v = (self.qkv(self.norm1(x))
                   .view(batch, tokens, 3, self.heads, width // self.heads)
                   .permute(2, 0, 3, 1, 4))
        scores = q @ k.transpose(-1, -2) / (width // self.heads) ** 0.5
        causal = torch.ones(tokens, tokens, dtype=torch.bool, device=x.device).tril()
        attention = scores.masked_fill(~causal, float("-inf")).softmax(-1)
        x = x + self.proj((attention @ v).transpose(1, 2).reshape(batch, tokens, width))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def mlp():
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 4))


def cnn():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten())


def gpt2():
    import transformers

    transformers.logging.set_verbosity_error()
    # NB: dropout off, so that every run is the same computation; eos and
    # bos inside the vocabulary.
    config = transformers.GPT2Config(
        vocab_size=100, n_positions=16, n_embd=64, n_layer=2, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        bos_token_id=0, eos_token_id=0, pad_token_id=0)
    return transformers.GPT2LMHeadModel(config)


def squared(model, x):
    """A loss whose gradient reaches every parameter."""
    return model(x).square().mean()


def language_model_loss(model, ids):
    """GPT-2's next-token loss. NB: computed here, not by ``labels=``:
    transformers' own loss function breaks the graph, on the CPU as well."""
    logits = model(input_ids=ids, use_cache=False).logits
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def three_ways(model, fn, inputs, backward=True):
    """``fn(model, *inputs)`` compiled on accinte, eager on accinte and on
    the CPU: each one's result, gradients and module (moved with
    ``Module.to``, as users do)."""
    runs = {}
    for name, device in (("compiled", ACCINTE), ("eager", ACCINTE), ("cpu", "cpu")):
        module = copy.deepcopy(model).to(device)
        call = torch.compile(fn) if name == "compiled" else fn
        result = call(module, *(x.to(device) for x in inputs))
        grads = None
        if backward:
            result.backward()
            grads = {n: p.grad for n, p in module.named_parameters()}
        runs[name] = (result, grads, module)
    return runs


def assert_runs_match(runs):
    for part in (0, 1):
        assert_three_way(runs["compiled"][part], runs["eager"][part], runs["cpu"][part])


def test_mlp_forward_and_backward():
    with seeded(0):
        model, x = mlp(), torch.randn(6, 8)
    runs = three_ways(model, squared, [x])
    assert_runs_match(runs)
    assert all(g.abs().sum() > 0 for g in runs["compiled"][1].values())


def test_transformer_block():
    with seeded(1):
        model, x = Block(), torch.randn(2, 7, 32)

    def infer(module, x):
        with torch.no_grad():
            return module(x)

    assert_runs_match(three_ways(model.eval(), infer, [x], backward=False))


def test_cnn_block_trains_and_evaluates():
    with seeded(2):
        model, x = cnn(), torch.randn(4, 3, 8, 8)
    runs = three_ways(model.train(), squared, [x])
    assert_runs_match(runs)
    # BatchNorm's running statistics: buffers the compiled graph writes.
    buffers = {name: {n: b for n, b in module.named_buffers()}
               for name, (_, _, module) in runs.items()}
    assert_three_way(buffers["compiled"], buffers["eager"], buffers["cpu"])
    assert not torch.equal(buffers["cpu"]["1.running_mean"], torch.zeros(8))
    # The trained modules in eval mode: BatchNorm uses those statistics.
    evaluated = {}
    for name, (_, _, module) in runs.items():
        module.eval()
        call = torch.compile(module) if name == "compiled" else module
        with torch.no_grad():
            evaluated[name] = call(x.to(next(module.parameters()).device))
    assert_three_way(evaluated["compiled"], evaluated["eager"], evaluated["cpu"])


def test_gpt2_forward_backward_and_adamw_step():
    with seeded(3):
        model, ids = gpt2(), torch.randint(0, 100, (2, 12))
    runs = {}
    for name, device in (("compiled", ACCINTE), ("eager", ACCINTE), ("cpu", "cpu")):
        module = copy.deepcopy(model).to(device)
        optimizer = torch.optim.AdamW(module.parameters(), lr=1e-2)
        loss_fn = torch.compile(language_model_loss) if name == "compiled" else language_model_loss
        first = loss_fn(module, ids.to(device))
        first.backward()
        grads = {n: p.grad.clone() for n, p in module.named_parameters()}
        optimizer.step()
        # The same compiled code, on the parameters the step changed.
        with torch.no_grad():
            second = loss_fn(module, ids.to(device))
        runs[name] = (first, grads, second)
    for part in (0, 1, 2):
        assert_three_way(runs["compiled"][part], runs["eager"][part], runs["cpu"][part])
    assert runs["cpu"][2] < runs["cpu"][0]


MODELS = {
    "mlp": lambda: (mlp(), squared, [torch.randn(6, 8)]),
    "transformer block": lambda: (Block(), lambda m, x: m(x), [torch.randn(2, 7, 32)]),
    "cnn": lambda: (cnn(), squared, [torch.randn(4, 3, 8, 8)]),
    "gpt2": lambda: (gpt2(), language_model_loss, [torch.randint(0, 100, (2, 12))]),
}


@pytest.mark.parametrize("name", MODELS)
def test_no_graph_breaks_where_the_cpu_has_none(name):
    with seeded(4):
        model, fn, inputs = MODELS[name]()
    on_cpu = graph_breaks(fn, model, *inputs)
    assert on_cpu == 0
    on_accinte = graph_breaks(fn, model.to(ACCINTE), *(x.to(ACCINTE) for x in inputs))
    assert on_accinte == on_cpu


@pytest.mark.parametrize("name", MODELS)
def test_compiled_code_takes_no_fallback_the_eager_code_does_not(name):
    # Inductor calls the operators it leaves to ATen (mm, bmm, addmm,
    # baddbmm) in their out= overloads: each one needs a native kernel of
    # its own, or the compiled model runs it through the CPU fallback,
    # right but with a host round trip per call (bmm.out once did).
    with seeded(4):
        model, fn, inputs = MODELS[name]()
    model = model.to(ACCINTE)
    inputs = [x.to(ACCINTE) for x in inputs]

    def step(call):
        call(model, *inputs).sum().backward()
        model.zero_grad(set_to_none=True)
        torch.accinte.synchronize()

    compiled = torch.compile(fn)
    step(compiled)  # compiles the forward and the backward graphs
    with torch.accinte.record_fallbacks() as eager:
        step(fn)
    with torch.accinte.record_fallbacks() as on_compiled:
        step(compiled)
    assert set(on_compiled.calls) <= set(eager.calls), on_compiled.table()


def fixed_gradients(model, steps):
    """One set of gradients per step, the same on every device."""
    with seeded(5):
        return [[torch.randn_like(p) for p in model.parameters()] for _ in range(steps)]


@pytest.mark.parametrize("optimizer", [
    lambda params: torch.optim.AdamW(params, lr=0.1, weight_decay=0.1),
    lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True),
], ids=["AdamW", "SGD"])
def test_compiled_optimizer_step(optimizer):
    with seeded(6):
        model = mlp()
    gradients = fixed_gradients(model, 3)
    cpu_model = copy.deepcopy(model)
    cpu_optimizer = optimizer(cpu_model.parameters())
    for grads in gradients:
        for p, g in zip(cpu_model.parameters(), grads):
            p.grad = g
        cpu_optimizer.step()

    model.to(ACCINTE)
    accinte_optimizer = optimizer(model.parameters())
    step = torch.compile(accinte_optimizer.step)
    on_device = [[g.to(ACCINTE) for g in grads] for grads in gradients]
    torch.accinte.synchronize()

    def take_step(index):
        for p, g in zip(model.parameters(), on_device[index]):
            p.grad = g
        step()

    take_step(0)
    # NB: steps 2 and 3 are queued behind a held stream. AdamW's step count is
    # a CPU tensor that the compiled step increments on the host at once:
    # each launch must copy its value, or both steps would read 3.
    gate = _C._testing.StreamGate(0, timeout_seconds=GATE_TIMEOUT)
    try:
        take_step(1)
        take_step(2)
        assert not torch.accinte.current_stream().query()
    finally:
        gate.open()
    torch.testing.assert_close(to_cpu(list(model.parameters())),
                               list(cpu_model.parameters()))
    for p, cpu_p in zip(model.parameters(), cpu_model.parameters()):
        torch.testing.assert_close(to_cpu(accinte_optimizer.state[p]),
                                   cpu_optimizer.state[cpu_p])


def test_dynamic_shapes_compile_one_graph():
    def fn(x):
        return (x.softmax(-1) * x.shape[0]).sum(0) + x.mean()

    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(fn, backend=counter, dynamic=True)
    for batch in (3, 5, 7):
        with seeded(batch):
            x = torch.randn(batch, 11)
        assert_three_way(compiled(x.to(ACCINTE)), fn(x.to(ACCINTE)), fn(x))
    assert counter.frame_count == 1


def test_past_the_recompile_limit_runs_eagerly():
    def fn(x):
        return x.sin().cumsum(0) * 2

    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(fn, backend=counter, dynamic=False)
    with torch._dynamo.config.patch(recompile_limit=1, automatic_dynamic_shapes=False):
        for batch in (3, 5, 7):
            with seeded(batch):
                x = torch.randn(batch, 4)
            assert_three_way(compiled(x.to(ACCINTE)), fn(x.to(ACCINTE)), fn(x))
    assert counter.frame_count == 1


# NB: PyTorch's fake convolution predicts contiguous results for a device it
# does not know (ConvBackend::Overrideable), and Inductor checks the strides
# an extern kernel returns against the prediction: chapter 02's convolution
# gives them, where the CPU's gives channels-last ones for channels-last
# operands. Inductor's layout optimization makes a graph's convolutions
# channels-last by heuristics too (test_cnn_block_trains_and_evaluates).
def test_convolution_of_a_channels_last_input():
    def fn(x, w):
        return F.conv2d(x, w, padding=1).relu()

    with seeded(7):
        x = torch.randn(2, 3, 6, 6).to(memory_format=torch.channels_last)
        w = torch.randn(4, 3, 3, 3)
    on_device = [x.to(ACCINTE), w.to(ACCINTE)]
    assert_three_way(torch.compile(fn)(*on_device), fn(*on_device), fn(x, w))


def test_the_branches_of_torch_cond_launch_on_the_device():
    # Each branch is a subgraph with a wrapper of its own
    # (AccinteSubgraphWrapperCodegen); without it a branch's kernel call
    # fails to generate ("device accinte nyi").
    def fn(x):
        return torch.cond(x.sum() > 0, lambda x: (x * 2).relu(), lambda x: (x - 1).sin(), (x,))

    compiled = torch.compile(fn)
    for sign in (1.0, -1.0):
        with seeded(9):
            x = torch.rand(8) * sign
        assert_three_way(compiled(x.to(ACCINTE)), fn(x.to(ACCINTE)), fn(x))
