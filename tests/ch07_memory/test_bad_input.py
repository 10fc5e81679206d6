"""Chapter 07: device indices of the memory functions.

test_allocator.py covers index 7 for two of them and out-of-memory with its
recovery; here every memory function of torch.accinte, with indices past the
end and negative.
"""

import pytest
import torch
import torch_accinte  # noqa: F401

MEMORY_FUNCTIONS = ["memory_allocated", "max_memory_allocated", "memory_reserved",
                    "max_memory_reserved", "memory_stats", "memory_stats_as_nested_dict",
                    "memory_summary", "reset_peak_memory_stats",
                    "reset_accumulated_memory_stats", "mem_get_info"]


@pytest.mark.parametrize("name", MEMORY_FUNCTIONS)
def test_memory_functions_refuse_bad_indices(name):
    function = getattr(torch.accinte, name)
    for index in (2, 5, -1):
        with pytest.raises(RuntimeError, match=rf"invalid device index {index}: "
                           r"there are 2 accinte devices"):
            function(index)
    with pytest.raises(RuntimeError, match="Invalid device string: 'accinte:-1'"):
        function("accinte:-1")
    # The valid indices still answer, and the allocator still allocates.
    function(1)
    torch.testing.assert_close(torch.arange(3.0, device="accinte:1").cpu(), torch.arange(3.0))
