"""Chapter 15, graphs: ``torch.accelerator.Graph`` captures the device's
work from a stream and replays it, as it does on CUDA.

Public APIs only: a ``torch.Stream`` of the device, a graph used as a
context manager and replayed, a random operator inside a graph (each
replay draws new numbers, and seeding before a replay gives the numbers
the same operator draws eagerly after the same seed), a second graph
sharing the first's memory pool, and the two errors every backend must
raise: a capture on the default stream and a replay of a graph never
captured.
"""

import torch

from .._api import Section
from .._helpers import ACCELERATOR, COPIES, DEVICE, OPERATORS, preserved_rng

SECTION = Section(
    chapter="15", title="Graphs", requires=(DEVICE, COPIES, OPERATORS, ACCELERATOR),
    missing="torch.accelerator.Graph cannot capture and replay the device's work "
            "(no graph implementation registered for the device)")


@SECTION.check
def capture_and_replay(ctx):
    x = torch.zeros(4, device=ctx.dev())
    graph = torch.accelerator.Graph()
    with torch.Stream(device=ctx.dev()), graph:
        x += 1
    assert torch.equal(x.cpu(), torch.zeros(4)), "the captured work ran during the capture"
    graph.replay()
    graph.replay()
    torch.accelerator.synchronize()
    assert torch.equal(x.cpu(), torch.full((4,), 2.0)), \
        f"two replays of x += 1 gave {x.cpu().tolist()}"
    shared = torch.accelerator.Graph(pool=graph.pool())
    with torch.Stream(device=ctx.dev()), shared:
        y = x * 3
    shared.replay()
    torch.accelerator.synchronize()
    assert torch.equal(y.cpu(), torch.full((4,), 6.0)), "a graph sharing a pool computed wrong values"


@SECTION.check(missing="random numbers in a graph repeat at every replay, or ignore the seed")
def random_numbers_are_capture_safe(ctx):
    with preserved_rng(ctx):
        graph = torch.accelerator.Graph()
        with torch.Stream(device=ctx.dev()), graph:
            drawn = torch.rand(256, device=ctx.dev())
        ctx.module.manual_seed(5)
        graph.replay()
        first = drawn.cpu()
        graph.replay()
        second = drawn.cpu()
        assert not torch.equal(first, second), "two replays drew the same numbers"
        ctx.module.manual_seed(5)
        eager = torch.rand(256, device=ctx.dev()).cpu()
        assert torch.equal(first, eager), \
            "a replay after manual_seed(s) drew other numbers than the same operator eagerly"


@SECTION.check
def misuse_is_refused(ctx):
    graph = torch.accelerator.Graph()
    try:
        graph.replay()
    except RuntimeError:
        pass
    else:
        raise AssertionError("replaying a graph that was never captured did not raise")
    try:
        with torch.accelerator.Graph():  # the default stream
            pass
    except RuntimeError:
        pass
    else:
        raise AssertionError("a capture on the default stream did not raise")
