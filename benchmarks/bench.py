"""accinte against the CPU, in one process: the driver of ``make bench``.

The emulated device computes on this machine's CPU, so the CPU is the limit
accinte can approach, and every benchmark is reported as a ratio to a CPU
baseline timed in the same process: ``accinte seconds / CPU seconds`` for
time, and for copies accinte's bandwidth relative to a CPU ``copy_`` of the
same bytes. Ratios compare across machines and survive a uniformly busy
machine better than seconds do.

Each benchmark runs its accinte and its CPU side alternately, one sample of
each per round, so that a change of load or clock hits both alike, and
reports the median of each side. A sample is as many calls as make it last
MIN_SAMPLE seconds, and it ends by synchronizing every device, inside the
timed region: device work never leaks into the next sample.

    make bench [STAGE=NN] [BUILD_TIMES=1]
    PYTHONPATH=build/stageNN/python python benchmarks/bench.py --stage NN

Writes ``results.json`` and ``results.md`` (see bench_report.py) to ``--out``.
"""

import os

# NB: the emulator reads its device count once, when torch_accinte loads it
# (from stage 06 on, `import torch` does): the cross-device copy needs two.
os.environ.setdefault("ACCINTE_DEVICE_COUNT", "2")

import argparse  # noqa: E402
import copy  # noqa: E402
import datetime  # noqa: E402
import functools  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import Callable, Dict, List, Optional, Tuple  # noqa: E402

import torch  # noqa: E402
import torch_accinte  # noqa: E402

import bench_report as report  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20
#: A native kernel and the CPU fallback, on the same kind of computation,
#: that chapter 02's page compares.
NATIVE_NEGATION = "-x, 1M float32: native kernel"
FALLBACK_NEGATION = "x.nan_to_num(), 1M float32: CPU fallback"
#: Shortest sample, in seconds: shorter ones measure the timer and the loop.
MIN_SAMPLE = 0.02

#: A benchmark's two sides, each a call timed repeatedly.
Steps = Tuple[Callable[[], object], Callable[[], object]]


@dataclass
class Benchmark:
    """One row of the results: ``prepare`` allocates the tensors and returns
    the (accinte, CPU) steps, so that they are freed after the benchmark."""

    name: str
    measure: str
    prepare: Callable[[], Steps]
    goal: Optional[dict] = None
    nbytes: Optional[int] = None
    #: What the second step runs, when it is not the same call on the CPU.
    baseline: Optional[str] = None
    #: What the first step runs, when it is not the call on accinte.
    subject: Optional[str] = None
    #: Whether the second step queues work on accinte (a baseline that is
    #: eager accinte): each of its samples then waits for the device, or it
    #: would time only the launches and leave the work to the other side.
    baseline_on_device: bool = False
    #: Whether to count the accinte step's CPU fallback calls (a workload:
    #: they are the first reason for its ratio).
    count_fallbacks: bool = False


# -- Timing ----------------------------------------------------------------------

def synchronize_all() -> None:
    """Waits for every device: a cross-device copy keeps two busy."""
    for index in range(torch.accinte.device_count()):
        torch.accinte.synchronize(index)


def sample(step: Callable[[], object], number: int, on_device: bool) -> float:
    """Seconds per call of ``step``, over ``number`` calls, device work included."""
    start = time.perf_counter()
    for _ in range(number):
        step()
    if on_device:
        synchronize_all()
    return (time.perf_counter() - start) / number


def calls_per_sample(step: Callable[[], object], on_device: bool) -> int:
    """How many calls make a sample last MIN_SAMPLE; also warms ``step`` up
    (first-call costs: lazy initialization, allocator caches)."""
    sample(step, 1, on_device)
    number = 1
    while True:
        seconds = sample(step, number, on_device) * number
        if seconds >= MIN_SAMPLE:
            return number
        # Aim a little past the target so that one more try usually suffices.
        number = max(number * 2, int(number * 1.5 * MIN_SAMPLE / max(seconds, 1e-9)))


