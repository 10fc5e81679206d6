"""Chapter 16: where the dispatcher sends a sparse accinte tensor, asked of
the dispatcher itself for every operator the CPU runs on sparse tensors.

A composite kernel (CompositeExplicitAutograd, or the NonFunctional one
generated for a structured operator) serves every backend key, sparse ones
included, and beats a fallback; it assumes a dense tensor. A release that
adds such an operator turns this test red, with the operator's name."""

import pytest
import torch
import torch_accinte  # noqa: F401

FAMILIES = {"SparseCPU": "SparsePrivateUse1", "SparseCsrCPU": "SparseCsrPrivateUse1"}

# NB: the composite `is_pinned` and `_pin_memory` are right here: accinte
# memory is never pinned host memory, as for CUDA's sparse tensors.
COMPOSITE_IS_RIGHT = {"aten::is_pinned", "aten::_pin_memory"}


def _routes(cpu_key):
    """(operator, the line of the accinte key's kernel in the dispatch
    table) for every operator with a kernel for `cpu_key`."""
    key = FAMILIES[cpu_key]
    for name in sorted(torch._C._dispatch_get_all_op_names()):
        if not torch._C._dispatch_has_kernel_for_dispatch_key(name, cpu_key):
            continue
        table = torch._C._dispatch_dump_table(name).splitlines()
        (line,) = [entry for entry in table if entry.startswith(f"{key}:")]
        yield name, line


def _is_view(name):
    namespace, _, rest = name.partition("::")
    operator, _, overload = rest.partition(".")
    schema = getattr(getattr(getattr(torch.ops, namespace), operator), overload or "default")._schema
    return any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


@pytest.mark.parametrize("cpu_key", FAMILIES)
def test_no_sparse_operator_is_left_to_a_composite(cpu_key):
    composites = [
        name
        for name, line in _routes(cpu_key)
        if "Composite" in line and name not in COMPOSITE_IS_RIGHT
    ]
    assert composites == []


@pytest.mark.parametrize("cpu_key", FAMILIES)
def test_every_sparse_view_has_a_kernel(cpu_key):
    # The fallback refuses views; each one the CPU has must be a kernel.
    refused = [name for name, line in _routes(cpu_key) if "fallback" in line and _is_view(name)]
    assert refused == []


def test_the_routes_are_counted():
    # The operators the CPU runs on COO tensors: most take the CPU route,
    # some run here through ATen's device-generic kernels or this chapter's.
    routes = dict(_routes("SparseCPU"))
    fallback = [name for name, line in routes.items() if "fallback" in line]
    kernels = [
        name for name, line in routes.items() if "16_layouts" in line and "fallback" not in line
    ]
    assert len(routes) > 100
    assert fallback and kernels
    assert "aten::_indices" in kernels and "aten::_coalesce" in kernels
    assert "aten::addmm" in fallback
