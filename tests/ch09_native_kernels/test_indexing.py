"""Chapter 09: advanced indexing (``index.Tensor``) as a native kernel.

Each case compares the device's ``x[indices]`` with the CPU's, exactly
(indexing copies values), inside ``record_fallbacks()``: a case that took
the CPU fallback would still agree with the CPU.
"""

import warnings

import pytest
import torch
from torch_accinte import _C

GATE_TIMEOUT = 30.0

x = torch.arange(3 * 4 * 5, dtype=torch.float32).reshape(3, 4, 5)
mask = x.sum(-1) % 3 == 0  # [3, 4]
L = torch.tensor


def on(device, value):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple):
        return tuple(on(device, item) for item in value)
    return value


CASES = {
    "one long index": (x, (L([2, 0, 2]),)),
    "int32 index": (x, (L([1, -1], dtype=torch.int32),)),
    "negative indices": (x, (slice(None), L([-1, -4, 0]))),
    "2-D index": (x, (L([[0, 1], [2, 0]]),)),
    "0-dim index": (x, (L(1), L([0, 3]))),
    "None gap, adjacent": (x, (slice(None), L([0, 3]), L([1, 4]))),
    "broadcast index tensors": (x, (L([[0], [2]]), L([1, 3, 0]))),
    "not adjacent: indexed dims first": (x, (L([0, 2]), slice(None), L([4, 1]))),
    "bool mask over two dims": (x, (mask,)),
    "bool mask over one dim": (x, (slice(None), L([True, False, True, True]))),
    "bool mask and an index": (x, (L([True, False, True]), slice(None), L([1, 2]))),
    "all-false mask": (x, (torch.zeros(3, dtype=torch.bool),)),
    "with newaxis and ellipsis": (x, (None, Ellipsis, L([4, 0]))),
    "empty index": (x, (L([], dtype=torch.long),)),
    "empty tensor": (torch.ones(0, 4), (slice(None), L([1, 2]))),
    "strided self": (x.transpose(0, 2), (L([1, 0]), slice(None), L([2]))),
    "int64 values": (torch.arange(12).reshape(3, 4), (L([2, 1]), L([3, 0]))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_index_matches_cpu_without_the_fallback(name):
    self, indices = CASES[name]
    expected = self[indices]
    with torch.accinte.record_fallbacks() as record:
        result = self.to("accinte")[on("accinte", indices)]
    assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    assert result.device.type == "accinte"
    assert result.dtype == expected.dtype
    assert result.shape == expected.shape
    assert torch.equal(result.cpu(), expected)


def test_indices_on_the_host_are_allowed_as_on_cuda():
    with torch.accinte.record_fallbacks() as record:
        result = x.to("accinte")[L([2, 0]), L([1, 1])]
        masked = x.to("accinte")[mask]
    assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    assert torch.equal(result.cpu(), x[L([2, 0]), L([1, 1])])
    assert torch.equal(masked.cpu(), x[mask])


def test_out_overload_is_resized_and_written():
    # NB: resizing an `out=` that has elements is deprecated, and the kernel
    # warns as the CPU's does. Whether that reaches Python as a UserWarning
    # depends on the release (2.15.0's torch.ops turns it into one; 2.13.0's
    # and 2.14.1's print it), so the warnings are compared with the CPU's.
    indices = [L([2, 0]), None, L([1, 3])]

    def index_into_wrong_sized_out(device):
        out = torch.full((7,), -1.0, device=device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            returned = torch.ops.aten.index.Tensor_out(
                x.to(device), [on(device, i) for i in indices], out=out)
        assert returned is out
        return out.cpu(), [str(warning.message) for warning in caught]

    with torch.accinte.record_fallbacks() as record:
        result, warned = index_into_wrong_sized_out("accinte")
    assert record.calls == {}, f"took the CPU fallback: {record.calls}"
    expected, cpu_warned = index_into_wrong_sized_out("cpu")
    assert torch.equal(result, expected)
    assert warned == cpu_warned


def test_byte_mask_warns_as_on_the_cpu():
    byte_mask = mask.to(torch.uint8)
    with pytest.warns(UserWarning, match="indexing with dtype torch.uint8 is now deprecated"):
        result = x.to("accinte")[byte_mask.to("accinte")]
    assert torch.equal(result.cpu(), x[mask])


def test_gradient_through_index():
    # The backward (index_put_ with accumulation) is checked against the CPU;
    # the forward is what this chapter makes native.
    weight = torch.randn(3, 4, dtype=torch.float64)
    index = (L([0, 2, 0]), slice(None))
    device = weight.to("accinte").requires_grad_()
    device[index].pow(2).sum().backward()
    host = weight.clone().requires_grad_()
    host[index].pow(2).sum().backward()
    torch.testing.assert_close(device.grad.cpu(), host.grad)


def test_an_integer_index_is_queued_on_the_current_stream():
    self = x.to("accinte")
    index = L([2, 0]).to("accinte")
    torch.accinte.synchronize()
    stream = torch.Stream(device="accinte:0")
    with torch.accinte.stream(stream):
        gate = _C._testing.StreamGate(0, timeout_seconds=GATE_TIMEOUT)
        result = self[index]  # returns at once: the kernel waits behind the gate
        assert not stream.query()
        gate.open()
        assert torch.equal(result.cpu(), x[L([2, 0])])


def test_a_mask_waits_for_the_work_that_computes_it():
    # The number of true elements decides the result's size: the mask is read
    # on the host, after the kernel that computes it has run.
    self = x.to("accinte")
    torch.accinte.synchronize()
    stream = torch.Stream(device="accinte:0")
    with torch.accinte.stream(stream):
        gate = _C._testing.StreamGate(0, timeout_seconds=GATE_TIMEOUT)
        # NB: operators with native kernels: one that took chapter 02's
        # fallback would itself wait for the gate (`%` does).
        computed = self.sum(-1) > 100
        assert not stream.query()
        gate.open()
        result = self[computed]
        assert torch.equal(result.cpu(), x[x.sum(-1) > 100])


@pytest.mark.parametrize("index", [
    lambda d: (L([0, 1], device=d), L([0, 1], device=d), L([0], device=d), L([0], device=d)),
    lambda d: (L([0.0], device=d),),
    lambda d: (L([True, False], device=d),),
    lambda d: (L([0, 1], device=d), L([0, 1, 2], device=d)),
    lambda d: (slice(None), torch.ones(3, 5, dtype=torch.bool, device=d)),
], ids=["too many indices", "float index", "mask shape", "not broadcastable", "mask of 2 dims"])
def test_bad_indices_raise_the_cpus_errors_on_the_host(index):
    with pytest.raises(IndexError) as on_cpu:
        x[index("cpu")]
    with pytest.raises(IndexError) as on_device:
        x.to("accinte")[index("accinte")]
    assert str(on_device.value).splitlines()[0] == str(on_cpu.value).splitlines()[0]
    # Nothing was launched: the stream has no failure to report.
    torch.accinte.synchronize()


def test_an_index_on_another_accinte_device_is_refused():
    with pytest.raises(IndexError, match=r"indices should be either on cpu or on the same "
                                         r"device as the indexed tensor \(accinte:0\)"):
        x.to("accinte:0")[L([0]).to("accinte:1")]


@pytest.mark.parametrize("index", [L([0, 3]), L([-4]), L([[1], [3]])],
                         ids=["past the end", "before the start", "2-D"])
def test_an_index_out_of_range_fails_at_the_next_synchronization(index):
    # Whether an index is in range is known only from its values: as CUDA's
    # device-side assert, the kernel's check fails the launch, and the next
    # synchronization reports it with the CPU's message. The kernel checks
    # before it reads: nothing outside the tensor is read.
    with pytest.raises(IndexError) as on_cpu:
        x[:, :3][index]
    message = str(on_cpu.value).splitlines()[0]
    result = x.to("accinte")[:, :3][index.to("accinte")]
    with pytest.raises(RuntimeError, match="accinteErrorLaunchFailure.*" + message):
        torch.accinte.synchronize()
    del result
    # The failure was reported once: the stream works again.
    assert torch.equal(x.to("accinte")[L([2]).to("accinte")].cpu(), x[L([2])])