def median_seconds(steps: Steps, repeats: int, baseline_on_device: bool = False
                   ) -> Tuple[float, float]:
    """Medians (accinte, CPU) of seconds per call, from alternating samples;
    with ``baseline_on_device``, the second side's samples wait for the
    device too (its work is queued on accinte)."""
    accinte_step, cpu_step = steps
    sides = [(accinte_step, True, calls_per_sample(accinte_step, True), []),
             (cpu_step, baseline_on_device,
              calls_per_sample(cpu_step, baseline_on_device), [])]
    for round_index in range(repeats):
        # Which side goes first alternates too: neither always runs on the
        # caches, or the clock, that the other left behind.
        for step, on_device, number, samples in sides[::1 if round_index % 2 else -1]:
            samples.append(sample(step, number, on_device))
    return statistics.median(sides[0][3]), statistics.median(sides[1][3])


# -- The benchmarks --------------------------------------------------------------

def add(count: int) -> Steps:
    """``a + b`` on ``count`` float32 elements."""
    a, b = torch.rand(count), torch.rand(count)
    a_dev, b_dev = a.to("accinte"), b.to("accinte")
    return (lambda: a_dev + b_dev), (lambda: a + b)


def add_out(count: int) -> Steps:
    """``torch.add(a, b, out=c)`` on ``count`` float32 elements: the kernel
    alone, without allocating its result."""
    a, b = torch.rand(count), torch.rand(count)
    c = torch.empty_like(a)
    a_dev, b_dev, c_dev = a.to("accinte"), b.to("accinte"), c.to("accinte")
    return (lambda: torch.add(a_dev, b_dev, out=c_dev)), (lambda: torch.add(a, b, out=c))


def latency_add() -> Steps:
    """``a + b`` on one element, waiting for each: the cost of one launch."""
    device_add, cpu_add = add(1)

    def device_step():
        device_add()
        torch.accinte.synchronize()
    return device_step, cpu_add


def matmul() -> Steps:
    """``a @ b`` on two 1024 × 1024 float32 matrices."""
    a, b = torch.rand(1024, 1024), torch.rand(1024, 1024)
    a_dev, b_dev = a.to("accinte"), b.to("accinte")
    return (lambda: a_dev @ b_dev), (lambda: a @ b)


def allocate_free() -> Steps:
    """A 1 MiB tensor allocated and, unreferenced at once, freed."""
    count = MiB // 4  # float32
    # NB: both sides name their device with a torch.device made beforehand,
    # so that neither pays for parsing a device string: what differs is the
    # allocator.
    accinte, cpu = torch.device("accinte"), torch.device("cpu")
    return (lambda: torch.empty(count, device=accinte)), (lambda: torch.empty(count, device=cpu))


def op_chain(x: torch.Tensor) -> torch.Tensor:
    """Ten elementwise operations, each a launch on accinte."""
    x = x + 1.0
    x = x * 0.5
    x = x - 0.25
    x = x / 1.5
    x = x.abs()
    x = x.sqrt()
    x = x.neg()
    x = x.exp()
    x = x.relu()
    return x.sigmoid()


def small_op_chain() -> Steps:
    """Ten elementwise operations on 1K elements, then one wait: what is
    left is, almost entirely, what each launch costs."""
    x = torch.rand(1024)
    x_dev = x.to("accinte")

    def device_step():
        op_chain(x_dev)
        torch.accinte.synchronize()
    return device_step, (lambda: op_chain(x))


def graphed_op_chain() -> Steps:
    """Chapter 15: the same ten operations captured once into a graph and
    replayed, against launching them eagerly on accinte; a wait each."""
    x = torch.rand(1024, device="accinte")
    graph = torch.accelerator.Graph()  # refused before chapter 15
    with torch.Stream(device="accinte"), graph:
        op_chain(x)

    def replay():
        graph.replay()
        torch.accinte.synchronize()

    def eager():
        op_chain(x)
        torch.accinte.synchronize()
    return replay, eager


def negate(route: str) -> Callable[[], Steps]:
    """One pass over 1M float32 elements by one of two routes on accinte:
    chapter 02's native kernel (``-x``) or the CPU fallback
    (``x.nan_to_num()``, which reads and writes each element once too, and
    which no chapter implements natively), against the same call on the
    CPU."""
    def prepare() -> Steps:
        x = torch.rand(MiB)
        x_dev = x.to("accinte")
        if route == "native":
            return (lambda: -x_dev), (lambda: -x)
        return (lambda: x_dev.nan_to_num()), (lambda: x.nan_to_num())
    return prepare


