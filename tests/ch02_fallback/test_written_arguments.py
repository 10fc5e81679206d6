"""Chapter 02: every argument an operator writes is written on the device.

``cpu_fallback`` runs the CPU kernel on host copies and copies back the
arguments that the schema marks as written. Each kind of written argument is
checked here (a tensor, an optional tensor, a list of tensors or of optional
tensors), and so are the operators whose kernels write arguments that their
schema does not mark: the batch-norm statistics, which once stayed at 0 and 1
on accinte however long a model trained.
"""

import zlib

import pytest
import torch
import torch_accinte  # noqa: F401

aten = torch.ops.aten


def has_accinte_kernel(operator):
    return torch._C._dispatch_has_kernel_for_dispatch_key(operator, "PrivateUse1")


def to_device(value, device):
    """A copy of `value` (a tensor, or tensors in lists) on `device`."""
    if isinstance(value, torch.Tensor):
        return value.to(device, copy=True)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(item, device) for item in value)
    return value


def assert_same(on_device, on_cpu):
    """Recursively compares results or arguments of a call on accinte with
    the same call on the CPU."""
    if isinstance(on_cpu, torch.Tensor):
        assert on_device.device.type == "accinte"
        torch.testing.assert_close(on_device.cpu(), on_cpu)
    elif isinstance(on_cpu, (list, tuple)):
        assert len(on_device) == len(on_cpu)
        for device_item, cpu_item in zip(on_device, on_cpu):
            assert_same(device_item, cpu_item)
    else:
        assert on_device == on_cpu


def tensor_kind(argument):
    """The kind of a tensor argument: "Tensor", "Tensor?", "Tensor[]",
    "Tensor?[]", or None for an argument that holds no tensor."""
    return {
        "Tensor": "Tensor",
        "Optional[Tensor]": "Tensor?",
        "List[Tensor]": "Tensor[]",
        "List[Optional[Tensor]]": "Tensor?[]",
    }.get(str(argument.type))


def written(argument):
    return argument.alias_info is not None and argument.alias_info.is_write


def add_to_each(tensors, y):
    for x in tensors:
        if x is not None:
            x.add_(y)


# One operator per kind of written argument, defined with only a CPU kernel,
# so that accinte runs it on the global fallback.
WRITING_OPERATORS = {
    "Tensor": ("tensor_(Tensor(a!) x, Tensor y) -> ()",
               lambda x, y: add_to_each([x], y)),
    "Tensor?": ("optional_(Tensor(a!)? x, Tensor y) -> ()",
                lambda x, y: add_to_each([x], y)),
    "Tensor[]": ("list_(Tensor(a!)[] xs, Tensor y) -> ()", add_to_each),
    "Tensor?[]": ("optional_list_(Tensor(a!)?[] xs, Tensor y) -> ()", add_to_each),
}
ARGUMENTS = {
    "Tensor": [torch.zeros(3)],
    "Tensor?": [torch.zeros(3), None],
    "Tensor[]": [[torch.zeros(3), torch.zeros(2, 3)], []],
    "Tensor?[]": [[torch.zeros(3), None, torch.zeros(2, 3)], [None]],
}


@pytest.fixture(scope="module")
def writing_operators():
    library = torch.library.Library("accinte_test_writes", "DEF")
    for schema, kernel in WRITING_OPERATORS.values():
        library.define(schema)
        library.impl(schema.split("(")[0], kernel, "CPU")
    yield torch.ops.accinte_test_writes
    library._destroy()


def test_every_kind_of_written_aten_argument_is_covered():
    # NB: torch 2.13's ATen writes tensors and lists of tensors; the other
    # kinds (custom operators may use them) are covered all the same.
    kinds = set()
    for schema in torch._C._jit_get_all_schemas():
        if schema.name.startswith("aten::"):
            kinds |= {tensor_kind(a) for a in schema.arguments if written(a)}
    kinds.discard(None)
    assert kinds and kinds <= set(WRITING_OPERATORS)


