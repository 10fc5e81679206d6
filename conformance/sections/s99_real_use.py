"""Real use: what a training script does, each check naming the chapter
whose mechanism it needs.

- ``Module.to`` modifies the module in place (PyTorch's documentation of
  ``nn.Module.to``): the Parameter objects survive a move to the device,
  so an optimizer built before the move trains the moved module, as on
  CUDA.
- BatchNorm's running statistics, in training and in evaluation, and
  LSTM/GRU forward and backward, against the CPU.
- ``DataLoader(pin_memory=True)`` gives pinned batches that reach the
  device.
- OpInfo agreement over PyTorch's ``op_db`` (see :func:`op_db_agrees`):
  float32, a few samples per operator, random operators left out. On this
  backend it needs chapter 02 (every operator reaches the CPU's kernel
  through the fallback) and takes tens of seconds, half of them importing
  ``op_db``.
"""

import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .._api import Section, Skip
from .._helpers import COPIES, DEVICE, OPERATORS, PINNED

SECTION = Section(
    chapter="real", title="Real use", requires=(DEVICE, COPIES, OPERATORS),
    missing="a training script's building block does not behave on the device as on the CPU")


def _fresh(seed, make):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make()


@SECTION.check(chapter="01", missing="Module.to does not keep the Parameter objects "
                                     "(torch._has_compatible_shallow_copy_type excludes the device)")
def module_to_keeps_parameters(ctx):
    model = _fresh(0, lambda: torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2)))
    model[1].weight = torch.nn.Parameter(torch.zeros(2, 3))
    before = list(model.parameters())
    moved = model.to(ctx.dev())
    assert moved is model, "Module.to returned another module"
    after = list(model.parameters())
    assert all(a is b for a, b in zip(before, after)), \
        "Module.to replaced the Parameter objects instead of moving them in place"
    assert all(p.device == ctx.dev() for p in after), "a parameter did not move"


@SECTION.check(chapter="02", missing="an optimizer built before Module.to does not train the moved module")
def optimizer_built_before_the_move(ctx):
    make = lambda: torch.nn.Linear(4, 2)  # noqa: E731
    model, reference = _fresh(1, make), _fresh(1, make)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.5, momentum=0.9)
    model.to(ctx.dev())
    x = torch.linspace(-1, 1, 12).reshape(3, 4)
    for _ in range(2):
        optimizer.zero_grad()
        model(x.to(ctx.dev())).square().sum().backward()
        optimizer.step()
        reference_optimizer.zero_grad()
        reference(x).square().sum().backward()
        reference_optimizer.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert p.device == ctx.dev(), f"{name} left the device"
        torch.testing.assert_close(p.detach().cpu(), q.detach(),
                                   msg=f"{name} after two SGD steps differs from the CPU's")


@SECTION.check(chapter="02", missing="BatchNorm's running statistics on the device differ from the CPU's")
def batchnorm_statistics(ctx):
    make = lambda: torch.nn.BatchNorm2d(3, momentum=0.3)  # noqa: E731
    reference, model = make(), make().to(ctx.dev())
    batches = _fresh(2, lambda: [torch.randn(4, 3, 5, 5) * 2 + 1 for _ in range(3)])
    for x in batches:
        torch.testing.assert_close(model(x.to(ctx.dev())).cpu(), reference(x), msg="train output")
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(model, name).cpu(), getattr(reference, name),
                                   msg=f"{name} after three training batches")
    model.eval(), reference.eval()
    torch.testing.assert_close(model(batches[0].to(ctx.dev())).cpu(), reference(batches[0]),
                               msg="eval output (running statistics)")
    torch.testing.assert_close(model.running_mean.cpu(), reference.running_mean,
                               msg="eval changed running_mean")


@SECTION.check(chapter="09", missing="nn.LSTM/nn.GRU on the device need kernels for the fused "
                                     "recurrent cells (_thnn_fused_lstm_cell, _thnn_fused_gru_cell)")
def recurrent_layers(ctx):
    for kind in (torch.nn.LSTM, torch.nn.GRU):
        reference = _fresh(3, lambda: kind(5, 4, num_layers=2, batch_first=True))
        model = _fresh(3, lambda: kind(5, 4, num_layers=2, batch_first=True)).to(ctx.dev())
        x = _fresh(4, lambda: torch.randn(3, 6, 5))
        out, _ = reference(x)
        got, _ = model(x.to(ctx.dev()))
        torch.testing.assert_close(got.detach().cpu(), out.detach(), msg=f"{kind.__name__} output")
        out.sum().backward()
        got.sum().backward()
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad, msg=f"{kind.__name__} gradient of {name}")


@SECTION.check(chapter="07", missing="DataLoader(pin_memory=True) does not pin batches for the device "
                                     "(no pinned host allocator)", requires=(PINNED,))
def dataloader_pins_batches(ctx):
    data = torch.utils.data.TensorDataset(torch.arange(24.0).reshape(12, 2), torch.arange(12))
    loader = torch.utils.data.DataLoader(data, batch_size=4, pin_memory=True)
    seen = []
    for x, y in loader:
        assert x.is_pinned() and y.is_pinned(), "DataLoader(pin_memory=True) gave unpinned batches"
        on_device = x.to(ctx.dev(), non_blocking=True)
        seen.append(on_device.cpu())
    torch.testing.assert_close(torch.cat(seen), data.tensors[0], rtol=0, atol=0)


#: Samples per operator: the first ones an OpInfo gives (its simplest).
OP_DB_SAMPLES = 3