# -- The workloads of tests/workloads ----------------------------------------------

def transformers_module() -> ModuleType:
    """``transformers``, its warnings silenced; a RuntimeError, which the
    rows report as the reason they were not measured, if it is missing."""
    try:
        import transformers
    except ImportError:
        raise RuntimeError("transformers is not installed (requirements/test.txt)") from None
    transformers.logging.set_verbosity_error()
    return transformers


@functools.lru_cache(maxsize=None)
def workloads() -> ModuleType:
    """``tests/workloads/workloads.py``, whose models the test suite checks
    against the CPU: the workload rows time those same models."""
    transformers_module()  # its configurations need it
    # NB: loaded from its path: ``tests`` is no package, and an installed
    # distribution may own that name.
    path = ROOT / "tests" / "workloads" / "workloads.py"
    spec = importlib.util.spec_from_file_location("accinte_bench_workloads", path)
    module = importlib.util.module_from_spec(spec)
    # Dataclasses look their module up while the module runs.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def gpt2_model(seed: int) -> torch.nn.Module:
    """tests/workloads' GPT-2 language model on the CPU: 2 layers, width 32,
    a vocabulary of 128, dropout off."""
    module = workloads()
    torch.default_generator.manual_seed(seed)
    return transformers_module().GPT2LMHeadModel(module.gpt2_config())


def gpt2_training_step() -> Steps:
    """One AdamW step of tests/workloads' GPT-2 on 4 sequences of 16 tokens,
    the loss from the model's own ``labels``."""
    cpu_model = gpt2_model(0)
    # NB: initialized on the CPU and copied, as in mlp_training_step.
    device_model = copy.deepcopy(cpu_model).to("accinte")
    ids = torch.randint(0, cpu_model.config.vocab_size, (4, 16))

    def trainer(model, ids):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step():
            optimizer.zero_grad(set_to_none=True)
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
        return step

    return trainer(device_model, ids.to("accinte")), trainer(cpu_model, ids)


#: Tokens each ``generate`` call of the GPT-2 generation row adds.
NEW_TOKENS = 16


def gpt2_generation() -> Steps:
    """tests/workloads' GPT-2 greedy ``generate``: NEW_TOKENS tokens after 2
    prompts of 5 tokens."""
    cpu_model = gpt2_model(1).eval()
    device_model = copy.deepcopy(cpu_model).to("accinte")
    prompt = torch.randint(1, cpu_model.config.vocab_size, (2, 5))

    def generator(model, device):
        ids, mask = prompt.to(device), torch.ones_like(prompt).to(device)

        def step():
            with torch.no_grad():
                return model.generate(ids, attention_mask=mask, max_new_tokens=NEW_TOKENS,
                                      do_sample=False, pad_token_id=0)
        return step

    device_step, cpu_step = generator(device_model, "accinte"), generator(cpu_model, "cpu")
    # NB: both sides time the same work only if they decode the same tokens,
    # all of them: an end-of-sequence token would stop one of them early.
    tokens, cpu_tokens = device_step().cpu(), cpu_step()
    if tokens.shape != (2, 5 + NEW_TOKENS) or not torch.equal(tokens, cpu_tokens):
        raise RuntimeError(f"GPT-2 generated {tuple(tokens.shape)} tokens on accinte and "
                           f"{tuple(cpu_tokens.shape)} on the CPU, not the same "
                           f"{NEW_TOKENS} new tokens each")
    return device_step, cpu_step


def bert_forward() -> Steps:
    """tests/workloads' BERT masked language model in eval mode (2 layers,
    width 32): logits of 3 sequences of 12 tokens, one of them padded."""
    module = workloads()
    torch.default_generator.manual_seed(2)
    cpu_model = transformers_module().BertForMaskedLM(module.bert_config()).eval()
    device_model = copy.deepcopy(cpu_model).to("accinte")
    ids = torch.randint(0, cpu_model.config.vocab_size, (3, 12))
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0  # padding: the attention mask takes part

    def forward(model, device):
        ids_on, mask_on = ids.to(device), mask.to(device)

        def step():
            with torch.no_grad():
                return model(input_ids=ids_on, attention_mask=mask_on).logits
        return step

    return forward(device_model, "accinte"), forward(cpu_model, "cpu")


