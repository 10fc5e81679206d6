"""Graphs on accinte: ``torch.accinte.AccinteGraph`` and its helpers.

The names and behaviour of ``torch.cuda``'s graph API (``CUDAGraph``,
``graph``, ``graph_pool_handle``, ``is_current_stream_capturing``,
``make_graphed_callables``), over chapter 15's C++ graph, which is also
what :py:class:`torch.accelerator.Graph` creates for accinte.
"""

from __future__ import annotations

import gc
from typing import Any, Callable, Optional, Union

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from torch_accinte import _C, device_module

__all__ = [
    "AccinteGraph", "graph", "graph_pool_handle", "is_current_stream_capturing",
    "make_graphed_callables",
]


# LITERALINCLUDE START: CH15_PY_CLASS
class AccinteGraph(_C._Graph):
    """A graph of accinte work: captured once, replayed with one launch.

    As ``torch.cuda.CUDAGraph``: ``capture_begin(pool=None,
    capture_error_mode="global")`` and ``capture_end()`` capture the current
    stream's work (a side stream, never the default one), ``replay()`` runs
    it again on the current stream of the capture's device, ``reset()``
    drops it and its memory pool, ``pool()`` names the pool for another
    graph to share, ``register_generator_state(generator)`` makes a
    generator other than the device's default capture-safe, and with
    ``keep_graph=True`` the captured graph is kept until ``instantiate()``
    (or the first replay).
    """

    def __new__(cls, keep_graph: bool = False):
        device_module._lazy_init()
        return super().__new__(cls, keep_graph)
# LITERALINCLUDE END: CH15_PY_CLASS


def graph_pool_handle() -> tuple[int, int]:
    """An id for a memory pool that graphs can share: pass it as ``pool``
    to several captures (as ``torch.cuda.graph_pool_handle``)."""
    return _C._graph_pool_handle()


def is_current_stream_capturing() -> bool:
    """Whether the current stream of the current device is capturing a
    graph (as ``torch.cuda.is_current_stream_capturing``)."""
    device_module._lazy_init()
    return _C._is_current_stream_capturing()


# LITERALINCLUDE START: CH15_PY_GRAPH_CONTEXT
class graph:
    """Captures the work of its ``with`` block into ``accinte_graph``.

    As ``torch.cuda.graph``: the block runs on ``stream`` (by default a
    side stream kept for captures on the current device), after the device
    has been synchronized and the cache emptied, so that the capture starts
    from quiet memory; ``pool`` shares another graph's memory pool
    (``other.pool()`` or ``graph_pool_handle()``); ``capture_error_mode``
    is ``"global"``, ``"thread_local"`` or ``"relaxed"``.
    """

    _capture_streams: dict[int, torch.Stream] = {}

    def __init__(self, accinte_graph: AccinteGraph,
                 pool: Optional[tuple[int, int]] = None,
                 stream: Optional[torch.Stream] = None,
                 capture_error_mode: str = "global"):
        if stream is None:
            device = device_module.current_device()
            stream = self._capture_streams.get(device)
            if stream is None:
                stream = device_module.Stream(device)
                self._capture_streams[device] = stream
        self.accinte_graph = accinte_graph
        self.pool = pool
        self.capture_stream = stream
        self.capture_error_mode = capture_error_mode
        self._stream_context = device_module.stream(stream)

    def __enter__(self) -> None:
        device_module.synchronize()
        gc.collect()  # NB: dead cycles' tensors, freed before the pool opens
        device_module.empty_cache()
        self._stream_context.__enter__()
        try:
            self.accinte_graph.capture_begin(
                self.pool, capture_error_mode=self.capture_error_mode
            )
        except BaseException:
            self._stream_context.__exit__(None, None, None)
            raise

    def __exit__(self, *exc_info: Any) -> None:
        try:
            if exc_info[0] is None:
                self.accinte_graph.capture_end()
            else:
                # NB: the block's own error is the one to see; the capture
                # it broke is abandoned, not ended with a second error.
                self.accinte_graph.reset()
        finally:
            self._stream_context.__exit__(*exc_info)
# LITERALINCLUDE END: CH15_PY_GRAPH_CONTEXT


