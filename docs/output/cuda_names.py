# stage: 16
"""The table of ``torch.cuda``'s names on the Python API page.

Prints Markdown (the page includes it as Markdown): every name of
``torch.cuda`` that any accelerator can have, its ``torch.accinte``
counterpart on the final stage and the chapter that adds it, then the names
only CUDA can have, grouped by reason. The classification is
tools/cuda_names.py; whether a counterpart exists is asked of the stage.
"""

import pathlib
import sys

import torch
import torch_accinte  # noqa: F401

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))
import cuda_names  # noqa: E402

applicable = sorted(cuda_names.APPLICABLE.items(), key=lambda item: item[0].lower())
present = [name for name, _ in applicable
           if hasattr(torch.accinte, cuda_names.counterpart(name))]
print(f"{len(present)} of the {len(applicable)} names that apply to any accelerator "
      "are on `torch.accinte`:\n")
print("| `torch.cuda` | `torch.accinte` | Chapter |")
print("| --- | --- | --- |")
for name, chapter in applicable:
    ours = cuda_names.counterpart(name)
    # NB: the page shows the final stage, which has every name; the tests
    # of tests/ch01_minimal_ops/test_cuda_names.py say which one is absent.
    assert hasattr(torch.accinte, ours), f"torch.accinte.{ours} is missing"
    where = f"{{doc}}`{chapter[:2]} <../chapters/{chapter}/README>`"
    print(f"| `{name}` | `torch.accinte.{ours}` | {where} |")

print("\nNames only CUDA can have:\n")
print("| Reason | `torch.cuda` names |")
print("| --- | --- |")
for reason, sentence in cuda_names.REASONS.items():
    names = sorted((name for name, why in cuda_names.CUDA_ONLY.items() if why == reason),
                   key=str.lower)
    print(f"| {sentence} | {', '.join(f'`{name}`' for name in names)} |")
