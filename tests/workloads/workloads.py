"""Real users' code, run unmodified on accinte and on the CPU.

Each workload builds a model the way its users do (a ``transformers``
config, ``torch.nn`` layers, a ``DataLoader``), runs it on the CPU and on
accinte from the same initial state, and returns a :class:`Result`: whether
every compared value agrees (``torch.testing.assert_close``) and which
operators took the CPU fallback in one step (chapter 09's
``torch.accinte.record_fallbacks``).

The tests in this folder assert on the results; ``docs/output/real_models.py``
prints them as the table of the guide's "Real models" page. Nothing here is
downloaded: models start from a random initialisation with a fixed seed.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable

import torch
import torch.nn.functional as F

DEVICE = "accinte"


@dataclasses.dataclass
class Result:
    """What one workload did on accinte, compared with the CPU."""

    #: The workload's name, as the guide's table shows it.
    name: str
    #: What was compared with the CPU, e.g. "losses and parameters, 5 steps".
    compared: str
    #: Operators that took the CPU fallback in one recorded step: name -> calls.
    fallbacks: dict = dataclasses.field(default_factory=dict)
    #: Values compared (accinte, CPU), appended by :meth:`compare`.
    pairs: list = dataclasses.field(default_factory=list)

    def compare(self, what: str, actual, expected, **tolerance) -> None:
        """Keeps a CPU copy of ``actual`` (accinte) and of ``expected`` (CPU),
        as they are now, for :meth:`check`."""
        self.pairs.append((what, _to_cpu(actual), _to_cpu(expected), tolerance))

    def check(self) -> None:
        """Raises AssertionError, naming the value, if one pair disagrees."""
        for what, actual, expected, tolerance in self.pairs:
            try:
                torch.testing.assert_close(actual, expected, **tolerance)
            except AssertionError as error:
                raise AssertionError(f"{self.name}: {what} differs from the CPU:\n{error}") from None

    @property
    def agrees(self) -> bool:
        try:
            self.check()
        except AssertionError:
            return False
        return True

    @property
    def fallback_calls(self) -> int:
        return sum(self.fallbacks.values())


def _to_cpu(value):
    """A CPU copy of ``value``'s tensors, which later steps cannot change."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    return value


def _record(step: Callable[[], object]) -> tuple[object, dict]:
    """Runs ``step`` inside ``torch.accinte.record_fallbacks()``."""
    with torch.accinte.record_fallbacks() as record:
        out = step()
        torch.accinte.synchronize()
    return out, dict(record.calls)


def _train(model, optimizer, batches, loss_fn, device, record_step=None):
    """Trains ``model`` on ``batches``; returns the losses, and the fallback
    calls of step ``record_step`` if it is given (on accinte only)."""
    losses, fallbacks = [], {}
    for i, batch in enumerate(batches):
        batch = [b.to(device) for b in batch]

        def step():
            optimizer.zero_grad()
            loss = loss_fn(model, *batch)
            loss.backward()
            optimizer.step()
            return loss.detach()

        if i == record_step:
            loss, fallbacks = _record(step)
        else:
            loss = step()
        losses.append(loss.cpu())
    return torch.stack(losses), fallbacks


def _parameters(model) -> dict:
    return {name: p.detach().cpu() for name, p in model.named_parameters()}


def _quiet_transformers():
    import transformers

    transformers.logging.set_verbosity_error()
    return transformers


# --- transformers ------------------------------------------------------------

def gpt2_config():
    transformers = _quiet_transformers()
    # NB: dropout off, so that the CPU and accinte runs are the same
    # computation (their random streams differ); eos/bos inside the vocabulary.
    return transformers.GPT2Config(
        vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=4,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        bos_token_id=0, eos_token_id=0, pad_token_id=0)


