"""PyTorch's own device-generic test machinery, run on accinte.

``instantiate_device_type_tests(..., only_for="accinte")`` builds the test
class from ``PrivateUse1TestBase``: PyTorch offers that base as soon as the
PrivateUse1 backend is renamed and its device module registered and
available (``torch.accinte.is_available()``), which ``import torch_accinte``
does before this module imports ``common_device_type`` (that module decides
its device bases once, at import). ``setUpClass`` then asks
``torch.accinte.current_device()`` for the primary device, ``accinte:0``.

On top of it, ``@ops`` instantiates one test per OpInfo entry of PyTorch's
``op_db`` and per dtype the entry supports, among float32, float64, int64
and bool (complex is left for later). Each test is PyTorch's
``test_compare_cpu`` (test/test_ops.py) applied to accinte: the OpInfo's
sample inputs are generated on accinte, the same samples are moved to the
CPU, the operator runs on both, and the results must agree at the
tolerance ``test_compare_cpu`` uses (atol = rtol = 1e-3) with the same
dtypes. Beyond that test this one also checks that every tensor result is
on accinte and that the operator raised the same warnings as on the CPU.

The operators are listed explicitly (``OPS``), grouped by the path they
take through the backend; ``EXCLUDED`` names the categories left out and
why. A failure that is a known backend bug is marked in ``KNOWN_FAILURES``
with a strict xfail, so that it turns into an error once fixed.
"""

import contextlib
import gc
import random
import warnings

import pytest
import torch
import torch_accinte  # noqa: F401  (must precede common_device_type)
from torch.testing._internal.common_device_type import (
    PrivateUse1TestBase,
    instantiate_device_type_tests,
    ops,
)
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase
from torch.testing._internal.opinfo.core import DecorateInfo
from torch.utils._pytree import tree_leaves

try:
    import numpy
except ImportError:  # numpy is optional for PyTorch's test helpers
    numpy = None

# NB: PyTorch's TestCase.setUp seeds every device; before chapter 08 gives
# accinte a generator, torch.manual_seed says so on every test.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Set seed for `accinte` device does not take effect:UserWarning")

# The tolerance of PyTorch's test_compare_cpu.
ATOL = RTOL = 1e-3

DTYPES = (torch.float32, torch.float64, torch.int64, torch.bool)

# OpInfo full names, by the route they take through the backend.
OPS = {
    # Kernels the backend implements itself (chapters 01-02): views over
    # accinte memory, copies and dtype conversions through _copy_from, and
    # the native elementwise kernels.
    "native": [
        "abs", "neg", "view", "reshape", "as_strided", "unfold", "clone",
        "contiguous", "double", "long", "bool", "transpose", "expand",
        "squeeze", "narrow", "diagonal",
    ],
    # Elementwise operators through the CPU fallback.
    "unary": [
        "exp", "log1p", "sqrt", "rsqrt", "sin", "tanh", "sigmoid", "erf",
        "floor", "round", "sign", "bitwise_not", "logical_not", "nan_to_num",
    ],
    # Scalars, broadcasting, type promotion.
    "binary": [
        "add", "sub", "mul", "div.no_rounding_mode", "div.floor_rounding",
        "pow", "remainder", "fmod", "maximum", "atan2", "eq", "lt",
        "logical_and", "bitwise_and", "bitwise_left_shift", "clamp", "where",
        "addcmul",
    ],
    # Several results (tuples), dims and keepdim, integer index results.
    "reductions, scans and sorting": [
        "sum", "prod", "mean", "amax", "aminmax", "max.reduction_with_dim",
        "argmax", "all", "any", "std", "var_mean", "logsumexp", "cumsum",
        "cummax", "sort", "topk",
    ],
    # Tensor lists in and out, in-place and out= write-back, optional
    # tensor lists (index_put), data-dependent output shapes.
    "indexing and shape": [
        "cat", "stack", "split", "unbind", "flip", "roll", "tril", "gather",
        "scatter", "index_select", "index_add", "index_put", "masked_fill",
        "masked_select", "nonzero", "constant_pad_nd", "fill", "zero_",
        "new_full",
    ],
    "linear algebra": [
        "mm", "bmm", "matmul", "mv", "addmm", "einsum", "linalg.solve",
    ],
    # Functions behind nn modules; conv1d and conv_transpose2d reach
    # aten::convolution, which chapter 02 routes to the CPU by name.
    "neural network": [
        "nn.functional.linear", "nn.functional.conv1d",
        "nn.functional.conv_transpose2d", "nn.functional.avg_pool2d",
        "softmax", "log_softmax", "nn.functional.layer_norm",
        "nn.functional.batch_norm", "nn.functional.gelu",
        "nn.functional.relu", "nn.functional.embedding",
        "nn.functional.one_hot", "nn.functional.mse_loss",
        "nn.functional.smooth_l1_loss",
    ],
}

