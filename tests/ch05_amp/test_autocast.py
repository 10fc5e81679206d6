"""Chapter 05: autocast on accinte.

Where a test needs to know what an operator *received*, it records the
operators that reach the backend with a ``TorchDispatchMode``: the Python
dispatch key sits below ``AutocastPrivateUse1``, so the mode sees the
arguments after autocast cast them, which the result's dtype alone does not
always show (``cat`` of float16 and float32 is float32 with or without
autocast).
"""

import pytest
import torch
import torch.nn.functional as F
import torch_accinte  # noqa: F401
from torch.utils._python_dispatch import TorchDispatchMode
from torch_accinte import _C

LOWER = [torch.float16, torch.bfloat16]


class RecordInputs(TorchDispatchMode):
    """Records (operator name, dtypes of its tensor arguments)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        dtypes = []
        for arg in list(args) + list(kwargs.values()):
            for item in arg if isinstance(arg, (list, tuple)) else [arg]:
                if isinstance(item, torch.Tensor):
                    dtypes.append(item.dtype)
        self.calls.append((func.overloadpacket.__name__, dtypes))
        return func(*args, **kwargs)

    def inputs_of(self, name):
        found = [dtypes for op, dtypes in self.calls if op == name]
        assert found, f"aten::{name} never reached the backend: {self.calls}"
        return found


def sample(*shape, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator).to(dtype)


def tolerance(dtype):
    # one lower-precision rounding of inputs and result, relative to 1
    return {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else \
           {"atol": 2e-3, "rtol": 2e-3}


# ---------------------------------------------------------------------------
# lower precision: (name, function, CPU float32 inputs, aten op that must run)
MATMULS = {
    "mm": (torch.mm, lambda: (sample(4, 5), sample(5, 3, seed=1)), "mm"),
    "bmm": (torch.bmm, lambda: (sample(2, 4, 5), sample(2, 5, 3, seed=1)), "bmm"),
    "addmm": (torch.addmm,
              lambda: (sample(4, 3, seed=2), sample(4, 5), sample(5, 3, seed=1)),
              "addmm"),
    "baddbmm": (torch.baddbmm,
                lambda: (sample(2, 4, 3, seed=2), sample(2, 4, 5),
                         sample(2, 5, 3, seed=1)),
                "baddbmm"),
    "matmul": (torch.matmul, lambda: (sample(4, 5), sample(5, 3, seed=1)), "mm"),
    "linear": (F.linear,
               lambda: (sample(4, 5), sample(3, 5, seed=1), sample(3, seed=2)),
               "addmm"),
    "conv1d": (F.conv1d, lambda: (sample(1, 2, 8), sample(3, 2, 3, seed=1)),
               "convolution"),
    "conv2d": (F.conv2d, lambda: (sample(1, 2, 6, 6), sample(3, 2, 3, 3, seed=1)),
               "convolution"),
    "conv3d": (F.conv3d,
               lambda: (sample(1, 2, 4, 4, 4), sample(3, 2, 2, 2, 2, seed=1)),
               "convolution"),
}


@pytest.mark.parametrize("dtype", LOWER, ids=str)
@pytest.mark.parametrize("name", MATMULS)
def test_lower_precision_policy(name, dtype):
    function, make_inputs, aten_name = MATMULS[name]
    inputs = make_inputs()
    with RecordInputs() as record:
        with torch.autocast("accinte", dtype=dtype):
            result = function(*[t.to("accinte") for t in inputs])
    assert result.device.type == "accinte"
    assert result.dtype == dtype
    # the kernel below autocast got only lower-precision tensors
    for dtypes in record.inputs_of(aten_name):
        assert set(dtypes) == {dtype}
    # and computes what the CPU computes from the same rounded inputs
    expected = function(*[t.to(dtype).float() for t in inputs])
    torch.testing.assert_close(result.cpu().float(), expected, **tolerance(dtype))


# ---------------------------------------------------------------------------
# float32: functions of one lower-precision accinte tensor (and CPU extras)
def _targets():
    return torch.tensor([0, 2, 1, 4])


FP32 = {
    "softmax": lambda x: torch.softmax(x, dim=-1),
    "log_softmax": lambda x: F.log_softmax(x, dim=-1),
    "layer_norm": lambda x: F.layer_norm(x, (5,)),
    "group_norm": lambda x: F.group_norm(x.reshape(2, 10), 2),
    "norm": lambda x: torch.norm(x),
    "cross_entropy": lambda x: F.cross_entropy(x, _targets().to(x.device)),
    "nll_loss": lambda x: F.nll_loss(x, _targets().to(x.device)),
    "mse_loss": lambda x: F.mse_loss(x, x.flip(0)),
    "exp": torch.exp,
    "log": lambda x: torch.log(x.abs()),
    "pow": lambda x: torch.pow(x, 2),
    "cumsum": lambda x: torch.cumsum(x, 1),
    "sum": torch.sum,
    "prod": lambda x: torch.prod(x, 1),
}


@pytest.mark.parametrize("dtype", LOWER, ids=str)
@pytest.mark.parametrize("name", FP32)
def test_float32_policy(name, dtype):
    function = FP32[name]
    cpu = sample(4, 5, dtype=dtype)
    with torch.autocast("accinte", dtype=dtype):
        result = function(cpu.to("accinte"))
    assert result.dtype == torch.float32
    torch.testing.assert_close(result.cpu(), function(cpu.float()))


@pytest.mark.parametrize("dtype", LOWER, ids=str)
def test_float32_policy_keeps_an_explicit_dtype(dtype):
    x = sample(4, 5, dtype=dtype).to("accinte")
    with torch.autocast("accinte", dtype=dtype):
        assert torch.sum(x, dtype=dtype).dtype == dtype
        assert torch.softmax(x, dim=0, dtype=torch.float64).dtype == torch.float64


# ---------------------------------------------------------------------------
# promotion to the widest floating-point input
@pytest.mark.parametrize("dtype", LOWER, ids=str)
def test_promote_policy(dtype):
    wide = sample(3, 4)
    narrow = sample(3, 4, dtype=dtype, seed=1)
    a, b = wide.to("accinte"), narrow.to("accinte")
    index = torch.tensor([2, 0]).to("accinte")
    with RecordInputs() as record:
        with torch.autocast("accinte", dtype=dtype):
            results = {
                "cat": torch.cat([a, b]),
                "stack": torch.stack([a, b]),
                "addcmul": torch.addcmul(a, b, b),
                "index_put": a.index_put((index,), b[:2]),
            }
    for name, result in results.items():
        assert result.dtype == torch.float32, name
        for dtypes in record.inputs_of(name):
            assert torch.float16 not in dtypes and torch.bfloat16 not in dtypes, name
    torch.testing.assert_close(results["cat"].cpu(), torch.cat([wide, narrow.float()]))
    torch.testing.assert_close(results["addcmul"].cpu(),
                               torch.addcmul(wide, narrow.float(), narrow.float()))
    torch.testing.assert_close(results["index_put"].cpu(),
                               wide.index_put((index.cpu(),), narrow[:2].float()))
    # all inputs narrow: promotion keeps the lower precision
    with torch.autocast("accinte", dtype=dtype):
        assert torch.cat([b, b]).dtype == dtype


def test_index_put_needs_promotion_without_autocast():
    # why index_put is on the promote list: it refuses mixed dtypes
    a = torch.zeros(3, 4, device="accinte")
    b = torch.ones(2, 4, dtype=torch.float16, device="accinte")
    index = torch.tensor([2, 0], device="accinte")
    with pytest.raises(RuntimeError, match="dtype"):
        a.index_put((index,), b)


# ---------------------------------------------------------------------------
# what autocast leaves alone
def test_other_operators_fall_through():
    a, b = sample(3, 4).to("accinte"), sample(3, 4, seed=1).to("accinte")
    with torch.autocast("accinte", dtype=torch.float16):
        assert (a + b).dtype == torch.float32
        assert torch.relu(a).dtype == torch.float32
        assert (a.half() * 2).dtype == torch.float16
    assert "AutocastPrivateUse1: fallthrough" in \
        torch._C._dispatch_dump_table("aten::add.Tensor")


def test_double_integer_and_cpu_tensors_are_not_cast():
    with torch.autocast("accinte", dtype=torch.float16):
        d = sample(3, 3).double().to("accinte")
        assert torch.mm(d, d).dtype == torch.float64
        i = torch.arange(9).reshape(3, 3).to("accinte")
        assert torch.mm(i, i).dtype == torch.int64
        c = sample(3, 3)
        assert torch.mm(c, c).dtype == torch.float32  # CPU autocast is off


def test_binary_cross_entropy_is_refused_under_autocast():
    p = torch.sigmoid(sample(4)).to("accinte")
    target = torch.tensor([0.0, 1.0, 1.0, 0.0]).to("accinte")
    with torch.autocast("accinte", dtype=torch.float16):
        with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
            F.binary_cross_entropy(p, target)
        assert F.binary_cross_entropy_with_logits(p.half(), target).dtype == torch.float32
    # outside the region it is an ordinary operator
    torch.testing.assert_close(F.binary_cross_entropy(p, target).cpu(),
                               F.binary_cross_entropy(p.cpu(), target.cpu()))


# ---------------------------------------------------------------------------
# the autocast state: enabling, dtypes, nesting
def test_device_module_reports_the_supported_dtypes():
    assert torch.accinte.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.accinte.is_bf16_supported()
    assert torch.amp.is_autocast_available("accinte")


@pytest.mark.parametrize("dtype", LOWER, ids=str)
def test_state_inside_and_outside_a_region(dtype):
    default = torch.get_autocast_dtype("accinte")
    assert not torch.is_autocast_enabled("accinte")
    with torch.autocast("accinte", dtype=dtype):
        assert torch.is_autocast_enabled("accinte")
        assert torch.get_autocast_dtype("accinte") == dtype
        assert not torch.is_autocast_enabled("cpu")
    assert not torch.is_autocast_enabled("accinte")
    assert torch.get_autocast_dtype("accinte") == default


def test_set_autocast_dtype_is_the_default_of_a_region():
    default = torch.get_autocast_dtype("accinte")
    a = sample(2, 2).to("accinte")
    try:
        torch.set_autocast_dtype("accinte", torch.bfloat16)
        assert torch.get_autocast_dtype("accinte") == torch.bfloat16
        with torch.autocast("accinte"):
            assert torch.mm(a, a).dtype == torch.bfloat16
    finally:
        torch.set_autocast_dtype("accinte", default)


def test_nesting_and_disabling_restore_the_outer_region():
    a = sample(3, 3).to("accinte")
    with torch.autocast("accinte", dtype=torch.float16):
        assert torch.mm(a, a).dtype == torch.float16
        with torch.autocast("accinte", dtype=torch.bfloat16):
            assert torch.mm(a, a).dtype == torch.bfloat16
        assert torch.mm(a, a).dtype == torch.float16
        with torch.autocast("accinte", enabled=False):
            assert not torch.is_autocast_enabled("accinte")
            assert torch.mm(a, a).dtype == torch.float32
            # float16 results from the outer region are used as they are
            h = torch.mm(a, a).half()
            assert torch.mm(h, h).dtype == torch.float16
        assert torch.is_autocast_enabled("accinte")
        assert torch.get_autocast_dtype("accinte") == torch.float16
        assert torch.mm(a, a).dtype == torch.float16
    assert torch.mm(a, a).dtype == torch.float32


def test_autocast_as_a_decorator():
    @torch.autocast("accinte", dtype=torch.bfloat16)
    def product(x):
        return x @ x

    a = sample(3, 3).to("accinte")
    assert product(a).dtype == torch.bfloat16
    assert not torch.is_autocast_enabled("accinte")


def test_unsupported_dtype_warns_and_disables():
    a = sample(3, 3).to("accinte")
    with pytest.warns(UserWarning, match="Disabling autocast"):
        region = torch.autocast("accinte", dtype=torch.float64)
    with region:
        assert not torch.is_autocast_enabled("accinte")
        assert torch.mm(a, a).dtype == torch.float32
    assert not torch.is_autocast_enabled("accinte")


# ---------------------------------------------------------------------------
# the cast cache
def _weight_casts(cache_enabled):
    x = sample(4, 5).to("accinte")
    weight = sample(5, 3, seed=1).to("accinte").requires_grad_()
    with RecordInputs() as record:
        with torch.autocast("accinte", dtype=torch.float16,
                            cache_enabled=cache_enabled):
            first = torch.mm(x, weight)
            second = torch.mm(x, weight)
    (first.float().sum() + second.float().sum()).backward()
    casts = [call for call in record.calls
             if call[0] == "_to_copy" and call[1] == [torch.float32]]
    return casts, weight


def test_cache_casts_a_reused_weight_once():
    cached, weight = _weight_casts(cache_enabled=True)
    uncached, _ = _weight_casts(cache_enabled=False)
    # x is cast each time (it is no leaf that requires grad); the weight is
    # cast once with the cache and twice without
    assert len(cached) == 3
    assert len(uncached) == 4
    # gradients still flow to the float32 weight through the cached cast
    assert weight.grad.dtype == torch.float32
    expected = 2 * sample(4, 5).sum(0, keepdim=True).t().expand(5, 3)
    torch.testing.assert_close(weight.grad.cpu(), expected, atol=1e-2, rtol=1e-2)


# ---------------------------------------------------------------------------
# the registered table
def test_policy_table_is_what_the_dispatcher_holds():
    table = dict(_C._autocast_policies())
    registered = {op for op in torch._C._dispatch_get_all_op_names()
                  if torch._C._dispatch_has_kernel_for_dispatch_key(
                      op, "AutocastPrivateUse1")}
    assert set(table) == registered
    assert table["aten::mm"] == "lower_precision_fp"
    assert table["aten::softmax.int"] == "fp32_set_opt_dtype"
    assert table["aten::exp"] == "fp32"
    assert table["aten::norm.Scalar"] == "fp32_append_dtype"
    assert table["aten::cat"] == "promote"
    assert table["aten::binary_cross_entropy"] == "banned"


def test_policies_cover_what_pytorch_casts_on_xpu():
    xpu = {op for op in torch._C._dispatch_get_all_op_names()
           if torch._C._dispatch_has_kernel_for_dispatch_key(op, "AutocastXPU")}
    assert xpu, "this PyTorch registers no XPU autocast kernels"
    assert xpu <= set(dict(_C._autocast_policies()))
