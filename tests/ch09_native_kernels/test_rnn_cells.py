"""Chapter 09: the fused LSTM and GRU cells.

On every device but the CPU, ATen's recurrent layers and cells compute each
time step with ``_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell`` and
their backward, operators the CPU has no kernel for: without accinte kernels
of their own, ``nn.LSTM`` and ``nn.GRU`` fail. These tests compare them with
the CPU, whose cells compute the same thing with separate operators, and
record the fallback: every case must run natively.
"""

import copy
import itertools

import pytest
import torch
from torch import nn
from torch_accinte import _C

# Long enough never to expire while a test runs; short enough that a broken
# test fails instead of hanging.
GATE_TIMEOUT = 30.0

FUSED_OPS = ("_thnn_fused_lstm_cell", "_thnn_fused_lstm_cell_backward_impl",
             "_thnn_fused_gru_cell", "_thnn_fused_gru_cell_backward")
lstm_cell = torch.ops.aten._thnn_fused_lstm_cell
lstm_cell_backward = torch.ops.aten._thnn_fused_lstm_cell_backward_impl
gru_cell = torch.ops.aten._thnn_fused_gru_cell
gru_cell_backward = torch.ops.aten._thnn_fused_gru_cell_backward


def sample(*shape, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)


def seeded(factory, seed=0):
    """``factory()`` with the CPU's global generator at ``seed``, the
    generator left as it was (modules draw their initial weights from it)."""
    with torch.random.fork_rng(devices=range(torch.accinte.device_count()),
                               device_type="accinte"):
        torch.manual_seed(seed)
        return factory()


def forward_backward(module, inputs, output_seeds, device):
    """Runs a copy of ``module`` on ``device``: the outputs, and the
    gradients of the inputs and parameters, recording the fallback.

    The loss weighs each output with random weights (seeded by
    ``output_seeds``; None leaves the output out of the loss)."""
    module = copy.deepcopy(module).to(device)
    inputs = [x.detach().to(device, copy=True).requires_grad_() for x in inputs]
    with torch.accinte.record_fallbacks() as record:
        outputs = module(*inputs)
        flat = [t for t in _flatten(outputs) if t is not None]
        loss = sum((t * sample(*t.shape, dtype=t.dtype, seed=seed).to(device)).sum()
                   for t, seed in zip(flat, output_seeds) if seed is not None)
        loss.backward()
    grads = [x.grad for x in inputs] + [p.grad for p in module.parameters()]
    return flat, grads, record


def _flatten(value):
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _flatten(item)]
    return [value]


def assert_matches_cpu(module, inputs, output_seeds, **tolerance):
    expected, expected_grads, _ = forward_backward(module, inputs, output_seeds, "cpu")
    result, grads, record = forward_backward(module, inputs, output_seeds, "accinte")
    assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    assert all(t.device.type == "accinte" for t in result + grads)
    torch.testing.assert_close([t.cpu() for t in result], expected, **tolerance)
    torch.testing.assert_close([g.cpu() for g in grads], expected_grads, **tolerance)


class Wrapped(nn.Module):
    """A module called with its states as separate arguments (each a leaf
    whose gradient the comparison checks)."""

    def __init__(self, module, call):
        super().__init__()
        self.module = module
        self.call = call

    def forward(self, *inputs):
        return self.call(self.module, *inputs)


SEQUENCE, BATCH, INPUT, HIDDEN = 4, 3, 5, 6

LAYER_CASES = list(itertools.product((1, 2), (False, True), (False, True), (True, False)))