@pytest.mark.parametrize("kind", sorted(WRITING_OPERATORS))
def test_each_kind_of_written_argument_is_written_back(kind, writing_operators):
    name = WRITING_OPERATORS[kind][0].split("(")[0]
    operator = getattr(writing_operators, name)
    assert not has_accinte_kernel(f"accinte_test_writes::{name}")
    for argument in ARGUMENTS[kind]:
        on_cpu = to_device(argument, "cpu")
        operator(on_cpu, torch.ones(3))
        on_device = to_device(argument, "accinte")
        operator(on_device, torch.ones(3, device="accinte"))
        assert_same(on_device, on_cpu)


# --- Operators with batch-norm statistics ----------------------------------

def batch_norm_argument(name):
    """A CPU value for an argument of the batch-norm operators, by name:
    a batch of 4 samples of 3 channels of length 5."""
    generator = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    per_channel = lambda: torch.rand(3, generator=generator) + 0.5  # noqa: E731
    values = {
        "input": lambda: torch.randn(4, 3, 5, generator=generator),
        "grad_out": lambda: torch.randn(4, 3, 5, generator=generator),
        "grad_output": lambda: torch.randn(4, 3, 5, generator=generator),
        "weight": per_channel,
        "bias": per_channel,
        "running_mean": lambda: torch.randn(3, generator=generator) * 0.1,
        "running_var": per_channel,
        "save_mean": per_channel,
        "save_invstd": per_channel,
        "save_var": per_channel,
        "save_var_transform": per_channel,
        "mean": lambda: torch.randn(2, 3, generator=generator),
        "invstd": lambda: torch.rand(2, 3, generator=generator) + 0.5,
        "count": lambda: 10,
        "counts": lambda: torch.tensor([10.0, 10.0]),
        "training": lambda: True,
        "train": lambda: True,
        "update": lambda: True,
        "use_input_stats": lambda: True,
        "cudnn_enabled": lambda: False,
        "momentum": lambda: 0.1,
        "exponential_average_factor": lambda: 0.1,
        "eps": lambda: 1e-5,
        "epsilon": lambda: 1e-5,
        "output_mask": lambda: [True, True, True],
        "impl_index": lambda: 0,
        "reserve": lambda: torch.empty(0),
        "reserveSpace": lambda: torch.empty(0),
        "reservedSpace": lambda: torch.empty(0),
        "out3": lambda: torch.empty(0, dtype=torch.uint8),  # a reserve
    }
    # NB: an out= argument (out, out0, ...) may be any tensor: it is resized.
    assert name in values or name.startswith("out"), (
        f"no test value for a batch-norm argument named {name!r}")
    return values.get(name, lambda: torch.empty(0))()


def running_statistics_operators():
    """Every aten overload with running statistics that it does not mark as
    written: whether it writes them is what the test finds out."""
    found = []
    for schema in torch._C._jit_get_all_schemas():
        if not schema.name.startswith("aten::"):
            continue
        if any(a.name in ("running_mean", "running_var") and not written(a)
               for a in schema.arguments):
            found.append(schema)
    return sorted(found, key=lambda s: (s.name, s.overload_name))


def overload_of(schema):
    packet = getattr(aten, schema.name.split("::")[1])
    return getattr(packet, schema.overload_name or "default")


@pytest.mark.parametrize("schema", running_statistics_operators(),
                         ids=lambda s: f"{s.name[6:]}.{s.overload_name or 'default'}")
def test_running_statistics_are_written_as_on_the_cpu(schema):
    overload = overload_of(schema)
    arguments = {a.name: batch_norm_argument(a.name) for a in schema.arguments}
    on_cpu = {name: to_device(value, "cpu") for name, value in arguments.items()}
    on_device = {name: to_device(value, "accinte") for name, value in arguments.items()}
    try:
        cpu_result = overload(**on_cpu)
    except NotImplementedError as error:
        # cudnn_batch_norm, batch_norm_gather_stats and the like: CUDA only.
        # The fallback has no CPU kernel to run either, and says so.
        assert "Could not run" in str(error)
        with pytest.raises(NotImplementedError, match="Could not run"):
            overload(**on_device)
        return
    device_result = overload(**on_device)
    assert_same(device_result, cpu_result)
    for argument in schema.arguments:  # every argument, written or not
        assert_same(on_device[argument.name], on_cpu[argument.name])


