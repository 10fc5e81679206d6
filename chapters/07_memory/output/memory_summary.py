"""torch.accinte.memory_summary() after a few allocations of known sizes.

A 4000-byte tensor (a 4 KiB block of a 2 MiB small-pool segment), a 3 MiB
tensor (a block of a 20 MiB large-pool segment), and a 12 MiB tensor, freed
again, which fits in the free 17 MiB of that segment.
"""

import torch
import torch_accinte  # noqa: F401

small = torch.empty(1000, dtype=torch.float32, device="accinte")
large = torch.empty(3 * 2**20, dtype=torch.uint8, device="accinte")
cached = torch.empty(12 * 2**20, dtype=torch.uint8, device="accinte")
del cached
print(torch.accinte.memory_summary())
