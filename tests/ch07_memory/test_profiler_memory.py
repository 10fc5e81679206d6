"""Chapter 07: the caching allocator reports to PyTorch's profiler.

``torch.profiler.profile(profile_memory=True)`` records every allocation and
free an allocator reports through ``c10::reportMemoryUsageToProfiler``, as
CUDA's caching allocator does; with only the CPU activity, that is all a
profile of accinte shows before chapter 12 adds the device's activities.
"""

import torch
from torch.profiler import ProfilerActivity, profile


def memory_events(prof):
    """What was reported outside any operator (PyTorch gives an operator
    the allocations made inside it)."""
    return [e for e in prof.events() if e.name == "[memory]"]


def test_allocations_and_frees_are_in_a_memory_profile(accinte):
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        x = torch.empty(1 << 20, device=accinte)
        del x
    # One block of 4 MiB, allocated by aten::empty, freed by `del`.
    averages = {e.key: e for e in prof.key_averages()}
    assert averages["aten::empty"].device_memory_usage == 4 << 20
    assert [e.device_memory_usage for e in memory_events(prof)] == [-(4 << 20)]


def test_the_size_reported_is_the_block_the_allocator_hands_out(accinte):
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        x = torch.empty(3, device=accinte)  # 12 bytes: a 512-byte block
    averages = {e.key: e for e in prof.key_averages()}
    assert averages["aten::empty"].device_memory_usage == 512
    del x


def test_nothing_is_reported_without_profile_memory(accinte):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        x = torch.empty(1 << 10, device=accinte)
        del x
    assert memory_events(prof) == []
