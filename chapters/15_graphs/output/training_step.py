"""A captured training step against the same steps run eagerly.

A small MLP is trained on the same eight batches twice: eagerly, and by
replaying a graph of one whole step (forward, backward and a
capturable Adam step) with each batch copied into the static inputs.
"""

import copy

import torch
import torch_accinte  # noqa: F401

torch.manual_seed(0)
eager = torch.nn.Sequential(
    torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to("accinte")
model = copy.deepcopy(eager)
generator = torch.Generator().manual_seed(1)
data = [(torch.randn(5, 8, generator=generator), torch.randn(5, 4, generator=generator))
        for _ in range(8)]


def loss_fn(prediction, target):
    return ((prediction - target) ** 2).mean()


def eager_losses():
    optimizer = torch.optim.Adam(eager.parameters(), lr=0.01, capturable=True)
    losses = []
    for x, y in data:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(eager(x.to("accinte")), y.to("accinte"))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def replayed_losses():
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, capturable=True)
    static_x = torch.empty(5, 8, device="accinte")
    static_y = torch.empty(5, 4, device="accinte")
    losses = []
    # Three warm-up steps on a side stream, outside any graph.
    side = torch.accinte.Stream()
    side.wait_stream(torch.accinte.current_stream())
    with torch.accinte.stream(side):
        for x, y in data[:3]:
            static_x.copy_(x)
            static_y.copy_(y)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(static_x), static_y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    del loss  # NB: its autograd graph would tie the capture to the side stream
    torch.accinte.current_stream().wait_stream(side)
    # One step captured: its gradients and temporaries live in the graph's pool.
    graph = torch.accinte.AccinteGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.accinte.graph(graph):
        static_loss = loss_fn(model(static_x), static_y)
        static_loss.backward()
        optimizer.step()
    # Each later step: new data into the static inputs, one replay.
    for x, y in data[3:]:
        static_x.copy_(x)
        static_y.copy_(y)
        graph.replay()
        losses.append(static_loss.item())
    return losses


print("step  eager loss   graph loss   how the graph's step ran")
for step, (a, b) in enumerate(zip(eager_losses(), replayed_losses())):
    how = "warm-up, eager" if step < 3 else "replay"
    print(f"{step:>4}  {a:.8f}   {b:.8f}   {how}")
