"""Chapter 15: graphs.

Registers accinte's graph with PyTorch's graph registry (what
``torch.accelerator.Graph`` creates), and adds ``torch.accinte``'s graph
API, named after ``torch.cuda``'s (see ``torch_accinte/graphs.py``).
"""

import sys

from torch_accinte import _C, device_module, graphs

# LITERALINCLUDE START: CH15_PY_PLUGIN
# NB: after the rename of chapter 01: PyTorch's registry is keyed by the
# backend's name, "ACCINTE".
_C._register_graph_impl()
device_module._extend(
    AccinteGraph=graphs.AccinteGraph,
    graph=graphs.graph,
    graph_pool_handle=graphs.graph_pool_handle,
    is_current_stream_capturing=graphs.is_current_stream_capturing,
    make_graphed_callables=graphs.make_graphed_callables,
    graphs=graphs,
)
sys.modules["torch.accinte.graphs"] = graphs
# LITERALINCLUDE END: CH15_PY_PLUGIN
