"""The graph a capture made, as the emulator's DOT dump shows it.

Two streams: the capturing one computes ``x * 2`` while a forked one
computes ``x + 1``, then the origin joins the fork and adds both.
``debug_dump`` writes the graph (after ``enable_debug_mode()``); this
prints it.
"""

import os
import tempfile

import torch
import torch_accinte  # noqa: F401

x = torch.ones(4, device="accinte")
graph = torch.accinte.AccinteGraph()
graph.enable_debug_mode()
with torch.accinte.graph(graph):
    origin = torch.accinte.current_stream()
    fork = torch.accinte.Stream()
    fork.wait_stream(origin)         # the fork joins the capture
    doubled = x * 2
    with torch.accinte.stream(fork):
        incremented = x + 1
    origin.wait_stream(fork)         # and is joined back
    total = doubled + incremented

with tempfile.TemporaryDirectory() as directory:
    path = os.path.join(directory, "graph.dot")
    graph.debug_dump(path)
    with open(path) as dump:
        print(dump.read(), end="")