def test_native_batch_norm_writes_its_running_statistics():
    # NB: the operator of the report; nn.BatchNorm reaches it through the
    # composite batch_norm and _batch_norm_impl_index. Its schema does not
    # mark the statistics as written. It takes the fallback until chapter
    # 09 gives it a native kernel; both must write them.
    for operator in ("aten::batch_norm_update_stats", "aten::_native_batch_norm_legit"):
        assert not has_accinte_kernel(operator)
    x = torch.randn(4, 3, 5)
    mean, var = torch.zeros(3), torch.ones(3)
    expected = aten.native_batch_norm(x, None, None, mean, var, True, 0.1, 1e-5)
    device_mean = torch.zeros(3, device="accinte")
    device_var = torch.ones(3, device="accinte")
    result = aten.native_batch_norm(x.to("accinte"), None, None, device_mean, device_var,
                                    True, 0.1, 1e-5)
    assert_same(result, expected)
    assert not torch.equal(mean, torch.zeros(3))  # the CPU did update them
    assert_same(device_mean, mean)
    assert_same(device_var, var)


@pytest.mark.parametrize("training", [True, False])
def test_native_batch_norm_legit_writes_its_statistics(training):
    x = torch.randn(4, 3, 5)
    mean, var = torch.zeros(3), torch.ones(3)
    expected = aten._native_batch_norm_legit(x, None, None, mean, var, training, 0.1, 1e-5)
    device_mean = torch.zeros(3, device="accinte")
    device_var = torch.ones(3, device="accinte")
    result = aten._native_batch_norm_legit(x.to("accinte"), None, None, device_mean,
                                           device_var, training, 0.1, 1e-5)
    assert_same(result, expected)
    assert_same(device_mean, mean)
    assert_same(device_var, var)


@pytest.mark.parametrize("module,shape", [
    (torch.nn.BatchNorm1d, (8, 3)),
    (torch.nn.BatchNorm1d, (8, 3, 5)),
    (torch.nn.BatchNorm2d, (4, 3, 5, 5)),
])
def test_batch_norm_modules_track_their_statistics(module, shape):
    on_cpu = module(3)
    on_device = module(3).to("accinte")
    generator = torch.Generator().manual_seed(0)
    batches = [torch.randn(shape, generator=generator) * (step + 1) + step
               for step in range(3)]
    for batch in batches:  # training mode
        assert_same(on_device(batch.to("accinte")), on_cpu(batch))
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        assert_same(getattr(on_device, name), getattr(on_cpu, name))
    assert not torch.equal(on_cpu.running_mean, torch.zeros(3))
    on_cpu.eval()
    on_device.eval()
    assert_same(on_device(batches[0].to("accinte")), on_cpu(batches[0]))


# --- Lists of written tensors ----------------------------------------------

def test_foreach_in_place_operators_write_every_tensor():
    # NB: their composite kernels loop over per-tensor operators; whichever
    # route each takes, every tensor of the list is written.
    values = [torch.randn(3), torch.randn(2, 2), torch.randn(())]
    others = [torch.randn(3), torch.randn(2, 2), torch.randn(())]
    on_device = to_device(values, "accinte")
    torch._foreach_add_(values, others, alpha=2)
    torch._foreach_add_(on_device, to_device(others, "accinte"), alpha=2)
    torch._foreach_mul_(values, 3.0)
    torch._foreach_mul_(on_device, 3.0)
    torch._foreach_addcmul_(values, others, others, value=0.5)
    torch._foreach_addcmul_(on_device, to_device(others, "accinte"),
                            to_device(others, "accinte"), value=0.5)
    assert_same(on_device, values)


def test_amp_unscale_writes_its_list_and_its_flag():
    # _amp_foreach_non_finite_check_and_unscale_(Tensor(a!)[] self,
    # Tensor(b!) found_inf, Tensor inv_scale): a list and a tensor written.
    # NB: it takes the fallback until chapter 09 gives it a native kernel
    # (the run of stage 02 to 08 checks the fallback); both must write them.
    grads = [torch.tensor([1.0, float("inf")]), torch.ones(2, 2)]
    on_device = to_device(grads, "accinte")
    found, device_found = torch.zeros(1), torch.zeros(1, device="accinte")
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.tensor([0.5]))
    torch._amp_foreach_non_finite_check_and_unscale_(
        on_device, device_found, torch.tensor([0.5], device="accinte"))
    assert found.item() == 1.0
    assert_same(on_device, grads)
    assert_same(device_found, found)