# Categories left out, with the reason and examples (not exhaustive).
EXCLUDED = {
    "random": (
        "results depend on a generator; accinte has none before chapter 08",
        ["bernoulli", "multinomial", "normal", "uniform", "exponential",
         "rand_like", "randn_like", "randint_like", "nn.functional.dropout",
         "nn.functional.rrelu", "nn.functional.fractional_max_pool2d",
         "svd_lowrank", "pca_lowrank"],
    ),
    "uninitialized memory": (
        "the results are whatever the allocation held, on either device",
        ["empty", "empty_like", "empty_strided", "empty_permuted",
         "new_empty", "new_empty_strided", "resize_", "resize_as_"],
    ),
    "complex": (
        "complex dtypes are out of scope for now, and these ops have only "
        "complex inputs or results",
        ["view_as_real", "view_as_complex", "complex", "polar", "fft.fft"],
    ),
    "not unique": (
        "the result is defined only up to signs, phases or the order of "
        "equal eigenvalues, so two correct backends may legitimately differ",
        ["linalg.svd", "linalg.eig", "linalg.eigh", "linalg.qr", "svd"],
    ),
    "device from an argument": (
        "the device is an argument, not a tensor: moving the sample to the "
        "CPU leaves it on accinte, so there would be no CPU reference",
        ["to", "arange", "linspace", "zeros", "ones", "full", "eye",
         "scalar_tensor", "tril_indices", "signal.windows.hann"],
    ),
    "no CPU kernel": (
        "CUDA-only or sparse operators",
        ["jiterator_unary", "torch._scaled_mm", "to_sparse",
         "torch.ops.aten._flash_attention_forward"],
    ),
    "time budget": (
        "many or large samples (nn.functional.max_pool2d alone takes "
        "minutes); the routes they take are covered by the entries above",
        ["nn.functional.max_pool2d", "nn.functional.conv2d",
         "nn.functional.unfold", "unique", "unique_consecutive",
         "searchsorted", "isclose", "nn.functional.nll_loss",
         "nn.functional.cross_entropy", "linalg.vector_norm", "median"],
    ),
}

# (op, dtypes or None for all, reason): known backend bugs, strict xfails.
KNOWN_FAILURES = []

OP_NAMES = [name for group in OPS.values() for name in group]
_BY_NAME = {op.full_name: op for op in op_db}
SELECTED = [_BY_NAME[name] for name in OP_NAMES]


def _to_cpu(value):
    return value.to("cpu") if isinstance(value, torch.Tensor) else value


def _messages(caught):
    # NB: a set: the same warning twice (structured operators run their
    # meta function once for the accinte output and once on the CPU) is
    # noise; a warning the CPU does not give at all is a difference.
    return sorted({f"{w.category.__name__}: {w.message}" for w in caught})


@contextlib.contextmanager
def _recorded_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


@pytest.fixture(autouse=True, scope="module")
def collect_garbage_at_the_end():
    """Frees this module's accinte memory before the next module runs.

    NB: a failing sample (the strict xfails) leaves its accinte tensors in
    reference cycles through the traceback; without this the cyclic
    collector would free them during some later test, whose memory
    statistics would then move for no reason of its own.
    """
    yield
    gc.collect()


