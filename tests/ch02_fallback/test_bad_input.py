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


@pytest.mark.parametrize("call", [
    lambda x: torch.cat([x[2:], x[:2]], out=x),
    lambda x: torch.atan2(x[:4], x[2:], out=x[2:]),
    lambda x: torch.stack([x[:3], x[3:]], out=x.view(2, 3)),
], ids=["cat", "atan2", "stack"])
def test_a_written_argument_overlapping_an_input_is_refused(call):
    """The CPU kernel's own overlap check would see the fallback's host
    copies, which never overlap: the fallback checks the device tensors
    first and raises the CPU's error, leaving the tensor unchanged."""
    with pytest.raises(RuntimeError) as on_cpu:
        call(torch.arange(6.0))
    x = torch.arange(6.0, device="accinte")
    with pytest.raises(RuntimeError) as on_device:
        call(x)
    assert str(on_device.value).splitlines()[0] == str(on_cpu.value).splitlines()[0]
    assert torch.equal(x.cpu(), torch.arange(6.0))