def cnn_training_step() -> Steps:
    """One SGD step (momentum 0.9) of tests/workloads' CNN: two convolutions
    with BatchNorm and ReLU, max and average pooling, dropout, a linear head,
    on 8 images of 3 × 16 × 16."""
    module = workloads()
    torch.default_generator.manual_seed(3)
    cpu_model = module.SmallCNN()
    inputs, targets = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
    return classifier_steps(cpu_model, inputs, targets, lr=0.01, momentum=0.9)


def mlp_training_step() -> Steps:
    """One SGD step of a 3-layer, 1024-wide MLP on a batch of 256."""
    # NB: the CPU's generator only: before chapter 08, seeding accinte too
    # (torch.manual_seed) warns that the device cannot be seeded.
    torch.default_generator.manual_seed(0)
    cpu_model = torch.nn.Sequential(
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10),
    )
    inputs, targets = torch.randn(256, 1024), torch.randint(0, 10, (256,))
    return classifier_steps(cpu_model, inputs, targets, lr=1e-3)


def adam_step(mode: str) -> Steps:
    """One Adam step (``mode``: "fused" or "foreach") over 100 parameters of
    4096 float32 each, gradients given: the optimizer alone, whose cost is
    launches when the parameters are many and small."""
    generator = torch.Generator().manual_seed(0)
    shapes = [(64, 64)] * 100

    def stepper(device):
        parameters = [torch.randn(shape, generator=generator).to(device).requires_grad_()
                      for shape in shapes]
        for parameter in parameters:
            parameter.grad = torch.randn(parameter.shape, generator=generator).to(device)
        optimizer = torch.optim.Adam(parameters, lr=1e-3, **{mode: True})
        return optimizer.step

    return stepper("accinte"), stepper("cpu")


def classifier_steps(cpu_model: torch.nn.Module, inputs: torch.Tensor,
                     targets: torch.Tensor, **sgd: float) -> Steps:
    """One SGD step (``sgd`` its options) of a classifier trained with
    cross-entropy, on accinte and on the CPU."""
    # NB: initialized on the CPU and copied, so both sides train the same
    # model and no stage needs an accinte random generator (chapter 08).
    device_model = copy.deepcopy(cpu_model).to("accinte")

    def trainer(model, x, y):
        optimizer = torch.optim.SGD(model.parameters(), **sgd)

        def step():
            optimizer.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        return step

    return (trainer(device_model, inputs.to("accinte"), targets.to("accinte")),
            trainer(cpu_model, inputs, targets))


def training_step(model: torch.nn.Module, inputs: torch.Tensor, compiled: bool
                  ) -> Callable[[], object]:
    """One SGD step of ``model`` (on the device of ``inputs``), whose loss is
    its output's mean square; with ``compiled``, the model is
    ``torch.compile``'d (chapter 13) and the optimizer step stays eager."""
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    forward = torch.compile(model) if compiled else model

    def step():
        optimizer.zero_grad(set_to_none=True)
        forward(inputs).square().mean().backward()
        optimizer.step()
    return step


def compiled_training_step(make_model: Callable[[], torch.nn.Module],
                           make_inputs: Callable[[], torch.Tensor],
                           against: str) -> Callable[[], Steps]:
    """The compiled training step on accinte against the same step compiled
    on the CPU (``against`` "compiled CPU") or eager on accinte ("eager
    accinte"); or, with "eager CPU", the compiled step on the CPU against the
    eager one: what Inductor itself gains on this machine, the floor of the
    ratio to eager accinte once eager accinte runs as fast as the CPU."""
    def prepare() -> Steps:
        if "13_compile" not in torch_accinte.loaded_chapters:
            raise RuntimeError("torch.compile on accinte needs chapter 13")
        torch.default_generator.manual_seed(0)
        model, inputs = make_model(), make_inputs()
        if against == "eager CPU":
            return (training_step(copy.deepcopy(model), inputs, compiled=True),
                    training_step(model, inputs, compiled=False))
        device_step = training_step(copy.deepcopy(model).to("accinte"),
                                    inputs.to("accinte"), compiled=True)
        if against == "compiled CPU":
            return device_step, training_step(model, inputs, compiled=True)
        return device_step, training_step(copy.deepcopy(model).to("accinte"),
                                          inputs.to("accinte"), compiled=False)
    return prepare


