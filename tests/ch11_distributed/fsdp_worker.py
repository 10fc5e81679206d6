"""One rank of a test of FSDP2 and distributed checkpoints on accinte.

Run as ``python fsdp_worker.py CASE RANK WORLD STORE_FILE DIRECTORY`` (see
``test_fsdp.py``); ``DIRECTORY`` is where a case keeps its checkpoint. A
case of one process (``WORLD`` 1) joins no group. As in ``worker.py``, each
rank uses the accinte device of its rank and checks its results against
values computed on the CPU; a clean exit with ``OK CASE`` printed is
success.
"""

import copy
import datetime
import os
import pathlib
import sys

# NB: before torch_accinte loads the emulator, which reads it once.
os.environ.setdefault("ACCINTE_DEVICE_COUNT", "2")
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402
import torch_accinte  # noqa: E402, F401
from torch import nn  # noqa: E402
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save  # noqa: E402
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # noqa: E402
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard  # noqa: E402

#: Every collective of a case must end in this time, or the rank fails.
#: NB: longer than worker.py's: between collectives, each rank computes
#: references on its own, which a loaded machine may slow on one rank only.
TIMEOUT = datetime.timedelta(seconds=60)
VOCABULARY = 32
WIDTH = 16
#: Sequences per rank in a batch, and tokens per sequence.
SHARE, LENGTH = 4, 8
#: Small enough that clip_grad_norm_ scales the gradients of every step.
MAX_NORM = 0.5

CASES = {}


def case(function):
    CASES[function.__name__] = function
    return function


class TinyTransformer(nn.Module):
    """Embedding, two encoder layers and a head: what FSDP2 shards per layer.

    NB: no biases in the layers. The gradient of the keys' bias is zero in
    exact arithmetic (softmax ignores a shift shared by a row), so in floating
    point it is rounding noise, which Adam's division by its own square root
    turns into full-sized steps of arbitrary sign: no two correct programs
    would agree on it.
    """

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCABULARY, WIDTH)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(WIDTH, nhead=2, dim_feedforward=2 * WIDTH, dropout=0.0,
                                       batch_first=True, bias=False)
            for _ in range(2))
        self.head = nn.Linear(WIDTH, VOCABULARY)

    def forward(self, tokens):
        hidden = self.embedding(tokens)
        for layer in self.layers:
            hidden = layer(hidden)
        return self.head(hidden)


def make_model():
    torch.manual_seed(0)
    return TinyTransformer()


def make_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)


def batches(world, steps, seed=1):
    """``steps`` batches of (tokens, next tokens), ``SHARE`` sequences per rank."""
    generator = torch.Generator().manual_seed(seed)
    return [(torch.randint(VOCABULARY, (SHARE * world, LENGTH), generator=generator),
             torch.randint(VOCABULARY, (SHARE * world, LENGTH), generator=generator))
            for _ in range(steps)]


def loss_of(model, tokens, targets):
    logits = model(tokens)
    # NB: the loss in float32 whatever the dtype of the logits, on both sides.
    return nn.functional.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def train(model, optimizer, data, rank=0, world=1, device="cpu"):
    """One step per batch; each rank takes every ``world``-th sequence."""
    for tokens, targets in data:
        optimizer.zero_grad()
        loss_of(model, tokens[rank::world].to(device), targets[rank::world].to(device)).backward()
        # NB: on DTensor gradients, the norm is a sum over the ranks (an
        # all_reduce), and the gradients are scaled by it.
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=MAX_NORM)
        optimizer.step()


# LITERALINCLUDE START: CH11_FSDP_SHARD
def shard(model, world, mp_policy=MixedPrecisionPolicy()):
    """FSDP2 over a 1-D mesh of the accinte devices: each layer, then the root."""
    mesh = init_device_mesh("accinte", (world,))
    for layer in model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp_policy)
    fully_shard(model, mesh=mesh, mp_policy=mp_policy)
    return model
# LITERALINCLUDE END: CH11_FSDP_SHARD