def test_fused_adam_writes_every_list():
    # _fused_adam_(Tensor(a!)[] self, Tensor(b!)[] grads, Tensor(c!)[]
    # exp_avgs, ...): several written lists in one call. As above, the
    # fallback's until chapter 09, a native kernel's after.
    generator = torch.Generator().manual_seed(0)
    state = [[torch.randn(4, generator=generator), torch.randn(2, 3, generator=generator)]
             for _ in range(4)]
    state[3] = [tensor.abs() for tensor in state[3]]  # exp_avg_sqs >= 0
    steps = [torch.tensor(1.0), torch.tensor(1.0)]
    on_device = to_device(state, "accinte")
    device_steps = to_device(steps, "accinte")
    options = dict(lr=0.1, beta1=0.9, beta2=0.999, weight_decay=0.01, eps=1e-8,
                   amsgrad=False, maximize=False)
    params, grads, exp_avgs, exp_avg_sqs = state
    torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, **options)
    torch._fused_adam_(*on_device, [], device_steps, **options)
    assert_same(on_device, state)


# --- Host tensors are inputs only ------------------------------------------

SAME_DEVICE = ("Expected all tensors to be on the same device, but found at least "
               "two devices, accinte:0 and cpu!")


@pytest.mark.parametrize("write", [
    lambda d, host: torch.atan2(d, d, out=host),
    lambda d, host: torch.add(d, d, out=host),
    lambda d, host: host.atan2_(d),
    lambda d, host: host.add_(d),
], ids=["atan2.out", "add.out", "atan2_", "add_"])
def test_a_host_scalar_is_never_written(write):
    # NB: a 0-dim CPU tensor may be an input, as for CUDA; written, it once
    # stayed unchanged (add_), or failed with NotImplementedError (out=).
    assert not has_accinte_kernel("aten::atan2.out")
    host = torch.tensor(0.5)
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        write(torch.tensor(1.5, device="accinte"), host)
    assert host.item() == 0.5


def test_a_host_scalar_as_input_still_works():
    host = torch.tensor(2.0)
    device = torch.tensor([1.0, 3.0], device="accinte")
    assert_same(torch.atan2(device, host), torch.atan2(device.cpu(), host))
    assert_same(device.atan2_(host), torch.atan2(torch.tensor([1.0, 3.0]), host))


def test_a_host_tensor_is_filled_with_a_device_scalar():
    # As CUDA's fill_ does: the value is read with item().
    host = torch.zeros(3)
    host.fill_(torch.tensor(4.0, device="accinte"))
    assert torch.equal(host, torch.full((3,), 4.0))
    host = torch.tensor(0.0)
    host.fill_(torch.tensor(2.5, device="accinte:1"))
    assert host.item() == 2.5
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor"):
        torch.zeros(3).fill_(torch.ones(1, device="accinte"))


def test_a_tensor_is_filled_with_one_of_its_own_elements():
    x = torch.arange(5.0, device="accinte")
    x.fill_(x[2])
    assert torch.equal(x.cpu(), torch.full((5,), 2.0))
    y = torch.arange(6.0, device="accinte").reshape(2, 3)
    y[1].fill_(y[0, 1])
    assert torch.equal(y.cpu(), torch.tensor([[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]]))
    # The other fills that read a 0-dim value first, as on the CPU.
    z = torch.arange(5.0, device="accinte")
    z.masked_fill_(z > 2, z[1])
    assert torch.equal(z.cpu(), torch.tensor([0.0, 1.0, 2.0, 1.0, 1.0]))
    w = torch.arange(5.0, device="accinte")
    w.index_fill_(0, torch.tensor([0], device="accinte"), w[3])
    assert torch.equal(w.cpu(), torch.tensor([3.0, 1.0, 2.0, 3.0, 4.0]))


def test_a_device_tensor_is_filled_from_another_device():
    x = torch.zeros(3, device="accinte:0")
    x.fill_(torch.tensor(7.0, device="accinte:1"))
    assert x.device == torch.device("accinte:0")
    assert torch.equal(x.cpu(), torch.full((3,), 7.0))
    x.fill_(torch.tensor(-1.0))  # a host scalar
    assert torch.equal(x.cpu(), torch.full((3,), -1.0))

