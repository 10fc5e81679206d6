"""Chapter 01: moving a module keeps its Parameter objects, as on CUDA.

``nn.Module._apply`` (behind ``to``, ``cpu``, ``accinte``, ``to_empty``)
sets ``param.data = moved`` and keeps the Parameter only when
``torch._has_compatible_shallow_copy_type(param, moved)`` is true; otherwise
it makes a new Parameter for every tensor. ATen's answer leaves PrivateUse1
out, so without chapter 01's kernel for that operator a move unties shared
weights and an optimizer made before the move keeps the old parameters and
trains nothing.
"""

import pytest
import torch
import torch_accinte  # noqa: F401
from conftest import stage_has

needs_compute = pytest.mark.skipif(
    not stage_has("02_fallback"),
    reason="running a module needs chapter 02's operators")


def make_linear():
    module = torch.nn.Linear(4, 3)
    with torch.no_grad():
        module.weight.copy_(torch.arange(12.0).reshape(3, 4) / 10)
        module.bias.copy_(torch.tensor([0.5, -0.5, 1.0]))
    return module


def dense_cpu():
    return torch.ones(2, 3)


@pytest.mark.parametrize("device", ["accinte:0", "accinte:1"])
def test_cpu_and_accinte_tensors_are_shallow_copy_compatible(device):
    accinte = torch.ones(2, 3).to(device)
    assert torch._has_compatible_shallow_copy_type(dense_cpu(), accinte)
    assert torch._has_compatible_shallow_copy_type(accinte, dense_cpu())
    assert torch._has_compatible_shallow_copy_type(accinte, accinte)
    other = torch.ones(5, dtype=torch.int64).to("accinte:1")
    assert torch._has_compatible_shallow_copy_type(accinte, other)


def test_other_kinds_of_tensor_stay_incompatible_with_accinte():
    # The answer ATen gives for the same pair with the CPU in accinte's
    # place: a meta or a sparse tensor is not a dense tensor.
    accinte = torch.ones(2, 3).to("accinte")
    others = {
        "meta": torch.ones(2, 3, device="meta"),
        "sparse": torch.ones(2, 3).to_sparse(),
    }
    for name, other in others.items():
        expected = torch._has_compatible_shallow_copy_type(dense_cpu(), other)
        assert not expected, name
        assert torch._has_compatible_shallow_copy_type(accinte, other) is expected, name
        assert torch._has_compatible_shallow_copy_type(other, accinte) is expected, name


def test_parameters_are_kept_across_moves():
    reference = make_linear()
    module = make_linear()
    weight, bias = module.weight, module.bias
    for device, where in [("accinte", "accinte:0"), ("cpu", "cpu"),
                          ("accinte:1", "accinte:1"), ("accinte:0", "accinte:0"),
                          (torch.device("accinte", 1), "accinte:1")]:
        assert module.to(device) is module
        assert module.weight is weight and module.bias is bias, device
        assert isinstance(weight, torch.nn.Parameter) and weight.requires_grad
        assert weight.device == torch.device(where)
        torch.testing.assert_close(weight.cpu(), reference.weight.detach())
        torch.testing.assert_close(bias.cpu(), reference.bias.detach())
    module.cpu()
    assert module.weight is weight and weight.device.type == "cpu"
    module.accinte(1)
    assert module.weight is weight and weight.device == torch.device("accinte:1")


def test_gradients_move_with_their_parameters():
    module = make_linear()
    weight = module.weight
    grad = torch.full_like(weight, 0.25)
    weight.grad = grad
    module.to("accinte:1")
    assert module.weight is weight and weight.grad is grad
    assert grad.device == torch.device("accinte:1")
    torch.testing.assert_close(grad.cpu(), torch.full((3, 4), 0.25))


def test_to_empty_keeps_parameters():
    module = make_linear()
    weight = module.weight
    assert module.to_empty(device="accinte:1") is module
    assert module.weight is weight
    assert weight.device == torch.device("accinte:1") and weight.shape == (3, 4)
    module.to_empty(device="cpu")
    assert module.weight is weight and weight.device.type == "cpu"