def full_parameters(model):
    """Every parameter, whole, on the CPU: DTensors are gathered from the ranks."""
    return {name: (p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu()
            for name, p in model.named_parameters()}


def assert_same_on_every_rank(parameters, world):
    """Each rank's full parameters equal rank 0's, bit for bit."""
    everyone = [None] * world
    dist.all_gather_object(everyone, parameters)
    for theirs in everyone:
        for name, tensor in parameters.items():
            torch.testing.assert_close(theirs[name], tensor, rtol=0, atol=0,
                                       msg=lambda m, name=name: f"{name}: {m}")


def assert_parameters_close(got, want, **tolerances):
    assert got.keys() == want.keys(), (got.keys(), want.keys())
    for name in want:
        torch.testing.assert_close(got[name], want[name],
                                   msg=lambda m, name=name: f"{name}: {m}", **tolerances)


def check_redistribute(mesh, rank, world, device):
    """The functional collectives of DTensor, which full_tensor() and
    clip_grad_norm_ run on FSDP2's parameters and gradients: a partial sum
    over the ranks, made whole on every rank or scattered in shards."""
    parts = [torch.arange(4 * world * 3, dtype=torch.float32).reshape(4 * world, 3) * (r + 1)
             for r in range(world)]
    partial = DTensor.from_local(parts[rank].to(device), mesh, [Partial()])
    torch.testing.assert_close(partial.redistribute(mesh, [Shard(0)]).to_local().cpu(),
                               sum(parts).chunk(world)[rank], rtol=0, atol=0)
    torch.testing.assert_close(partial.redistribute(mesh, [Replicate()]).to_local().cpu(),
                               sum(parts), rtol=0, atol=0)
    mean = DTensor.from_local(parts[rank].to(device), mesh, [Partial("avg")])
    torch.testing.assert_close(mean.redistribute(mesh, [Shard(0)]).to_local().cpu(),
                               (sum(parts) / world).chunk(world)[rank], rtol=0, atol=0)
    sharded = DTensor.from_local(parts[0].chunk(world)[rank].to(device), mesh, [Shard(0)])
    torch.testing.assert_close(sharded.full_tensor().cpu(), parts[0], rtol=0, atol=0)


@case
def fsdp_matches_one_process(rank, world, device, directory):
    data = batches(world, steps=4)
    # The reference: one process, the whole batch, on the CPU.
    reference = make_model()
    train(reference, make_optimizer(reference), data)
    want = full_parameters(reference)

    model = shard(make_model().to(device), world)
    assert isinstance(model.head.weight, DTensor)
    assert model.head.weight.to_local().device == device
    check_redistribute(model.head.weight.device_mesh, rank, world, device)
    train(model, make_optimizer(model), data, rank, world, device)
    got = full_parameters(model)
    # NB: the gradient is the mean of two half-batch means instead of one
    # mean, which rounds differently in the last bits.
    assert_parameters_close(got, want, rtol=1e-4, atol=1e-5)
    assert_same_on_every_rank(got, world)


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def bfloat16_reference(data, world, device):
    """What FSDP2 computes under MixedPrecisionPolicy(bfloat16, float32), in
    one process on ``device`` without FSDP: each rank's forward and backward
    with a bfloat16 copy of the parameters, its gradients cast to float32
    and averaged over the ranks, and the step on the float32 parameters."""
    model = make_model().to(device)
    optimizer = sgd(model)
    for tokens, targets in data:
        optimizer.zero_grad()
        grads = []
        for rank in range(world):
            replica = copy.deepcopy(model).to(torch.bfloat16)
            loss_of(replica, tokens[rank::world].to(device),
                    targets[rank::world].to(device)).backward()
            grads.append([p.grad.float() for p in replica.parameters()])
        for parameter, *per_rank in zip(model.parameters(), *grads):
            parameter.grad = sum(per_rank) / world
        optimizer.step()
    return full_parameters(model)


@case
def fsdp_mixed_precision(rank, world, device, directory):
    # NB: SGD, not Adam: Adam's first steps are about the sign of each
    # gradient, and bfloat16 rounds small gradients to either sign.
    data = batches(world, steps=3)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    model = shard(make_model().to(device), world, policy)
    optimizer = sgd(model)
    for tokens, targets in data:
        optimizer.zero_grad()
        logits = model(tokens[rank::world].to(device))
        assert logits.dtype == torch.bfloat16
        nn.functional.cross_entropy(logits.flatten(0, 1).float(),
                                    targets[rank::world].to(device).flatten()).backward()
        # The sharded parameters and their gradients stay float32.
        assert model.head.weight.dtype == model.head.weight.grad.dtype == torch.float32
        optimizer.step()
    got = full_parameters(model)
    assert_same_on_every_rank(got, world)
    # The same math on one accinte device without FSDP: the same kernels on
    # the same values, and a float32 average of two values rounds the same
    # wherever it is computed, so the results are the same, bit for bit.
    assert_parameters_close(got, bfloat16_reference(data, world, device), rtol=0, atol=0)
    # The same math on the CPU. NB: not bit for bit: the CPU has fused
    # kernels for layer norm and attention that accumulate in float32, where
    # accinte runs ATen's composites of them (batch norm; the math attention)
    # and rounds to bfloat16 in between, a difference of one bfloat16 unit
    # in the last place in some activations.
    assert_parameters_close(got, bfloat16_reference(data, world, "cpu"), rtol=1e-2, atol=1e-3)


def state_of(model, optimizer):
    """The model's and optimizer's state, whole, on the CPU, by name."""
    model_state, optimizer_state = get_state_dict(model, optimizer)
    whole = {}
    for prefix, state in (("model", model_state), ("optim", optimizer_state)):
        for key, value in flatten(state, prefix):
            if isinstance(value, DTensor):
                value = value.full_tensor()
            # NB: a copy: Adam's step counts are CPU tensors already, which
            # .cpu() would return as they are, to be incremented later.
            whole[key] = (value.detach().to("cpu", copy=True) if isinstance(value, torch.Tensor)
                          else copy.deepcopy(value))
    return whole


def flatten(state, prefix):
    if isinstance(state, dict):
        for key, value in state.items():
            yield from flatten(value, f"{prefix}.{key}")
    elif isinstance(state, list):
        for index, value in enumerate(state):
            yield from flatten(value, f"{prefix}.{index}")
    else:
        yield prefix, state


def assert_states_equal(got, want):
    assert got.keys() == want.keys(), sorted(set(got) ^ set(want))
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            torch.testing.assert_close(got[key], value, rtol=0, atol=0,
                                       msg=lambda m, key=key: f"{key}: {m}")
        else:
            assert got[key] == value, (key, got[key], value)


@case
def checkpoint_two_ranks(rank, world, device, directory):
    """Saves from two ranks, loads into two fresh ranks, steps both."""
    data = batches(world, steps=3)
    model = shard(make_model().to(device), world)
    optimizer = make_optimizer(model)
    train(model, optimizer, data[:2], rank, world, device)
    model_state, optimizer_state = get_state_dict(model, optimizer)
    assert isinstance(model_state["head.weight"], DTensor)
    dcp.save({"model": model_state, "optim": optimizer_state},
             checkpoint_id=directory / "checkpoint")
    saved = state_of(model, optimizer)

    # A fresh model and optimizer, of other values, loaded from the files.
    torch.manual_seed(1000 + rank)
    fresh = shard(TinyTransformer().to(device), world)
    fresh_optimizer = make_optimizer(fresh)
    model_state, optimizer_state = get_state_dict(fresh, fresh_optimizer)
    state = {"model": model_state, "optim": optimizer_state}
    dcp.load(state, checkpoint_id=directory / "checkpoint")
    set_state_dict(fresh, fresh_optimizer, model_state_dict=state["model"],
                   optim_state_dict=state["optim"])
    assert_states_equal(state_of(fresh, fresh_optimizer), saved)

    # A further step gives the same results on both, bit for bit.
    train(model, optimizer, data[2:], rank, world, device)
    train(fresh, fresh_optimizer, data[2:], rank, world, device)
    after = state_of(model, optimizer)
    assert_states_equal(state_of(fresh, fresh_optimizer), after)
    if rank == 0:
        # For checkpoint_one_process: what it must load, and what the step
        # after gives.
        torch.save({"saved": saved, "after": after}, directory / "expected.pt")


@case
def checkpoint_one_process(rank, world, device, directory):
    """Loads checkpoint_two_ranks's checkpoint into one process, unsharded."""
    expected = torch.load(directory / "expected.pt")
    # LITERALINCLUDE START: CH11_DCP_ONE_PROCESS
    model = TinyTransformer().to(device)
    optimizer = make_optimizer(model)
    model_state, optimizer_state = get_state_dict(model, optimizer)
    assert not isinstance(model_state["head.weight"], DTensor)
    state = {"model": model_state, "optim": optimizer_state}
    # NB: with no process group, dcp.load reads every shard itself.
    dcp.load(state, checkpoint_id=directory / "checkpoint")
    set_state_dict(model, optimizer, model_state_dict=state["model"],
                   optim_state_dict=state["optim"])
    # LITERALINCLUDE END: CH11_DCP_ONE_PROCESS
    assert model.head.weight.device == device
    assert_states_equal(state_of(model, optimizer), expected["saved"])
    # The offline route: the checkpoint made one torch.save file of whole
    # CPU tensors.
    dcp_to_torch_save(directory / "checkpoint", directory / "whole.pt")
    whole = torch.load(directory / "whole.pt")
    assert_states_equal(dict(item for top, part in whole.items() for item in flatten(part, top)),
                        expected["saved"])

    # The step after, on the whole batch in one process: the same as the two
    # ranks' up to rounding (see fsdp_matches_one_process).
    data = batches(2, steps=3)
    train(model, optimizer, data[2:], device=device)
    after = state_of(model, optimizer)
    assert after.keys() == expected["after"].keys()
    for key, value in expected["after"].items():
        if isinstance(value, torch.Tensor):
            torch.testing.assert_close(after[key], value, rtol=1e-4, atol=1e-5,
                                       msg=lambda m, key=key: f"{key}: {m}")


def main():
    name, rank, world, store, directory = sys.argv[1:]
    rank, world, directory = int(rank), int(world), pathlib.Path(directory)
    device = torch.device("accinte", rank % torch.accinte.device_count())
    torch.accinte.set_device(device)
    if world > 1:
        # NB: gloo for CPU tensors too, as DCP plans the checkpoint with
        # object collectives on CPU tensors.
        dist.init_process_group("cpu:gloo,accinte:accl", init_method=f"file://{store}",
                                rank=rank, world_size=world, timeout=TIMEOUT)
    try:
        CASES[name](rank, world, device, directory)
        torch.accinte.synchronize()
        sys.stdout.write(f"OK {name}\n")
        sys.stdout.flush()
    finally:
        if world > 1:
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
