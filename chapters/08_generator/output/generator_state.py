"""How an accinte generator's state moves, launch by launch, in stage 08.

Seeds the default generator of accinte:0, prints its (seed, offset) state
around a few launches, and shows that replaying a state on another stream
gives the same numbers.
"""

import struct

import torch
import torch_accinte  # noqa: F401


def describe(label: str) -> None:
    state = torch.accinte.get_rng_state()
    seed, offset = struct.unpack("<QQ", bytes(state.tolist()))
    print(f"{label:<32} seed={seed} offset={offset} "
          f"({state.numel()} bytes, {state.dtype})")


with torch.random.fork_rng(devices=[0], device_type="accinte"):
    torch.accinte.manual_seed(2024)
    describe("after manual_seed(2024)")
    saved = torch.accinte.get_rng_state()
    first = torch.rand(4, device="accinte")
    describe("after rand(4)")
    torch.randn(1_000_000, device="accinte")
    describe("after randn(1_000_000)")
    print("rand(4) on the default stream:", first.cpu())

    torch.accinte.set_rng_state(saved)
    side = torch.accinte.Stream()
    with torch.accinte.stream(side):
        replay = torch.rand(4, device="accinte")
    # NB: as on CUDA, reading on the default stream what another stream
    # wrote needs the two ordered first.
    torch.accinte.current_stream().wait_stream(side)
    print("replayed on a new stream:     ", replay.cpu())
    print("identical:", torch.equal(first.cpu(), replay.cpu()))
