"""Which operators of a training step still take the CPU fallback, in
stage 09.

Records one training step of two models with ``torch.accinte.record_fallbacks``:
the benchmarks' MLP (linear layers, ReLU, cross-entropy, SGD) and a small
convolutional network (convolution, BatchNorm, max pooling, Adam), which both
run entirely on native kernels now, and the same network with a bilinear
upsampling layer, an operator this chapter gives no kernel.
Prints the operators and their call counts (``record.calls``); the times
that ``record.table()`` adds are left out, as they change from run to run.
"""

import torch
import torch.nn.functional as F
import torch_accinte  # noqa: F401


def fallback_calls(model: torch.nn.Module, optimizer_class, inputs) -> dict:
    """The fallback calls of one training step of ``model`` on accinte."""
    model = model.to("accinte")
    optimizer = optimizer_class(model.parameters(), lr=1e-3)
    inputs = inputs.to("accinte")
    targets = torch.randint(0, 10, (64,)).to("accinte")
    with torch.accinte.record_fallbacks() as record:
        optimizer.zero_grad()
        F.cross_entropy(model(inputs), targets).backward()
        optimizer.step()
    return record.calls


def show(title: str, calls: dict) -> None:
    print(title)
    if not calls:
        print("  no operator took the CPU fallback")
    for op, count in sorted(calls.items(), key=lambda item: (-item[1], item[0])):
        print(f"  {op:<40} {count:>3} call{'' if count == 1 else 's'}")


torch.manual_seed(0)
mlp = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                          torch.nn.Linear(256, 256), torch.nn.ReLU(),
                          torch.nn.Linear(256, 10))
cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                          torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                          torch.nn.Linear(8 * 8 * 8, 10))
show("MLP, ReLU, SGD:", fallback_calls(mlp, torch.optim.SGD, torch.randn(64, 256)))
show("Convolution, BatchNorm, max pooling, Adam:",
     fallback_calls(cnn, torch.optim.Adam, torch.randn(64, 3, 16, 16)))
upsampling = torch.nn.Sequential(torch.nn.Upsample(scale_factor=2, mode="bilinear"),
                                 torch.nn.Conv2d(3, 8, 3, stride=2, padding=1),
                                 torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                                 torch.nn.Linear(8 * 8 * 8, 10))
show("Bilinear upsampling, convolution, Adam:",
     fallback_calls(upsampling, torch.optim.Adam, torch.randn(64, 3, 16, 16)))