def layer_id(case):
    layers, batch_first, bidirectional, bias = case
    return (f"{layers}layer" + ("-batch_first" if batch_first else "")
            + ("-bidirectional" if bidirectional else "") + ("" if bias else "-nobias"))


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU], ids=["LSTM", "GRU"])
@pytest.mark.parametrize("case", LAYER_CASES, ids=[layer_id(c) for c in LAYER_CASES])
def test_layers_match_cpu(kind, case):
    layers, batch_first, bidirectional, bias = case
    module = seeded(lambda: kind(INPUT, HIDDEN, num_layers=layers, bias=bias,
                                 batch_first=batch_first, bidirectional=bidirectional,
                                 dropout=0.0))
    shape = (BATCH, SEQUENCE, INPUT) if batch_first else (SEQUENCE, BATCH, INPUT)
    states = layers * (2 if bidirectional else 1)
    inputs = [sample(*shape, seed=1), sample(states, BATCH, HIDDEN, seed=2)]
    if kind is nn.LSTM:
        inputs.append(sample(states, BATCH, HIDDEN, seed=3))
        module = Wrapped(module, lambda m, x, h, c: m(x, (h, c)))
    # The output, h_n (and c_n) all in the loss: every state's gradient
    # flows back into the cells.
    assert_matches_cpu(module, inputs, [10, 11, 12])


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU], ids=["LSTM", "GRU"])
def test_layers_without_initial_state_and_only_the_output_used(kind):
    # No h_0/c_0 (zeros on the device) and a loss of the output alone: the
    # last step's cell state gets no gradient (grad_cy is None).
    module = seeded(lambda: kind(INPUT, HIDDEN, num_layers=2))
    assert_matches_cpu(module, [sample(SEQUENCE, BATCH, INPUT, seed=1)], [10, None, None])


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU], ids=["LSTM", "GRU"])
def test_unbatched_and_float64_layers(kind):
    module = seeded(lambda: kind(INPUT, HIDDEN, bidirectional=True, dtype=torch.float64))
    assert_matches_cpu(module, [sample(SEQUENCE, INPUT, dtype=torch.float64, seed=1)], [10, 11, 12])


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU], ids=["LSTM", "GRU"])
def test_packed_sequences(kind):
    # Sequences of different lengths: each step's cell runs on the batch
    # rows still going, a narrower batch every time.
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    module = seeded(lambda: kind(INPUT, HIDDEN, num_layers=2, bidirectional=True))
    lengths = torch.tensor([SEQUENCE, 3, 1])
    packed = Wrapped(module, lambda m, x: pad_packed_sequence(
        m(pack_padded_sequence(x, lengths))[0])[0])
    assert_matches_cpu(packed, [sample(SEQUENCE, BATCH, INPUT, seed=1)], [10])


def test_empty_batch():
    gates, state = torch.zeros(0, 8, device="accinte"), torch.zeros(0, 2, device="accinte")
    assert [t.shape for t in lstm_cell(gates, gates, state)] == [(0, 2), (0, 2), (0, 8)]
    output, _ = nn.GRU(3, 4).to("accinte")(torch.zeros(2, 0, 3, device="accinte"))
    assert output.shape == (2, 0, 4)
    torch.accinte.synchronize()


@pytest.mark.parametrize("kind", [nn.LSTMCell, nn.GRUCell], ids=["LSTMCell", "GRUCell"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("with_state", [True, False], ids=["state", "nostate"])
def test_cells_match_cpu(kind, bias, with_state):
    module = seeded(lambda: kind(INPUT, HIDDEN, bias=bias))
    inputs = [sample(BATCH, INPUT, seed=1)]
    if with_state:
        inputs.append(sample(BATCH, HIDDEN, seed=2))
        if kind is nn.LSTMCell:
            inputs.append(sample(BATCH, HIDDEN, seed=3))
            module = Wrapped(module, lambda m, x, h, c: m(x, (h, c)))
    assert_matches_cpu(module, inputs, [10, 11])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kind", [nn.LSTMCell, nn.GRUCell], ids=["LSTMCell", "GRUCell"])
def test_cells_in_reduced_precision(kind, dtype):
    # The kernels compute in float32 and round once per result; the CPU's
    # separate operators round after each one.
    module = seeded(lambda: kind(INPUT, HIDDEN, dtype=dtype))
    assert_matches_cpu(module, [sample(BATCH, INPUT, dtype=dtype, seed=1)], [10, 11],
                       atol=3e-2, rtol=3e-2)


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU], ids=["LSTM", "GRU"])
def test_autocast_runs_the_cells_in_reduced_precision(kind):
    # Chapter 05's policy casts the fused cells to the region's dtype, as
    # CUDA's does: the kernels meet bfloat16 tensors.
    module = seeded(lambda: kind(INPUT, HIDDEN)).to("accinte")
    x = sample(SEQUENCE, BATCH, INPUT, seed=1)
    expected, _ = seeded(lambda: kind(INPUT, HIDDEN))(x)
    with torch.accinte.record_fallbacks() as record:
        with torch.autocast("accinte", dtype=torch.bfloat16):
            output, _ = module(x.to("accinte"))
        output.float().sum().backward()
    assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    assert output.dtype == torch.bfloat16
    assert all(p.grad.dtype == torch.float32 for p in module.parameters())
    torch.testing.assert_close(output.cpu().float(), expected, atol=5e-2, rtol=5e-2)


