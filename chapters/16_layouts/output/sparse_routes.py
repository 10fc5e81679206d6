"""Where a sparse accinte tensor's operators run, and a training loop with
sparse gradients against the CPU.

First a COO tensor made on the device, with the devices of its parts; then,
for a few operators, the kernel the dispatcher finds for the accinte sparse
key (read from the dispatcher's own table); last, an embedding model trained
with SparseAdam on accinte and on the CPU, step by step.
"""

import copy

import torch
import torch_accinte  # noqa: F401

dense = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
sparse = dense.to("accinte").to_sparse()
print(">>> sparse = dense.to('accinte').to_sparse()")
print("layout:", sparse.layout, " device:", sparse.device)
print("indices on", sparse.indices().device, " values on", sparse.values().device)
print()


def route(name, key):
    """How the accinte key's kernel of `name` is registered: the
    dispatcher's table says which kernel it computed, its dump whether a
    registration for the key itself is typed or the boxed CPU route."""
    (computed,) = [entry for entry in torch._C._dispatch_dump_table(name).splitlines()
                   if entry.startswith(key + ":")]
    registered = [entry for entry in torch._C._dispatch_dump(name).splitlines()
                  if entry.startswith(key + ":")]
    if "fallback" in computed:
        return "the CPU route (the key's fallback)"
    if registered and "(none) [ boxed ]" in registered[0]:
        return "the CPU route (by name)"
    if registered:
        return "a kernel on the device"
    return "PyTorch's composite kernel"


print(f"{'operator':<48}{'on SparsePrivateUse1'}")
for name in ("aten::_indices", "aten::_sparse_coo_tensor_with_dims_and_tensors",
             "aten::copy_", "aten::_coalesce", "aten::addmm", "aten::mv",
             "aten::sum", "aten::_to_copy"):
    print(f"{name:<48}{route(name, 'SparsePrivateUse1')}")
print()

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Embedding(50, 8, sparse=True),
                            torch.nn.Flatten(), torch.nn.Linear(24, 1))
reference = copy.deepcopy(model)
model.to("accinte")
generator = torch.Generator().manual_seed(1)
batches = [(torch.randint(0, 50, (16, 3), generator=generator),
            torch.randn(16, 1, generator=generator)) for _ in range(5)]


def optimizers(module):
    return [torch.optim.SparseAdam(module[0].parameters(), lr=0.01),
            torch.optim.Adam(module[2].parameters(), lr=0.01)]


print(f"{'step':<6}{'loss (accinte)':<16}{'loss (CPU)':<16}max |weight difference|")
pairs = [(model, optimizers(model), "accinte"), (reference, optimizers(reference), "cpu")]
for step, (index, target) in enumerate(batches):
    losses = []
    for module, steps, device in pairs:
        loss = torch.nn.functional.mse_loss(module(index.to(device)), target.to(device))
        for optimizer in steps:
            optimizer.zero_grad()
        loss.backward()
        for optimizer in steps:
            optimizer.step()
        losses.append(loss.item())
    difference = (model[0].weight.cpu() - reference[0].weight).abs().max().item()
    print(f"{step:<6}{losses[0]:<16.6f}{losses[1]:<16.6f}{difference:.2e}")
print("gradient:", model[0].weight.grad.layout, "on", model[0].weight.grad.device)