def _to_device(value, device):
    if isinstance(value, torch.Tensor):
        return value.detach().to(device, copy=True)
    return value


def _compare(got, want, where):
    """Compares an operator's device result with its CPU result, leaf by
    leaf; returns None or one line saying what differs."""
    got_leaves, got_spec = torch.utils._pytree.tree_flatten(got)
    want_leaves, want_spec = torch.utils._pytree.tree_flatten(want)
    if got_spec != want_spec:
        return f"{where}: result structure {got_spec} differs from the CPU's {want_spec}"
    for got_leaf, want_leaf in zip(got_leaves, want_leaves):
        if isinstance(want_leaf, torch.Tensor):
            if not isinstance(got_leaf, torch.Tensor):
                return f"{where}: a {type(got_leaf).__name__} where the CPU gives a tensor"
            if want_leaf.layout != torch.strided:
                continue
            try:
                torch.testing.assert_close(got_leaf.cpu(), want_leaf, equal_nan=True,
                                           check_device=False, rtol=1e-4, atol=1e-5)
            except AssertionError as error:
                return f"{where}: {str(error).splitlines()[0]}"
        elif got_leaf != want_leaf and not (want_leaf != want_leaf):  # NaN scalars agree
            return f"{where}: {got_leaf!r} where the CPU gives {want_leaf!r}"
    return None


def _tensors(value):
    return [leaf for leaf in torch.utils._pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def _sample_tensors(sample):
    return _tensors([sample.input, list(sample.args), dict(sample.kwargs)])


class _Draws(TorchDispatchMode):
    """Notes whether an ATen operator tagged ``nondeterministic_seeded``
    (ATen's mark for an operator that draws random numbers) runs."""

    drew = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.drew = True
        return func(*args, **(kwargs or {}))


def _draws(op, sample):
    """Runs ``op`` on ``sample`` on the CPU; returns its result and whether
    it drew random numbers (the OpInfos of random operators reseed the
    generator themselves, so two runs agree and cannot tell)."""
    with _Draws() as mode:
        result = op(sample.input, *sample.args, **sample.kwargs)
    return result, mode.drew


# NB: five deadlines: it imports op_db and runs hundreds of operators, half
# a minute on an idle machine of two cores and four times that on a loaded
# one, where one deadline failed it (`make test`, two suites side by side).
@SECTION.check(chapter="02", missing="operators of PyTorch's op_db disagree with the CPU on the device "
                                     "(names in the message)", deadlines=5)
def op_db_agrees(ctx):
    """Every float32 operator of ``op_db`` gives the CPU's results on the
    device.

    The subset: ``op_db``'s OpInfos whose CPU dtypes include float32,
    except factory functions (their samples make no input to compare), those
    marked ``has_nondeterministic_output``, and ``as_strided*`` (their
    samples read a storage beyond the tensor, which a copy to the CPU does
    not carry). Samples are made on the device, as PyTorch's device tests
    make them, and copied to the CPU for the reference; each operator is
    checked on its first ``OP_DB_SAMPLES`` samples that run on the CPU with
    strided tensors only (the kit checks dense tensors; a sample the CPU
    refuses is not used). An operator whose CPU run calls an ATen operator tagged
    ``nondeterministic_seeded`` draws random numbers and is left out: the generator
    section checks those. The device must give the CPU's values
    (``rtol=1e-4, atol=1e-5``, NaN equal to NaN) and the same result
    structure, and must not raise where the CPU does not; the message names
    every operator that fails.
    """
    import warnings
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except Exception as error:  # the test helpers are not installed
        raise Skip(f"torch.testing._internal is not importable: {error}")
    started = time.perf_counter()
    failures, checked, random = [], 0, 0
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")
        for op in op_db:
            if (torch.float32 not in op.supported_dtypes("cpu") or op.is_factory_function
                    or op.has_nondeterministic_output or op.name.startswith("as_strided")):
                continue
            name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
            try:
                samples = iter(op.sample_inputs(ctx.dev(), torch.float32, requires_grad=False))
            except Exception as error:
                failures.append(f"{name}: its samples cannot be made on the device: "
                                f"{type(error).__name__}")
                continue
            used, problem = 0, None
            while used < OP_DB_SAMPLES and problem is None:
                try:
                    sample = next(samples)
                except StopIteration:
                    break
                except Exception as error:
                    problem = f"{name}: a sample cannot be made on the device: {type(error).__name__}"
                    break
                if any(t.layout != torch.strided for t in _sample_tensors(sample)):
                    continue
                try:
                    reference = sample.transform(lambda t: _to_device(t, "cpu"))
                    want, drew = _draws(op, reference)
                except Exception:
                    continue
                if drew:
                    random += 1
                    break
                if any(t.layout != torch.strided for t in _tensors(want)):
                    continue
                used += 1
                try:
                    got = op(sample.input, *sample.args, **sample.kwargs)
                    torch.accelerator.synchronize()
                    problem = _compare(got, want, name)
                except Exception as error:
                    text = str(error).splitlines()[0] if str(error) else ""
                    problem = f"{name}: {type(error).__name__}: {text[:120]}"
            if problem:
                failures.append(problem)
            checked += used > 0
    elapsed = time.perf_counter() - started
    shown = "; ".join(failures[:10])
    if len(failures) > 10:
        shown += "; and " + ", ".join(problem.split(":")[0] for problem in failures[10:])
    assert not failures, (
        f"{len(failures)} operators fail ({checked} compared, {random} random ones left out, "
        f"{elapsed:.0f} s): {shown}")
