"""Parity of the device module with ``torch.cuda``: the kit's only checks
of ``torch.NAME``'s convenience names.

Every other check reaches its mechanism through PyTorch's device-generic
APIs (``torch.accelerator``, ``torch.Stream``, ``torch.Event``,
``torch.accelerator.memory``) wherever PyTorch has one, so a backend whose
module lacks ``synchronize`` or ``memory_allocated`` fails here, once, and
its caching allocator, copies and streams are still checked for what they
do. One check per chapter that adds names, for the stage contract.
"""

import torch

from .._api import Section
from .._helpers import DEVICE

SECTION = Section(
    chapter="01", title="Device module parity with torch.cuda", requires=(DEVICE,),
    missing="torch.NAME lacks names of torch.cuda (the mechanisms are checked elsewhere, "
            "through torch.accelerator)")


def _absent(ctx, names):
    module = ctx.module
    if module is None:
        raise AssertionError(f"torch.{ctx.device} does not exist")
    absent = [name for name in names if not hasattr(module, name)]
    assert not absent, f"torch.{ctx.device} lacks {', '.join(absent)}"
    not_cuda = [name for name in names if not hasattr(torch.cuda, name)]
    assert not not_cuda, f"the kit's list names what torch.cuda lacks: {not_cuda}"


# LITERALINCLUDE START: KIT_CUDA_NAMES
#: The ``torch.cuda`` names a device module mirrors from chapter 01 on: the
#: device, its properties, streams and events. Each is checked on torch.cuda
#: too, so that the list stays one of CUDA's names.
DEVICE_MODULE_NAMES = (
    "Event", "Stream", "StreamContext", "current_device", "current_stream",
    "default_stream", "device", "device_count", "device_of", "get_device_capability",
    "get_device_name", "get_device_properties", "init", "is_available",
    "is_initialized", "set_device", "set_stream", "stream", "synchronize",
)


@SECTION.check
def module_mirrors_torch_cuda(ctx):
    """``torch.NAME`` is the device module and has chapter 01's names of
    ``torch.cuda``; its device properties have CUDA's fields."""
    assert torch.get_device_module(ctx.device) is ctx.module
    _absent(ctx, DEVICE_MODULE_NAMES)
    module = ctx.module
    for index in range(torch.accelerator.device_count()):
        properties = module.get_device_properties(index)
        for field in ("name", "total_memory", "major", "minor"):
            assert hasattr(properties, field), f"device properties lack {field}"
        assert module.get_device_name(index) == properties.name
        assert module.get_device_capability(index) == (properties.major, properties.minor)
# LITERALINCLUDE END: KIT_CUDA_NAMES


# NB: without autocast on the device, its names say nothing more.
@SECTION.check(chapter="05", requires=("s05_autocast.autocast_is_available",))
def module_mirrors_torch_cuda_amp(ctx):
    """``torch.NAME`` has ``torch.cuda``'s ``is_bf16_supported``."""
    _absent(ctx, ("is_bf16_supported",))
    assert isinstance(ctx.module.is_bf16_supported(), bool)


#: The ``torch.cuda`` memory functions a device module mirrors.
MEMORY_NAMES = (
    "empty_cache", "mem_get_info", "memory_allocated", "memory_reserved",
    "max_memory_allocated", "max_memory_reserved", "memory_stats",
    "memory_snapshot", "memory_summary", "reset_peak_memory_stats",
    "reset_accumulated_memory_stats", "set_per_process_memory_fraction",
    "get_per_process_memory_fraction", "MemPool", "use_mem_pool",
    "caching_allocator_alloc", "caching_allocator_delete", "host_memory_stats",
)


@SECTION.check(chapter="07")
def module_mirrors_torch_cuda_memory(ctx):
    """``torch.NAME`` has ``torch.cuda``'s memory-management functions, and
    they agree with ``torch.accelerator.memory``'s."""
    _absent(ctx, MEMORY_NAMES)
    module = ctx.module
    assert module.memory_allocated() == torch.accelerator.memory_allocated()
    assert module.mem_get_info(0)[1] == torch.accelerator.get_memory_info(0)[1]
    assert module.get_device_properties(0).total_memory == torch.accelerator.get_memory_info(0)[1]