def test_to_empty_from_meta_makes_new_parameters_as_for_any_device():
    # A meta tensor is not shallow-copy compatible with a real one (on the
    # CPU or CUDA either), so materializing a meta module makes new
    # Parameters: accinte behaves as the CPU does here.
    for device in ["cpu", "accinte"]:
        with torch.device("meta"):
            module = torch.nn.Linear(4, 3)
        meta_weight = module.weight
        module.to_empty(device=device)
        assert module.weight is not meta_weight
        assert isinstance(module.weight, torch.nn.Parameter)
        assert module.weight.device.type == device


class TiedLanguageModel(torch.nn.Module):
    """An embedding and an output head that share one weight."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(7, 4)
        self.head = torch.nn.Linear(4, 7, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(torch.tanh(self.embed(tokens)))


def test_tied_weights_stay_tied():
    model = TiedLanguageModel()
    shared = model.embed.weight
    for device in ["accinte", "accinte:1", "cpu", "accinte"]:
        model.to(device)
        assert model.embed.weight is shared and model.head.weight is shared, device
        assert len(list(model.parameters())) == 1
    assert shared.device == torch.device("accinte:0")


def test_load_state_dict_assign_takes_the_given_tensors_as_on_cuda():
    # assign=True swaps in the state dict's tensors whatever the device (a
    # plain tensor wrapped in a new Parameter over the same memory, a
    # Parameter taken as it is, requires_grad taken from the module).
    source = make_linear().to("accinte:1")
    state = {name: tensor.detach() for name, tensor in source.state_dict().items()}
    with torch.device("meta"):
        module = torch.nn.Linear(4, 3)
    module.load_state_dict(state, assign=True)
    assert isinstance(module.weight, torch.nn.Parameter)
    assert module.weight.requires_grad
    assert module.weight.device == torch.device("accinte:1")
    assert module.weight.data_ptr() == state["weight"].data_ptr()

    weight = torch.nn.Parameter(torch.ones(3, 4).to("accinte"), requires_grad=False)
    module.load_state_dict({"weight": weight, "bias": state["bias"]}, assign=True)
    assert module.weight is weight and module.weight.requires_grad

    # The assigned Parameters are the module's own from then on: moves keep
    # them.
    module.to("cpu")
    assert module.weight is weight and weight.device.type == "cpu"
    module.to("accinte:1")
    assert module.weight is weight and weight.device == torch.device("accinte:1")

    # Without assign, values are copied into the existing Parameters.
    module.load_state_dict(make_linear().state_dict())
    assert module.weight is weight and weight.device == torch.device("accinte:1")
    torch.testing.assert_close(weight.cpu(), make_linear().weight.detach())


def train(model, optimizer, device, steps=3):
    tokens = torch.tensor([[1, 2, 3], [4, 5, 6]], device=device)
    targets = torch.tensor([[2, 3, 4], [5, 6, 0]], device=device)
    for _ in range(steps):
        optimizer.zero_grad()
        logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 7), targets.reshape(-1))
        loss.backward()
        optimizer.step()


@needs_compute
@pytest.mark.parametrize("optimizer_class", [torch.optim.SGD, torch.optim.Adam],
                         ids=lambda c: c.__name__)
def test_optimizer_made_before_the_move_trains_the_moved_model(optimizer_class):
    reference = TiedLanguageModel()
    with torch.no_grad():
        reference.embed.weight.copy_(
            torch.randn(7, 4, generator=torch.Generator().manual_seed(0)))
    model = TiedLanguageModel()
    model.load_state_dict(reference.state_dict())
    before = reference.embed.weight.detach().clone()

    cpu_optimizer = optimizer_class(reference.parameters(), lr=0.1)
    train(reference, cpu_optimizer, "cpu")

    optimizer = optimizer_class(model.parameters(), lr=0.1)
    model.to("accinte")
    train(model, optimizer, "accinte")

    assert optimizer.param_groups[0]["params"][0] is model.embed.weight
    trained = model.embed.weight.detach().cpu()
    assert not torch.equal(trained, before)
    torch.testing.assert_close(trained, reference.embed.weight.detach())