def small_mlp() -> torch.nn.Module:
    """An MLP small enough for launches to matter: 3 layers, 256 wide."""
    return torch.nn.Sequential(
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10),
    )


def transformer_block() -> torch.nn.Module:
    """A transformer encoder layer as PyTorch builds it by default (dropout
    0.1): attention, LayerNorm, a 512-wide MLP."""
    return torch.nn.TransformerEncoderLayer(128, 4, 512, batch_first=True)


def copy_steps(direction: str, nbytes: int, pinned: bool) -> Callable[[], Steps]:
    """A copy of ``nbytes`` between host and device, against a CPU ``copy_``
    of the same bytes. Pinned copies are asynchronous (non_blocking), as a
    data loader issues them; the sample's final synchronize waits for them."""
    def prepare() -> Steps:
        source = torch.rand(nbytes // 4)
        target = torch.empty_like(source)
        host = source.pin_memory() if pinned else source
        device = torch.empty_like(source, device="accinte")
        if direction == "h2d":
            def device_step():
                device.copy_(host, non_blocking=pinned)
        else:
            host_target = torch.empty(source.shape, pin_memory=pinned)

            def device_step():
                host_target.copy_(device, non_blocking=pinned)
        return device_step, (lambda: target.copy_(source))
    return prepare


def strided_copy() -> Steps:
    """Host to device from a transposed (non-contiguous) source: the copy
    must gather the source before it can move it."""
    source = torch.rand(16 * MiB)
    target = torch.empty_like(source)
    strided = source.view(-1, 1024).t()
    device = torch.empty(strided.shape, device="accinte")
    return (lambda: device.copy_(strided)), (lambda: target.copy_(source))


def device_copy(destination: str) -> Callable[[], Steps]:
    """64 MiB from accinte:0 to ``destination``, against a CPU ``copy_``."""
    def prepare() -> Steps:
        source = torch.rand(16 * MiB)
        target = torch.empty_like(source)
        source_dev = source.to("accinte:0")
        target_dev = torch.empty_like(source, device=destination)
        return (lambda: target_dev.copy_(source_dev)), (lambda: target.copy_(source))
    return prepare


def benchmarks() -> List[Benchmark]:
    """Every ratio benchmark: those with goals (issues 12 and 27) first."""
    def time_goal(value: float) -> dict:
        return report.goal(report.TIME, value)

    pinned_goal = report.goal(report.BANDWIDTH, 0.8)
    rows = [
        Benchmark("a + b, 1 element (latency)", report.TIME, latency_add, time_goal(3)),
        Benchmark("a + b, 16M float32", report.TIME, lambda: add(16 * MiB), time_goal(1.3)),
        Benchmark("add(a, b, out=c), 16M float32", report.TIME, lambda: add_out(16 * MiB),
                  time_goal(1.1)),
        Benchmark("a @ b, 1024² float32", report.TIME, matmul, time_goal(1.15)),
        Benchmark("allocate + free 1 MiB", report.TIME, allocate_free, time_goal(1.5)),
        Benchmark("host → device, 64 MiB pinned", report.BANDWIDTH,
                  copy_steps("h2d", 64 * MiB, True), pinned_goal, 64 * MiB),
        Benchmark("device → host, 64 MiB pinned", report.BANDWIDTH,
                  copy_steps("d2h", 64 * MiB, True), pinned_goal, 64 * MiB),
        Benchmark("MLP training step (3 × 1024, batch 256, SGD)", report.TIME,
                  mlp_training_step, time_goal(1.25)),
        # The workloads of tests/workloads, as their users run them.
        Benchmark("GPT-2 training step (4 × 16 tokens, AdamW)", report.TIME,
                  gpt2_training_step, time_goal(1.2), count_fallbacks=True),
        Benchmark(f"GPT-2 generate, {NEW_TOKENS} tokens (2 prompts)", report.TIME,
                  gpt2_generation, time_goal(1.5), count_fallbacks=True),
        Benchmark("BERT forward (3 × 12 tokens, eval)", report.TIME,
                  bert_forward, time_goal(1.2), count_fallbacks=True),
        Benchmark("CNN training step (batch 8, 16², SGD)", report.TIME,
                  cnn_training_step, time_goal(1.3), count_fallbacks=True),
    ]
    for nbytes, size in ((MiB, "1 MiB"), (256 * MiB, "256 MiB")):
        for direction, arrow in (("h2d", "host → device"), ("d2h", "device → host")):
            rows.append(Benchmark(f"{arrow}, {size} pinned", report.BANDWIDTH,
                                  copy_steps(direction, nbytes, True), pinned_goal, nbytes))
            rows.append(Benchmark(f"{arrow}, {size} pageable", report.BANDWIDTH,
                                  copy_steps(direction, nbytes, False), None, nbytes))
    rows += [
        Benchmark("host → device, 64 MiB strided source", report.BANDWIDTH,
                  strided_copy, None, 64 * MiB),
        Benchmark("accinte:0 → accinte:0, 64 MiB", report.BANDWIDTH,
                  device_copy("accinte:0"), None, 64 * MiB),
        Benchmark("accinte:0 → accinte:1, 64 MiB", report.BANDWIDTH,
                  device_copy("accinte:1"), None, 64 * MiB),
        Benchmark("10 elementwise ops on 1K elements", report.TIME, small_op_chain),
        # Chapter 15: what a graph saves of those launches (at least 5×).
        Benchmark("10 elementwise ops on 1K elements, graph replay vs eager accinte",
                  report.TIME, graphed_op_chain, time_goal(1 / 5),
                  baseline="eager accinte", subject="graph replay",
                  baseline_on_device=True),
        # Chapter 09's multi-tensor kernels: one launch per list, or per step.
        Benchmark("Adam step, fused, 100 parameters × 4K float32", report.TIME,
                  lambda: adam_step("fused")),
        Benchmark("Adam step, foreach, 100 parameters × 4K float32", report.TIME,
                  lambda: adam_step("foreach")),
        Benchmark(NATIVE_NEGATION, report.TIME, negate("native")),
        Benchmark(FALLBACK_NEGATION, report.TIME, negate("fallback")),
    ]
    # Chapter 13: what torch.compile gains on accinte (at least 1.5× over
    # eager), and how close it comes to the CPU compiled alike.
    compiled = (
        ("MLP training step (3 × 256, batch 64)", small_mlp, lambda: torch.randn(64, 256)),
        ("transformer block training step (d 128, dropout 0.1, 8 × 32 tokens)", transformer_block,
         lambda: torch.randn(8, 32, 128)),
    )
    for name, make_model, make_inputs in compiled:
        rows.append(Benchmark(f"{name}, compiled vs eager accinte", report.TIME,
                              compiled_training_step(make_model, make_inputs, "eager accinte"),
                              time_goal(1 / 1.5), baseline="eager accinte",
                              baseline_on_device=True))
        rows.append(Benchmark(f"{name}, compiled vs eager on the CPU", report.TIME,
                              compiled_training_step(make_model, make_inputs, "eager CPU"),
                              baseline="eager CPU", subject="compiled CPU"))
        rows.append(Benchmark(f"{name}, compiled on both", report.TIME,
                              compiled_training_step(make_model, make_inputs, "compiled CPU"),
                              time_goal(1.3)))
    return rows


def fallback_calls(step: Callable[[], object]) -> Optional[Dict[str, int]]:
    """The calls of one accinte ``step`` that took the CPU fallback, by
    operator; None before chapter 09, which counts them."""
    record_fallbacks = getattr(torch.accinte, "record_fallbacks", None)
    if record_fallbacks is None:
        return None
    with record_fallbacks() as record:
        step()
        synchronize_all()
    return record.calls


def run_benchmark(benchmark: Benchmark, repeats: int) -> dict:
    """The result of one benchmark; a stage that lacks what it needs skips it."""
    try:
        steps = benchmark.prepare()
        accinte_seconds, cpu_seconds = median_seconds(steps, repeats,
                                                      benchmark.baseline_on_device)
        # NB: counted after the timing, on a warm step, outside the timed region.
        fallbacks = fallback_calls(steps[0]) if benchmark.count_fallbacks else None
    except RuntimeError as error:
        # An earlier stage refuses with an error that says what is missing
        # (an operator, pinned memory): its first sentence goes in the table.
        reason = str(error).strip().splitlines()[0].split(". ")[0]
        return report.entry(benchmark.name, benchmark.measure, None, None,
                            benchmark.goal, benchmark.nbytes, skipped=reason)
    return report.entry(benchmark.name, benchmark.measure, accinte_seconds,
                        cpu_seconds, benchmark.goal, benchmark.nbytes,
                        baseline=benchmark.baseline, fallbacks=fallbacks,
                        subject=benchmark.subject)


# -- The emulator alone --------------------------------------------------------------

def emulator_latencies(program: Path) -> List[dict]:
    """What the emulator's basic operations cost without PyTorch, from
    ``program`` (common/bench/launch_latency.cpp): durations, no ratio."""
    run = subprocess.run([str(program)], capture_output=True, text=True)
    if run.returncode != 0:
        return [report.entry(f"emulator: {program.name}", report.DURATION, None,
                             skipped=f"failed: {run.stderr.strip()}")]
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    return [report.entry(line["name"], report.DURATION, line["seconds"]) for line in lines]


# -- Build and test times ----------------------------------------------------------

def timed_run(commands: List[List[str]], log: Path,
              env: Optional[dict] = None) -> Optional[float]:
    """Seconds ``commands`` took, run one after the other with their output
    in ``log``; None if one failed."""
    start = time.perf_counter()
    with log.open("w") as output:
        for command in commands:
            if subprocess.run(command, cwd=ROOT, env=env, stdout=output,
                              stderr=subprocess.STDOUT).returncode != 0:
                return None
    return time.perf_counter() - start


def duration(name: str, seconds: Optional[float], log: Path) -> dict:
    """The entry of a timed command; a failure points at its log."""
    if seconds is None:
        return report.entry(name, report.DURATION, None,
                            skipped=f"failed, see {log.relative_to(ROOT)}")
    return report.entry(name, report.DURATION, seconds)


def clean_build(stage: str, out: Path, jobs: int) -> dict:
    """Configure and build stage ``stage`` in a new tree, with ccache off:
    what a first build on a fresh clone costs."""
    tree = out / "clean-build"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    log = out / "clean-build.log"
    env = dict(os.environ, CCACHE_DISABLE="1")
    configure = ["cmake", "-S", str(ROOT), "-B", str(tree / "cmake"), "-G", "Ninja",
                 f"-DACCINTE_STAGE_ROOT={tree}", f"-DPython3_EXECUTABLE={sys.executable}"]
    build = ["cmake", "--build", str(tree / "cmake"), "-j", str(jobs),
             "--target", f"stage{stage}"]
    seconds = timed_run([configure, build], log, env)
    # The tree only served the measurement; it would double build/'s size.
    shutil.rmtree(tree, ignore_errors=True)
    return duration(f"clean build of stage {stage} (no ccache, {jobs} jobs)", seconds, log)


def stage_tests(stage: str, out: Path) -> dict:
    """``make test-stage STAGE=stage``, the stage built beforehand, untimed."""
    log = out / f"test-stage{stage}.log"
    make = ["make", "--no-print-directory", f"PYTHON={sys.executable}", f"STAGE={stage}"]
    subprocess.run(make + ["stage"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    seconds = timed_run([make + ["test-stage"]], log)
    return duration(f"tests of stage {stage} (make test-stage)", seconds, log)


def stages_up_to(stage: str) -> List[str]:
    """Stages 01..``stage``, found as the Makefile finds them."""
    chapters = ROOT.glob("chapters/[0-9][0-9]_*/CMakeLists.txt")
    found = sorted(path.parent.name[:2] for path in chapters)
    return [number for number in found if number <= stage]


# -- How busy the machine was ----------------------------------------------------

def machine_busy_seconds() -> float:
    """CPU seconds every process of the machine has used since boot."""
    # The first line of /proc/stat: "cpu user nice system idle iowait irq
    # softirq steal ...", in clock ticks; idle and iowait are not work.
    first_line = Path("/proc/stat").read_text().split("\n")[0]
    ticks = [int(field) for field in first_line.split()[1:]]
    user, nice, system, _, _, irq, softirq = ticks[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def own_busy_seconds() -> float:
    """CPU seconds this process (every thread: the emulator's workers too)
    and the commands it ran have used."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


class OtherLoad:
    """How many CPUs other processes kept busy, on average, since creation.

    A load average would count the benchmarks themselves; this subtracts
    them, so that a run on an idle machine reads 0.
    """

    def __init__(self) -> None:
        self.start = (time.perf_counter(), machine_busy_seconds(), own_busy_seconds())

    def cpus(self) -> float:
        """The average so far."""
        wall, machine, own = self.start
        others = (machine_busy_seconds() - machine) - (own_busy_seconds() - own)
        return max(others, 0.0) / (time.perf_counter() - wall)


# -- Main ------------------------------------------------------------------------------

def progress(index: int, total: int, item: dict) -> None:
    """One line as soon as a benchmark is done: its row of the table."""
    name, *cells = report.table_row(item)
    shown = "; ".join(f"{label} {cell}" for label, cell
                      in zip(report.HEADER[1:], cells) if cell != "—")
    print(f"[{index:2d}/{total}] {name}: {shown}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", required=True, help="the stage on PYTHONPATH, e.g. 08")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "bench")
    parser.add_argument("--repeats", type=int, default=21,
                        help="samples of each side per benchmark (default 21)")
    parser.add_argument("--build-times", action="store_true",
                        help="also time a clean build of the stage and the tests "
                             "of every stage up to it (slow)")
    parser.add_argument("--jobs", type=int, default=2, help="build jobs (--build-times)")
    parser.add_argument("--emulator-latency", type=Path,
                        help="the emulator's latency program, run after the benchmarks")
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)

    other_load = OtherLoad()
    results = {
        "schema": report.SCHEMA,
        "stage": args.stage,
        "chapters": list(torch_accinte.loaded_chapters),
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "other_load": None,  # known at the end
        "repeats": args.repeats,
        "benchmarks": [],
    }
    print(f"Stage {args.stage}, torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"medians of {args.repeats} alternating samples", flush=True)
    rows = benchmarks()
    stages = stages_up_to(args.stage) if args.build_times else []
    total = len(rows) + (1 + len(stages) if args.build_times else 0)
    for index, benchmark in enumerate(rows, 1):
        results["benchmarks"].append(run_benchmark(benchmark, args.repeats))
        progress(index, total, results["benchmarks"][-1])
    if args.emulator_latency:
        for item in emulator_latencies(args.emulator_latency):
            results["benchmarks"].append(item)
            print(f"[emulator] {item['name']}: " + report.table_row(item)[1], flush=True)
    if args.build_times:
        timed = [lambda: clean_build(args.stage, args.out, args.jobs)]
        timed += [lambda stage=stage: stage_tests(stage, args.out) for stage in stages]
        for index, time_it in enumerate(timed, len(rows) + 1):
            results["benchmarks"].append(time_it())
            progress(index, total, results["benchmarks"][-1])
    results["other_load"] = round(other_load.cpus(), 3)
    report.validate(results)

    (args.out / "results.json").write_text(
        json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (args.out / "results.md").write_text(
        report.describe_run(results) + "\n\n" + report.markdown_table(results)
        + "\n" + report.legend(results) + "\n\n" + report.fallback_summary(results),
        encoding="utf-8")
    print(f"Other processes kept {results['other_load']:.2f} CPUs busy on average"
          + (": the machine was busy, these numbers are preliminary"
             if report.is_preliminary(results) else ""))
    print(f"wrote {args.out / 'results.json'} and {args.out / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