def gpt2_training(steps: int = 5) -> Result:
    """GPT-2 language model: AdamW steps, losses and parameters vs the CPU.

    The model is moved with ``Module.to`` after the optimizer was built, as
    many training scripts do, and keeps its tied input and output embeddings.
    """
    transformers = _quiet_transformers()
    result = Result("GPT-2 (transformers), AdamW",
                    f"losses and parameters, {steps} steps")
    torch.manual_seed(0)
    cpu_model = transformers.GPT2LMHeadModel(gpt2_config())
    model = copy.deepcopy(cpu_model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.to(DEVICE)
    cpu_optimizer = torch.optim.AdamW(cpu_model.parameters(), lr=1e-2)
    batches = [(torch.randint(0, 128, (4, 16)),) for _ in range(steps)]

    def loss_fn(m, ids):
        return m(input_ids=ids, labels=ids).loss

    losses, result.fallbacks = _train(model, optimizer, batches, loss_fn, DEVICE, record_step=1)
    cpu_losses, _ = _train(cpu_model, cpu_optimizer, batches, loss_fn, "cpu")
    result.compare("losses", losses, cpu_losses, rtol=1e-4, atol=1e-4)
    result.compare("parameters", _parameters(model), _parameters(cpu_model), rtol=1e-4, atol=1e-4)
    result.compare("tied embeddings", model.lm_head.weight is model.transformer.wte.weight, True)
    return result


def gpt2_generation(new_tokens: int = 8) -> Result:
    """GPT-2 greedy ``generate``: the same tokens as on the CPU."""
    transformers = _quiet_transformers()
    result = Result("GPT-2 (transformers), greedy generate",
                    f"{new_tokens} generated tokens")
    torch.manual_seed(1)
    cpu_model = transformers.GPT2LMHeadModel(gpt2_config()).eval()
    model = copy.deepcopy(cpu_model).to(DEVICE)
    prompt = torch.randint(1, 128, (2, 5))
    kwargs = dict(max_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        tokens, result.fallbacks = _record(
            lambda: model.generate(prompt.to(DEVICE), attention_mask=torch.ones_like(prompt).to(DEVICE), **kwargs))
        cpu_tokens = cpu_model.generate(prompt, attention_mask=torch.ones_like(prompt), **kwargs)
    result.compare("tokens", tokens, cpu_tokens, rtol=0, atol=0)
    return result


def bert_config():
    transformers = _quiet_transformers()
    # NB: dropout off, as in gpt2_config.
    return transformers.BertConfig(
        vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=32,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def bert_forward() -> Result:
    """BERT masked language model: logits in eval mode, and one training
    step's loss and gradients, against the CPU."""
    transformers = _quiet_transformers()
    result = Result("BERT (transformers), forward and one step",
                    "eval logits, loss and gradients")
    torch.manual_seed(2)
    cpu_model = transformers.BertForMaskedLM(bert_config())
    model = copy.deepcopy(cpu_model).to(DEVICE)
    ids = torch.randint(0, 128, (3, 12))
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0  # padding: the attention mask takes part
    with torch.no_grad():
        logits = model.eval()(input_ids=ids.to(DEVICE), attention_mask=mask.to(DEVICE)).logits
        cpu_logits = cpu_model.eval()(input_ids=ids, attention_mask=mask).logits
    result.compare("eval logits", logits, cpu_logits, rtol=1e-4, atol=1e-4)

    def step(m, device):
        m.train()
        out = m(input_ids=ids.to(device), attention_mask=mask.to(device), labels=ids.to(device))
        out.loss.backward()
        return out.loss.detach()

    loss, result.fallbacks = _record(lambda: step(model, DEVICE))
    result.compare("loss", loss, step(cpu_model, "cpu"), rtol=1e-4, atol=1e-4)
    result.compare("gradients", {n: p.grad for n, p in model.named_parameters()},
                   {n: p.grad for n, p in cpu_model.named_parameters()}, rtol=1e-4, atol=1e-4)
    return result


# --- torch.nn ----------------------------------------------------------------

class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1))
        self.dropout = torch.nn.Dropout(0.25)
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.dropout(self.features(x).flatten(1)))


def cnn_training(steps: int = 4) -> Result:
    """A CNN with BatchNorm, max pooling and dropout, trained with SGD and
    momentum, then evaluated.

    Dropout draws from each device's own generator, so the training runs
    differ; what must agree is everything the trained model holds: the CPU
    copy of the accinte-trained model (weights and BatchNorm statistics)
    gives the accinte model's eval-mode outputs. Training without dropout
    is compared step by step.
    """
    result = Result("CNN: conv, BatchNorm, max pool, dropout, SGD",
                    f"losses, parameters and running statistics, {steps} steps; eval outputs")
    torch.manual_seed(3)
    cpu_model = SmallCNN()
    model = copy.deepcopy(cpu_model).to(DEVICE)
    batches = [(torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))) for _ in range(steps)]

    def loss_fn(m, x, y):
        return F.cross_entropy(m(x), y)

    # Step by step, dropout off (p = 0 keeps the module in the graph).
    for m in (model, cpu_model):
        m.dropout.p = 0.0
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    cpu_optimizer = torch.optim.SGD(cpu_model.parameters(), lr=0.1, momentum=0.9)
    losses, result.fallbacks = _train(model.train(), optimizer, batches, loss_fn, DEVICE, record_step=1)
    cpu_losses, _ = _train(cpu_model.train(), cpu_optimizer, batches, loss_fn, "cpu")
    result.compare("losses", losses, cpu_losses, rtol=1e-4, atol=1e-4)
    result.compare("state (parameters and running statistics)",
                   model.state_dict(), cpu_model.state_dict(), rtol=1e-4, atol=1e-4)

    # With dropout: train on accinte, then the CPU copy must evaluate alike.
    model.dropout.p = 0.25
    _train(model.train(), optimizer, batches, loss_fn, DEVICE)
    trained = copy.deepcopy(model).cpu().eval()
    x = torch.randn(8, 3, 16, 16)
    with torch.no_grad():
        result.compare("eval outputs of the trained model",
                       model.eval()(x.to(DEVICE)), trained(x), rtol=1e-4, atol=1e-4)
    result.compare("running mean moved from its initial value",
                   bool((model.features[1].running_mean.cpu() != 0).any()), True)
    return result


