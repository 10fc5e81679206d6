"""What a user of stage 10 sees: a format tag on tensors made from a tagged
one and through a checkpoint, and the origin of a few storages.

Addresses change from run to run, so the origins are printed relative to the
first allocation.
"""

import copy
import io

import torch
import torch_accinte  # noqa: F401

weight = torch.randn(4, 4, generator=torch.Generator().manual_seed(0)).to("accinte")
torch.accinte.set_tensor_format(weight, "tiled")
print("format:", torch.accinte.get_tensor_format(weight))
print("saved metadata:", torch._C._get_tensor_metadata(weight))
derived = {"weight.t()": weight.t(), "deepcopy": copy.deepcopy(weight),
           "to('accinte:1')": weight.to("accinte:1"), "weight * 2": weight * 2}
print(" | ".join(f"{name}: {torch.accinte.get_tensor_format(tensor)}"
                 for name, tensor in derived.items()))

checkpoint = io.BytesIO()
torch.save({"weight": weight}, checkpoint)
for map_location in [None, "accinte:1", "cpu"]:
    checkpoint.seek(0)
    loaded = torch.load(checkpoint, map_location=map_location, weights_only=True)["weight"]
    print(f"load(map_location={map_location!r}): {loaded.device},",
          torch.accinte.get_tensor_format(loaded))

print()
tensors = {"a = empty(16)": torch.empty(16, device="accinte"),
           "b = empty(16)": torch.empty(16, device="accinte"),
           "c = empty(1M)": torch.empty(1 << 20, device="accinte")}
first = torch.accinte.storage_origin(tensors["a = empty(16)"])
for label, tensor in tensors.items():
    origin = torch.accinte.storage_origin(tensor)
    same = "same as a's" if origin.allocation_base == first.allocation_base else "another"
    print(f"{label}: serial +{origin.serial - first.serial}, {same} allocation "
          f"({origin.allocation_size >> 10} KiB), offset {origin.offset}")
