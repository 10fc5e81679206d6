"""The dispatch keys of an accinte and of a CPU tensor, in stage 04, in the
order the dispatcher tries them (highest priority first)."""

import torch
import torch_accinte  # noqa: F401


def keys_in_dispatch_order(tensor: torch.Tensor) -> str:
    # NB: a DispatchKeySet prints from the lowest priority to the highest;
    # the dispatcher starts from the highest.
    listed = str(torch._C._dispatch_keys(tensor))
    names = listed[listed.index("(") + 1:-1].split(", ")
    return " -> ".join(reversed(names))


x = torch.ones(3, device="accinte", requires_grad=True)
print("accinte tensor:", keys_in_dispatch_order(x))
print("CPU tensor:    ", keys_in_dispatch_order(torch.ones(3)))
