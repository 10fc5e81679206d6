"""Chapter 02: tensors of two devices in one operator.

test_fallback_rules.py and test_operators.py cover two accinte devices and a
non-scalar CPU tensor, and that a 0-dim CPU tensor is accepted; here, a 0-dim
tensor on the other accinte device, which CUDA refuses too: only a CPU scalar
may travel with a device tensor.
"""

import pytest
import torch
import torch_accinte  # noqa: F401

VALUES = torch.arange(1.0, 5.0)


@pytest.mark.parametrize("function", [
    lambda a, s: a + s,                       # native kernel path
    lambda a, s: torch.atan2(a, s),           # the CPU fallback
    lambda a, s: torch.where(a > 2, a, s),    # fallback, scalar last
    lambda a, s: torch.maximum(s, a),         # scalar first
], ids=["add", "atan2", "where", "maximum"])
def test_a_scalar_on_the_other_accinte_device_is_refused(function):
    on_zero = VALUES.to("accinte:0")
    scalar_on_one = torch.tensor(2.0, device="accinte:1")
    with pytest.raises(RuntimeError,
                       match=r"same device.*(accinte:0 and accinte:1|accinte:1 and accinte:0)"):
        function(on_zero, scalar_on_one)
    # The same scalar on the CPU is accepted, and both devices still work.
    torch.testing.assert_close(function(on_zero, torch.tensor(2.0)).cpu(),
                               function(VALUES, torch.tensor(2.0)))
    torch.testing.assert_close((scalar_on_one * 3).cpu(), torch.tensor(6.0))