# LITERALINCLUDE START: CH15_GRAPHED_CALLABLES
def make_graphed_callables(
    callables: Union[Callable, tuple],
    sample_args: tuple,
    num_warmup_iters: int = 3,
    allow_unused_input: bool = False,
    pool: Optional[tuple[int, int]] = None,
) -> Union[Callable, tuple]:
    """Graphed versions of modules or functions, forward and backward.

    As ``torch.cuda.make_graphed_callables``: each callable runs
    ``num_warmup_iters`` times on a side stream, then its forward and its
    backward (``torch.autograd.grad`` of its outputs) are captured into two
    graphs that share one memory pool. The result copies its inputs into
    the captured ones and replays; its backward does the same with the
    gradients. Arguments must be tensors with the shapes, dtypes and
    ``requires_grad`` of ``sample_args``; a module's graphed forward runs
    only in the training mode it had when graphed (else its own forward).
    Several callables given as a tuple are captured in order, sharing the
    pool, and must then be called in that order.
    """
    one = not isinstance(callables, tuple)
    if one:
        callables, sample_args = (callables,), (sample_args,)
    if torch.is_autocast_enabled("accinte"):
        raise RuntimeError("make_graphed_callables does not support autocast: "
                           "capture outside an autocast region")
    flat_samples = []
    for func, args in zip(callables, sample_args):
        if isinstance(func, torch.nn.Module):
            if func._backward_hooks or func._forward_hooks or func._forward_pre_hooks:
                raise RuntimeError("modules must not have hooks registered "
                                   "when they are graphed")
            if any(not p.requires_grad for p in func.parameters()):
                raise RuntimeError("every parameter of a graphed module must "
                                   "require grad")
        flat, _ = tree_flatten(args)
        if not all(isinstance(a, torch.Tensor) and a.device.type == "accinte"
                   for a in flat):
            raise TypeError("make_graphed_callables: every sample argument "
                            "must be an accinte tensor")
        flat_samples.append(tuple(flat))
    params = [tuple(f.parameters()) if isinstance(f, torch.nn.Module) else ()
              for f in callables]
    static_inputs = [s + p for s, p in zip(flat_samples, params)]
    if pool is None:
        pool = graph_pool_handle()

    # Warm-up on a side stream: lazy initializations (cuBLAS-like workspaces,
    # autograd's buffers) happen outside the capture.
    side = device_module.Stream()
    side.wait_stream(device_module.current_stream())
    with device_module.stream(side):
        for func, args, inputs in zip(callables, sample_args, static_inputs):
            for _ in range(num_warmup_iters):
                outputs, _ = tree_flatten(func(*args))
                _grads(outputs, inputs, allow_unused_input)
            del outputs
    device_module.current_stream().wait_stream(side)
    device_module.synchronize()

    # Forward graphs in order, then backward graphs in reverse order, all in
    # one pool, as the callables will run.
    forward, outputs, output_specs = [], [], []
    for func, args in zip(callables, sample_args):
        g = AccinteGraph()
        with graph(g, pool=pool):
            out = func(*args)
        flat, spec = tree_flatten(out)
        forward.append(g)
        outputs.append(tuple(flat))
        output_specs.append(spec)
    backward = [None] * len(callables)
    grad_outputs = [None] * len(callables)
    grad_inputs = [None] * len(callables)
    for i in reversed(range(len(callables))):
        grad_outputs[i] = tuple(
            torch.empty_like(o) if o.requires_grad else None for o in outputs[i]
        )
        g = AccinteGraph()
        with graph(g, pool=pool):
            grad_inputs[i] = _grads(outputs[i], static_inputs[i],
                                    allow_unused_input, grad_outputs[i])
        backward[i] = g
        # NB: the captured outputs' autograd graph is done with; kept, it
        # would tie the parameters' gradient accumulators to the capture's
        # stream for every later backward.
        outputs[i] = tuple(o.detach() for o in outputs[i])

    graphed = tuple(
        _graphed(callables[i], forward[i], backward[i], flat_samples[i],
                 static_inputs[i], outputs[i], output_specs[i],
                 grad_outputs[i], grad_inputs[i])
        for i in range(len(callables))
    )
    return graphed[0] if one else graphed
# LITERALINCLUDE END: CH15_GRAPHED_CALLABLES


def _grads(outputs, inputs, allow_unused, grad_outputs=None):
    """The gradients of ``outputs`` (those that require grad) with respect
    to ``inputs`` (those that require grad): one entry per input, ``None``
    where there is none."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs or [None] * len(outputs))
             if isinstance(o, torch.Tensor) and o.requires_grad]
    wanted = [i for i in inputs if i.requires_grad]
    if not pairs or not wanted:
        return tuple(None for _ in inputs)
    grads = iter(torch.autograd.grad(
        [o for o, _ in pairs], wanted,
        grad_outputs=[g if g is not None else torch.ones_like(o)
                      for o, g in pairs],
        allow_unused=allow_unused,
    ))
    return tuple(next(grads) if i.requires_grad else None for i in inputs)


def _graphed(func, forward, backward, samples, static_inputs, static_outputs,
             output_spec, static_grad_outputs, static_grad_inputs):
    """The callable that replays ``forward`` and ``backward``."""
    n_args = len(samples)

    class Graphed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            for static, given in zip(static_inputs[:n_args], inputs[:n_args]):
                if static.data_ptr() != given.data_ptr():
                    static.copy_(given)
            forward.replay()
            return tuple(o.detach() for o in static_outputs)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, *grads):
            for static, given in zip(static_grad_outputs, grads):
                if static is not None and given is not None:
                    static.copy_(given)
                elif static is not None:
                    static.zero_()
            backward.replay()
            return tuple(g.detach() if g is not None else None
                         for g in static_grad_inputs)

    def run(*args, **kwargs):
        if kwargs:
            raise TypeError("a graphed callable takes positional arguments only")
        flat, _ = tree_flatten(args)
        if len(flat) != n_args or any(
                a.shape != s.shape or a.dtype != s.dtype or
                a.requires_grad != s.requires_grad
                for a, s in zip(flat, samples)):
            raise ValueError("a graphed callable must be called with tensors of "
                             "the shapes, dtypes and requires_grad of its "
                             "sample_args")
        out = Graphed.apply(*(tuple(flat) + static_inputs[n_args:]))
        return tree_unflatten(list(out), output_spec)

    if not isinstance(func, torch.nn.Module):
        return run
    training = func.training
    eager = func.forward

    def module_forward(*args, **kwargs):
        if func.training == training:
            return run(*args, **kwargs)
        return eager(*args, **kwargs)

    func.forward = module_forward
    return func
