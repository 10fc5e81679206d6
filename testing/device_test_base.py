"""accinte's device test base, for ``TORCH_TEST_DEVICES``.

Run it as PyTorch's own tests expect an out-of-tree device to be run::

    TORCH_TEST_DEVICES=$(python -c 'import torch_accinte.testing as t; print(t.DEVICE_TEST_BASE)') \
        python -m pytest test/test_indexing.py

NB: this file is not imported but executed by
``torch.testing._internal.common_device_type`` with ``runpy.run_path``,
with that module's globals as its own (``PrivateUse1TestBase``,
``device_type_test_bases``): it must not import ``common_device_type``,
which is still being imported when this runs. What it must leave behind is
``TEST_CLASS``, the class every device-generic test class is instantiated
with, once per device type.
"""

import functools
import unittest

import torch
import torch_accinte  # noqa: F401  (registers the device, if autoload has not)
from torch_accinte.testing import expectations

# The list is read once per process: every test file of a run shares it.
_ENTRIES = expectations.load()


def _synchronized(method):
    """The test, then a synchronization that reports its asynchronous errors.

    NB: a kernel's error (an index out of range, say) is reported by the
    next synchronization, as CUDA's device-side asserts are. Without one
    here, the test that caused it would pass and the next test to
    synchronize would fail in its place.
    """

    @functools.wraps(method)
    def test(self, *args, **kwargs):
        try:
            result = method(self, *args, **kwargs)
        except BaseException:
            # The test failed already; its pending error, if any, must not
            # fail the next one.
            try:
                torch.accelerator.synchronize()
            except Exception:
                pass
            raise
        torch.accelerator.synchronize()
        return result

    return test


# LITERALINCLUDE START: UPSTREAM_TEST_BASE
class AccinteTestBase(PrivateUse1TestBase):  # noqa: F821  (a global of common_device_type)
    """PrivateUse1TestBase plus accinte's expectations.

    ``instantiate_test`` makes each test end with a synchronization, and
    marks the listed tests as they are created (skip, or unittest's expected
    failure, whose unexpected success fails the run);
    ``_apply_precision_override_for_test`` raises the tolerances of the
    listed ones before each runs.
    """

    @classmethod
    def instantiate_test(cls, name, test, *, generic_cls=None):
        before = set(cls.__dict__)
        super().instantiate_test(name, test, generic_cls=generic_cls)
        owner = generic_cls.__name__ if generic_cls is not None else cls.__name__
        # NB: one generic test becomes several (one per dtype and parameter);
        # each gets its own verdict from the list.
        for attr in sorted(set(cls.__dict__) - before):
            method = _synchronized(getattr(cls, attr))
            setattr(cls, attr, method)
            entry = expectations.find(_ENTRIES, f"{owner}.{attr}")
            if entry is None:
                continue
            if entry.kind == "skip":
                method = unittest.skip(f"accinte: {entry.reason} (until {entry.until})")(method)
            else:
                method = unittest.expectedFailure(method)
            setattr(cls, attr, method)
        cls._accinte_generic_name = owner

    def _apply_precision_override_for_test(self, test, param_kwargs):
        super()._apply_precision_override_for_test(test, param_kwargs)
        name = f"{type(self)._accinte_generic_name}.{self._testMethodName}"
        entry = expectations.find(_ENTRIES, name, kinds=("precision",))
        if entry is not None:
            self.precision = max(self.precision, entry.atol)
            self.rel_tol = max(self.rel_tol, entry.rtol)
# LITERALINCLUDE END: UPSTREAM_TEST_BASE


# LITERALINCLUDE START: UPSTREAM_ONE_CLASS
# NB: common_device_type already added PrivateUse1TestBase when the backend
# was registered before it was imported (autoload does that); keeping it
# would instantiate every test twice for accinte, once without the list.
device_type_test_bases[:] = [  # noqa: F821
    base for base in device_type_test_bases if base is not PrivateUse1TestBase  # noqa: F821
]
TEST_CLASS = AccinteTestBase
# LITERALINCLUDE END: UPSTREAM_ONE_CLASS