class TestAccinteCompareCpu(TestCase):
    # NB: PyTorch's TestCase.setUp seeds torch, random and numpy (the
    # samples are random but reproducible). The seeds are process state the
    # other tests must not see, so they are forked around each test.
    # set_warn_always makes TORCH_WARN_ONCE warn on both devices alike.
    def setUp(self):
        self._restore = contextlib.ExitStack()
        rng_devices = []
        if hasattr(torch.accinte, "get_rng_state"):  # chapter 08
            rng_devices = list(range(torch.accinte.device_count()))
        self._restore.enter_context(
            torch.random.fork_rng(devices=rng_devices, device_type="accinte"))
        python_state = random.getstate()
        self._restore.callback(random.setstate, python_state)
        if numpy is not None:
            numpy_state = numpy.random.get_state()
            self._restore.callback(numpy.random.set_state, numpy_state)
        warn_always = torch.is_warn_always_enabled()
        self._restore.callback(torch.set_warn_always, warn_always)
        torch.set_warn_always(True)
        try:
            super().setUp()
        except BaseException:
            self._restore.close()
            raise

    def tearDown(self):
        try:
            super().tearDown()
        finally:
            self._restore.close()

    @ops(SELECTED, allowed_dtypes=DTYPES)
    def test_compare_cpu(self, device, dtype, op):
        samples = list(op.sample_inputs(device, dtype))
        self.assertTrue(samples, f"{op.full_name} has no samples for {dtype}")
        for sample in samples:
            cpu_sample = sample.transform(_to_cpu)
            with _recorded_warnings() as device_warnings:
                actual = op(sample.input, *sample.args, **sample.kwargs)
            with _recorded_warnings() as cpu_warnings:
                expected = op(cpu_sample.input, *cpu_sample.args,
                              **cpu_sample.kwargs)
            actual = sample.output_process_fn_grad(actual)
            expected = cpu_sample.output_process_fn_grad(expected)
            # NB: a factory-like sample may ask for a device explicitly.
            result_device = torch.device(sample.kwargs.get("device", device))
            for leaf in tree_leaves(actual):
                if isinstance(leaf, torch.Tensor):
                    self.assertEqual(leaf.device, result_device)
            self.assertEqual(actual, expected, atol=ATOL, rtol=RTOL,
                             exact_dtype=True)
            self.assertEqual(_messages(device_warnings),
                             _messages(cpu_warnings),
                             msg=f"warnings differ for {sample.summary()}")


# NB: overrides on the test function reach only the deep copies of the
# OpInfos that @ops makes for this test, never the shared op_db.
TestAccinteCompareCpu.test_compare_cpu._op_overrides = {
    name: [DecorateInfo(pytest.mark.xfail(strict=True, reason=reason),
                        "TestAccinteCompareCpu", "test_compare_cpu",
                        dtypes=dtypes)]
    for name, dtypes, reason in KNOWN_FAILURES
}

instantiate_device_type_tests(TestAccinteCompareCpu, globals(),
                              only_for="accinte")

# NB: without the PrivateUse1 base (torch_accinte imported too late, device
# unavailable) instantiate_device_type_tests would silently create nothing.
if "TestAccinteCompareCpuPRIVATEUSE1" not in globals():
    raise RuntimeError(
        "PyTorch's device-generic tests found no accinte test base: "
        f"{PrivateUse1TestBase} was not offered for accinte")


def test_op_list_is_explicit_and_large_enough():
    assert len(OP_NAMES) == len(set(OP_NAMES)), "an operator is listed twice"
    assert len(OP_NAMES) >= 80
    excluded = {name for _, names in EXCLUDED.values() for name in names}
    assert excluded.isdisjoint(OP_NAMES)
    assert excluded <= set(_BY_NAME), excluded - set(_BY_NAME)
    for name, _, _ in KNOWN_FAILURES:
        assert name in OP_NAMES


def test_no_opinfo_decorator_targets_this_test():
    """PyTorch's own skips and xfails in op_db (DecorateInfo) must not reach
    this test, or an operator could stop being compared without notice."""
    active = [
        (op.full_name, dtype)
        for op in SELECTED
        for decorator in op.decorators
        if isinstance(decorator, DecorateInfo)
        for dtype in DTYPES
        if decorator.is_active("TestAccinteCompareCpu", "test_compare_cpu",
                               "accinte", dtype, {})
    ]
    assert active == []


def test_instantiated_for_accinte_only():
    cls = globals()["TestAccinteCompareCpuPRIVATEUSE1"]
    assert issubclass(cls, PrivateUse1TestBase)
    tests = [name for name in vars(cls) if name.startswith("test_compare_cpu")]
    assert tests and all("_accinte_" in name for name in tests)
    assert "TestAccinteCompareCpuCPU" not in globals()
