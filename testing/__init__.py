"""accinte as a test backend for PyTorch's own device-generic tests.

PyTorch's test files that call ``instantiate_device_type_tests`` create one
test class per available device type. ``common_device_type`` also runs the
files named in the ``TORCH_TEST_DEVICES`` environment variable and adds
each one's ``TEST_CLASS`` to those device types: that is how a backend out
of PyTorch's tree keeps its own precision overrides and its own list of
expected failures. This package is that file for accinte
(:data:`DEVICE_TEST_BASE`), the list (``expected_failures.json``, read by
:mod:`torch_accinte.testing.expectations`) and the runner behind
``make upstream-tests`` (``python -m torch_accinte.testing``).
"""

import pathlib

#: The file to name in ``TORCH_TEST_DEVICES``.
DEVICE_TEST_BASE = str(pathlib.Path(__file__).with_name("device_test_base.py"))

#: The machine-readable list of expected failures, skips and precision overrides.
EXPECTATIONS = str(pathlib.Path(__file__).with_name("expected_failures.json"))

__all__ = ["DEVICE_TEST_BASE", "EXPECTATIONS"]
