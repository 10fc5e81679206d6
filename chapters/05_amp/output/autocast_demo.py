"""What autocast does on accinte: result dtypes of a few operators inside
float16 and bfloat16 regions, and the dispatch table row of `aten::mm`."""

import re

import torch
import torch_accinte  # noqa: F401

a = torch.randn(4, 4).to("accinte")
h = a.half()
index = torch.tensor([0, 2]).to("accinte")
cases = {
    "torch.mm(a, a)": lambda: torch.mm(a, a),
    "torch.softmax(h, 0)": lambda: torch.softmax(h, 0),
    "torch.sum(h)": lambda: torch.sum(h),
    "torch.cat([a, h])": lambda: torch.cat([a, h]),
    "a.index_put((index,), h[:2])": lambda: a.index_put((index,), h[:2]),
    "a + a  (no policy)": lambda: a + a,
}
print("a is float32, h is float16, both on accinte\n")
print(f"{'expression':32} {'outside':10} {'float16':10} bfloat16")
for text, case in cases.items():
    try:
        outside = str(case().dtype).removeprefix("torch.")
    except RuntimeError:
        outside = "error"
    inside = []
    for dtype in (torch.float16, torch.bfloat16):
        with torch.autocast("accinte", dtype=dtype):
            inside.append(str(case().dtype).removeprefix("torch."))
    print(f"{text:32} {outside:10} {inside[0]:10} {inside[1]}")

print()
for row in torch._C._dispatch_dump_table("aten::mm").splitlines():
    if row.startswith(("AutocastPrivateUse1", "AutocastCUDA")):
        # NB: keep only the file name of registration sites (build paths).
        print(re.sub(r"registered at \S*/([^/:\s]+):\d+", r"registered at \1", row))
for row in torch._C._dispatch_dump_table("aten::add.Tensor").splitlines():
    if row.startswith("AutocastPrivateUse1"):
        print("aten::add.Tensor " + re.sub(r"registered at \S*/([^/:\s]+):\d+",
                                          r"registered at \1", row))
