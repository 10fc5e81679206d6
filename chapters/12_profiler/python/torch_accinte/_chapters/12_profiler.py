"""Chapter 12: accinte's device activities in ``torch.profiler``.

The work is all in C++: loading the backend library registers the activity
profiler with PyTorch (``REGISTER_PRIVATEUSE1_PROFILER``), and
``ProfilerActivity.PrivateUse1`` profiles the device from then on. What is
left for Python is to say so when it cannot work: a PyTorch built without
Kineto has no activity profilers at all.
"""

import warnings

import torch

# LITERALINCLUDE START: CH12_PY_CHECK
if not torch.autograd.kineto_available():
    warnings.warn(
        "accinte: this PyTorch was built without Kineto, so torch.profiler "
        "records no accinte device activity (chapter 12 needs Kineto)",
        stacklevel=2,
    )
# LITERALINCLUDE END: CH12_PY_CHECK