def test_training_loop_matches_cpu():
    def build():
        return nn.ModuleDict({"rnn": nn.LSTM(INPUT, HIDDEN, num_layers=2, batch_first=True),
                              "gru": nn.GRU(HIDDEN, HIDDEN),
                              "head": nn.Linear(HIDDEN, 3)})

    model = seeded(build)
    device_model = copy.deepcopy(model).to("accinte")
    x, y = sample(BATCH, SEQUENCE, INPUT, seed=1), torch.tensor([0, 2, 1])
    for net, inputs, targets in ((model, x, y), (device_model, x.to("accinte"), y.to("accinte"))):
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        with torch.accinte.record_fallbacks() as record:
            for _ in range(3):
                optimizer.zero_grad()
                sequence, _ = net["rnn"](inputs)
                last, _ = net["gru"](sequence.transpose(0, 1))
                loss = nn.functional.cross_entropy(net["head"](last[-1]), targets)
                loss.backward()
                optimizer.step()
        if inputs.device.type == "accinte":
            assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    for cpu_parameter, device_parameter in zip(model.parameters(), device_model.parameters()):
        torch.testing.assert_close(device_parameter.cpu(), cpu_parameter)


# The fused operators themselves, against the formulas they stand for.

def lstm_reference(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias + hidden_bias
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    return o * cy.tanh(), cy, torch.cat([i, f, g, o], 1)


def gru_reference(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    if input_bias is not None:
        input_gates, hidden_gates = input_gates + input_bias, hidden_gates + hidden_bias
    ir, ii, in_ = input_gates.chunk(3, 1)
    hr, hi, hn = hidden_gates.chunk(3, 1)
    r, z = (ir + hr).sigmoid(), (ii + hi).sigmoid()
    n = (in_ + r * hn).tanh()
    return n + z * (hx - n), torch.cat([r, z, n, hx, hn], 1)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_fused_lstm_cell_and_its_workspace(bias):
    # Strided gate products and biases, as a caller may pass them: the
    # workspace has CUDA's layout (the activated gates i, f, g, o), which
    # the backward reads back.
    input_gates = sample(4 * HIDDEN, BATCH, dtype=torch.float64).t()
    hidden_gates = sample(BATCH, 8 * HIDDEN, dtype=torch.float64, seed=1)[:, ::2]
    cx = sample(BATCH, HIDDEN, dtype=torch.float64, seed=2)
    biases = (sample(8 * HIDDEN, dtype=torch.float64, seed=3)[::2],
              sample(4 * HIDDEN, dtype=torch.float64, seed=4)) if bias else (None, None)
    expected = lstm_reference(input_gates, hidden_gates, cx, *biases)
    with torch.accinte.record_fallbacks() as record:
        result = lstm_cell(*[t if t is None else t.to("accinte")
                             for t in (input_gates, hidden_gates, cx, *biases)])
    assert record.calls == {}
    torch.testing.assert_close([t.cpu() for t in result], list(expected))


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_fused_gru_cell_and_its_workspace(bias):
    input_gates = sample(3 * HIDDEN, BATCH, dtype=torch.float64).t()
    hidden_gates = sample(BATCH, 6 * HIDDEN, dtype=torch.float64, seed=1)[:, ::2]
    hx = sample(BATCH, HIDDEN, dtype=torch.float64, seed=2)
    biases = (sample(3 * HIDDEN, dtype=torch.float64, seed=3),
              sample(3 * HIDDEN, dtype=torch.float64, seed=4)) if bias else (None, None)
    expected = gru_reference(input_gates, hidden_gates, hx, *biases)
    with torch.accinte.record_fallbacks() as record:
        result = gru_cell(*[t if t is None else t.to("accinte")
                            for t in (input_gates, hidden_gates, hx, *biases)])
    assert record.calls == {}
    torch.testing.assert_close([t.cpu() for t in result], list(expected))


def test_a_state_of_another_shape_is_read_in_element_order():
    # As on CUDA, the previous cell state needs batch * hidden_size
    # elements; the results take its shape.
    input_gates, hidden_gates = sample(2, 12), sample(2, 12, seed=1)
    cx = sample(6, seed=2)
    hy, cy, _ = lstm_reference(input_gates, hidden_gates, cx.view(2, 3))
    result = lstm_cell(input_gates.to("accinte"), hidden_gates.to("accinte"), cx.to("accinte"))
    assert result[0].shape == result[1].shape == (6,)
    torch.testing.assert_close(result[0].cpu(), hy.view(6))
    torch.testing.assert_close(result[1].cpu(), cy.view(6))


def fused_inputs(gates, bias, seed=0):
    tensors = [sample(BATCH, gates * HIDDEN, dtype=torch.float64, seed=seed),
               sample(BATCH, gates * HIDDEN, dtype=torch.float64, seed=seed + 1),
               sample(BATCH, HIDDEN, dtype=torch.float64, seed=seed + 2)]
    if bias:
        tensors += [sample(gates * HIDDEN, dtype=torch.float64, seed=seed + 3),
                    sample(gates * HIDDEN, dtype=torch.float64, seed=seed + 4)]
    return [t.to("accinte").requires_grad_() for t in tensors]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_gradcheck_fused_lstm_cell(bias):
    # gradcheck differentiates with grad mode off: autograd runs the fused
    # backward on the forward's workspace. hy alone leaves grad_cy None.
    inputs = fused_inputs(4, bias)
    assert torch.autograd.gradcheck(lambda *t: lstm_cell(*t)[:2], inputs)
    assert torch.autograd.gradcheck(lambda *t: lstm_cell(*t)[0], inputs)
    assert torch.autograd.gradcheck(lambda *t: lstm_cell(*t)[1], inputs)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_gradcheck_fused_gru_cell(bias):
    assert torch.autograd.gradcheck(lambda *t: gru_cell(*t)[0], fused_inputs(3, bias))


@pytest.mark.parametrize("gates, cell", [(4, lambda *t: lstm_cell(*t)[:2]),
                                         (3, lambda *t: gru_cell(*t)[0])], ids=["LSTM", "GRU"])
def test_gradgradcheck_fused_cells(gates, cell):
    # With grad mode on in the backward (create_graph), autograd uses ATen's
    # differentiable backward instead, made of ordinary operators: the
    # fused forward still runs, and its workspace is not used.
    assert torch.autograd.gradgradcheck(cell, fused_inputs(gates, True))


def test_backward_with_no_gradient_returns_nothing():
    cx = torch.zeros(2, 3, device="accinte")
    assert lstm_cell_backward(None, None, cx, cx, torch.zeros(2, 12, device="accinte"),
                              True) == (None, None, None)


def test_cells_run_on_the_current_stream():
    inputs = [t.detach() for t in fused_inputs(4, True)]
    expected = lstm_reference(*[t.cpu() for t in inputs])
    torch.accinte.synchronize()
    stream = torch.Stream(device="accinte:0")
    with torch.accinte.stream(stream):
        gate = _C._testing.StreamGate(0, timeout_seconds=GATE_TIMEOUT)
        # The call returns at once: its kernel is queued behind the gate.
        result = lstm_cell(*inputs)
        assert not stream.query()
        gate.open()
        torch.testing.assert_close([t.cpu() for t in result], list(expected))


def test_second_device():
    module = seeded(lambda: nn.GRU(INPUT, HIDDEN))
    x = sample(SEQUENCE, BATCH, INPUT, seed=1)
    output, hidden = copy.deepcopy(module).to("accinte:1")(x.to("accinte:1"))
    assert output.device == hidden.device == torch.device("accinte:1")
    expected, _ = module(x)
    torch.testing.assert_close(output.cpu(), expected)


def on_device(*tensors):
    return [t if t is None else t.to("accinte") for t in tensors]


gates4, gates3, state = torch.zeros(2, 12), torch.zeros(2, 9), torch.zeros(2, 3)
bias12 = torch.zeros(12)


@pytest.mark.parametrize("call, error", [
    (lambda: lstm_cell(*on_device(gates4, gates4), state),
     r"Expected all tensors to be on the same device, but found at least two devices, "
     r"accinte:0 and cpu! \(when checking argument cx of aten::_thnn_fused_lstm_cell\)"),
    (lambda: lstm_cell(*on_device(gates4, gates4), state.to("accinte:1")),
     r"found at least two devices, accinte:0 and accinte:1! \(when checking argument cx"),
    (lambda: lstm_cell(*on_device(gates4, gates4, state.double())),
     r"_thnn_fused_lstm_cell: expected cx to have the dtype of input_gates \(Float\), but got Double"),
    (lambda: lstm_cell(*on_device(gates4.long(), gates4.long(), state.long())),
     "_thnn_fused_lstm_cell: expected float32, float64, float16 or bfloat16 tensors, but got Long"),
    (lambda: lstm_cell(*on_device(gates4[0], gates4[0], state)),
     r"expected input_gates of 2 dimensions \[batch, 4 \* hidden_size\], but got sizes \[12\]"),
    (lambda: lstm_cell(*on_device(gates4, gates3, state)),
     r"expected hidden_gates of the sizes of input_gates \(\[2, 12\]\), but got \[2, 9\]"),
    (lambda: lstm_cell(*on_device(gates3, gates3, state)),
     r"expected input_gates.size\(1\) \(9\) to be a multiple of 4 gates"),
    (lambda: lstm_cell(*on_device(gates4, gates4, state, bias12), None),
     "expected input_bias and hidden_bias to be both given or both omitted"),
    (lambda: lstm_cell(*on_device(gates4, gates4, state, bias12[:8], bias12[:8])),
     r"expected biases of sizes \[12\], but got \[8\]"),
    (lambda: lstm_cell(*on_device(gates4, gates4, torch.zeros(2, 4))),
     r"expected cx of 2 \* 3 elements \(batch \* hidden_size\), but got sizes \[2, 4\]"),
    (lambda: gru_cell(*on_device(gates3, gates3, torch.zeros(3, 3))),
     r"_thnn_fused_gru_cell: expected hx of 2 \* 3 elements"),
    (lambda: gru_cell(*on_device(gates4[:, :10], gates4[:, :10], state)),
     r"expected input_gates.size\(1\) \(10\) to be a multiple of 3 gates"),
    (lambda: lstm_cell_backward(*on_device(state, None, state, state, torch.zeros(2, 9)), True),
     r"_thnn_fused_lstm_cell_backward_impl: expected workspace of sizes \[2, 12\], but got \[2, 9\]"),
    (lambda: lstm_cell_backward(*on_device(None, state, torch.zeros(3, 3), state, gates4), True),
     r"expected cx of sizes \[2, 3\], but got \[3, 3\]"),
    (lambda: gru_cell_backward(*on_device(state, torch.zeros(2, 9)), True),
     r"_thnn_fused_gru_cell_backward: expected workspace of sizes \[2, 15\], but got \[2, 9\]"),
    (lambda: gru_cell_backward(*on_device(state[0], torch.zeros(2, 15)), True),
     r"expected grad_hy of 2 dimensions \[batch, hidden_size\], but got sizes \[3\]"),
])
def test_bad_input_is_refused_before_the_launch(call, error):
    with pytest.raises(RuntimeError, match=error):
        call()
    # Nothing was launched: the stream has no failure to report.
    torch.accinte.synchronize()


def test_no_operator_is_left_to_the_fallback():
    # The operators the recurrent layers need from a device: each has an
    # accinte kernel, so none can reach the fallback.
    for name in FUSED_OPS:
        overload = getattr(torch.ops.aten, name).default
        assert torch._C._dispatch_has_kernel_for_dispatch_key(overload.name(), "PrivateUse1"), name
