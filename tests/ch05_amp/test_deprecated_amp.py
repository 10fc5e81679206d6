"""Chapter 05: ``torch.accinte.amp``, the deprecated spellings of
``torch.cuda.amp`` for accinte.

Old scripts say ``torch.cuda.amp.autocast()`` and
``torch.cuda.amp.GradScaler()``; ported to accinte they must run as they do
on CUDA: the generic classes for the device, and a ``FutureWarning`` naming
the replacement on every use, reported at the caller's line.
"""

import importlib
import warnings

import pytest
import torch
import torch_accinte  # noqa: F401


def deprecation(call):
    """Runs ``call``; returns its result and the one FutureWarning it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    future = [w for w in caught if issubclass(w.category, FutureWarning)]
    assert len(future) == 1, [str(w.message) for w in caught]
    return result, future[0]


def test_the_module_is_importable_by_its_torch_name():
    module = importlib.import_module("torch.accinte.amp")
    assert module is torch.accinte.amp
    from torch.accinte.amp import GradScaler, autocast, custom_bwd, custom_fwd  # noqa: F401
    assert set(module.__all__) == {"GradScaler", "autocast", "custom_bwd", "custom_fwd"}
    # The same names as torch.cuda.amp's classes and decorators.
    assert set(module.__all__) <= set(dir(torch.cuda.amp))


def test_autocast_warns_and_casts_like_torch_autocast():
    region, warning = deprecation(lambda: torch.accinte.amp.autocast())
    assert str(warning.message) == (
        "`torch.accinte.amp.autocast(args...)` is deprecated. "
        "Please use `torch.amp.autocast('accinte', args...)` instead.")
    assert warning.filename == __file__
    assert isinstance(region, torch.amp.autocast)
    a = torch.ones(2, 2, device="accinte")
    with region:
        assert torch.is_autocast_enabled("accinte")
        assert torch.get_autocast_dtype("accinte") == torch.float16
        assert torch.mm(a, a).dtype == torch.float16
    assert not torch.is_autocast_enabled("accinte")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with torch.accinte.amp.autocast(dtype=torch.bfloat16):
            assert torch.mm(a, a).dtype == torch.bfloat16
        with torch.accinte.amp.autocast(enabled=False):
            assert torch.mm(a, a).dtype == torch.float32


def test_autocast_as_a_decorator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)

        @torch.accinte.amp.autocast()
        def product(x):
            return torch.mm(x, x)

    assert product(torch.ones(2, 2, device="accinte")).dtype == torch.float16
    assert not torch.is_autocast_enabled("accinte")


def test_grad_scaler_warns_and_scales_on_accinte():
    scaler, warning = deprecation(lambda: torch.accinte.amp.GradScaler(init_scale=8.0))
    assert str(warning.message) == (
        "`torch.accinte.amp.GradScaler(args...)` is deprecated. "
        "Please use `torch.amp.GradScaler('accinte', args...)` instead.")
    assert warning.filename == __file__
    assert isinstance(scaler, torch.amp.GradScaler)
    assert scaler._device == "accinte"

    weight = torch.nn.Parameter(torch.ones(3, device="accinte"))
    optimizer = torch.optim.SGD([weight], lr=0.5)
    scaled = scaler.scale((weight * 2).sum())
    assert scaled.item() == 48.0
    scaled.backward()
    scaler.step(optimizer)
    scaler.update()
    torch.testing.assert_close(weight.detach().cpu(), torch.zeros(3))
    assert scaler.get_scale() == 8.0


def test_grad_scaler_defaults_are_torch_cuda_amps():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        scaler = torch.accinte.amp.GradScaler()
    reference = torch.amp.GradScaler("accinte")
    assert scaler.state_dict() == reference.state_dict()


def test_custom_fwd_and_custom_bwd():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        class Square(torch.autograd.Function):
            @staticmethod
            @torch.accinte.amp.custom_fwd(cast_inputs=torch.float32)
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            @torch.accinte.amp.custom_bwd
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return 2 * x * grad

    messages = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert messages == [
        "`torch.accinte.amp.custom_fwd(args...)` is deprecated. "
        "Please use `torch.amp.custom_fwd(args..., device_type='accinte')` instead.",
        "`torch.accinte.amp.custom_bwd(args...)` is deprecated. "
        "Please use `torch.amp.custom_bwd(args..., device_type='accinte')` instead.",
    ]
    x = torch.full((2,), 3.0, device="accinte", dtype=torch.float16, requires_grad=True)
    with torch.autocast("accinte", dtype=torch.float16):
        y = Square.apply(x)
    # cast_inputs ran the forward in float32, outside autocast.
    assert y.dtype == torch.float32
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), torch.full((2,), 6.0, dtype=torch.float16))


@pytest.mark.parametrize("name", ["autocast", "GradScaler"])
def test_the_cuda_spellings_warn_alike(name):
    # What this mirrors: torch.cuda.amp warns the same way, naming its
    # replacement (constructed without touching a GPU).
    cuda_class = getattr(torch.cuda.amp, name)
    accinte_class = getattr(torch.accinte.amp, name)
    assert issubclass(accinte_class, cuda_class.__mro__[1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            cuda_class(enabled=False)
        except Exception:  # noqa: BLE001 (only the warning matters)
            pass
    cuda_warning = next(w for w in caught if issubclass(w.category, FutureWarning))
    _, accinte_warning = deprecation(lambda: accinte_class(enabled=False))
    assert str(accinte_warning.message) == str(cuda_warning.message).replace(
        "cuda", "accinte")