def rnn_training(kind: str, steps: int = 3) -> Result:
    """A 2-layer ``nn.LSTM`` or ``nn.GRU`` sequence classifier trained with
    Adam, against the CPU step by step."""
    rnn_class = {"LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU}[kind]
    result = Result(f"{kind}, 2 layers, Adam", f"losses and parameters, {steps} steps")

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = rnn_class(8, 16, num_layers=2, batch_first=True)
            self.head = torch.nn.Linear(16, 4)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.head(out[:, -1])

    torch.manual_seed(4)
    cpu_model = Classifier()
    model = copy.deepcopy(cpu_model).to(DEVICE)
    batches = [(torch.randn(5, 7, 8), torch.randint(0, 4, (5,))) for _ in range(steps)]

    def loss_fn(m, x, y):
        return F.cross_entropy(m(x), y)

    losses, result.fallbacks = _train(
        model, torch.optim.Adam(model.parameters(), lr=1e-2), batches, loss_fn, DEVICE, record_step=1)
    cpu_losses, _ = _train(
        cpu_model, torch.optim.Adam(cpu_model.parameters(), lr=1e-2), batches, loss_fn, "cpu")
    result.compare("losses", losses, cpu_losses, rtol=1e-4, atol=1e-4)
    result.compare("parameters", _parameters(model), _parameters(cpu_model), rtol=1e-4, atol=1e-4)
    return result


class _Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, i):
        x = torch.full((4,), float(i))
        return x, x.sum()


def dataloader_pinned(workers: int = 2) -> Result:
    """A ``DataLoader`` with ``pin_memory=True`` and worker processes feeding
    a linear model with non-blocking copies.

    NB: no ``pin_memory_device``: PyTorch deprecates it and pins for the
    current accelerator, which is accinte once the backend is loaded."""
    result = Result(f"DataLoader, pin_memory=True, {workers} workers",
                    "batches pinned, predictions")
    loader = torch.utils.data.DataLoader(
        _Squares(), batch_size=8, num_workers=workers, pin_memory=True)
    torch.manual_seed(5)
    cpu_model = torch.nn.Linear(4, 1)
    model = copy.deepcopy(cpu_model).to(DEVICE)
    pinned, outputs, cpu_outputs = [], [], []
    for x, y in loader:
        pinned.append(x.is_pinned() and y.is_pinned())
        with torch.no_grad():
            outputs.append(model(x.to(DEVICE, non_blocking=True)).cpu())
            cpu_outputs.append(cpu_model(x))
    result.compare("every batch pinned", all(pinned) and len(pinned) == 4, True)
    result.compare("predictions", torch.cat(outputs), torch.cat(cpu_outputs))
    return result


def compiled_gpt2_step() -> Result:
    """A GPT-2 training step under ``torch.compile(backend="aot_eager")``."""
    transformers = _quiet_transformers()
    result = Result("GPT-2 step, torch.compile(backend=\"aot_eager\")",
                    "loss and gradients, compiled vs CPU eager")
    torch.manual_seed(6)
    cpu_model = transformers.GPT2LMHeadModel(gpt2_config())
    model = copy.deepcopy(cpu_model).to(DEVICE)
    ids = torch.randint(0, 128, (2, 16))

    def step(m, x):
        loss = m(input_ids=x, labels=x).loss
        loss.backward()
        return loss.detach()

    compiled = torch.compile(step, backend="aot_eager")
    torch._dynamo.reset()
    try:
        loss, result.fallbacks = _record(lambda: compiled(model, ids.to(DEVICE)))
    finally:
        torch._dynamo.reset()
    result.compare("loss", loss, step(cpu_model, ids), rtol=1e-4, atol=1e-4)
    result.compare("gradients", {n: p.grad for n, p in model.named_parameters()},
                   {n: p.grad for n, p in cpu_model.named_parameters()}, rtol=1e-4, atol=1e-4)
    return result


#: Every workload, in the order of the guide's table.
WORKLOADS = {
    "gpt2_training": gpt2_training,
    "gpt2_generation": gpt2_generation,
    "bert_forward": bert_forward,
    "cnn_training": cnn_training,
    "lstm_training": lambda: rnn_training("LSTM"),
    "gru_training": lambda: rnn_training("GRU"),
    "dataloader_pinned": dataloader_pinned,
    "compiled_gpt2_step": compiled_gpt2_step,
}
