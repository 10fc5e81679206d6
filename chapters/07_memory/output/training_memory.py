"""Allocated and reserved accinte memory over a short training loop.

Trains a small MLP for a few steps on accinte and reads the caching
allocator's statistics after each phase of each step. Prints one row per
reading; ``training_memory_svg.py`` draws the same readings.
"""

import torch
import torch_accinte  # noqa: F401

STEPS = 6
PHASES = ("forward", "backward", "optimizer step", "zero_grad")


def readings():
    """(step, phase, allocated bytes, reserved bytes) after every phase."""
    torch.default_generator.manual_seed(0)  # NB: the CPU only; accinte has no generator in this stage
    device = torch.device("accinte:0")
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10),
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    inputs = torch.randn(STEPS, 256, 512)
    targets = torch.randint(0, 10, (STEPS, 256))
    torch.accinte.reset_peak_memory_stats(device)
    rows = [(0, "start", torch.accinte.memory_allocated(device),
             torch.accinte.memory_reserved(device))]

    def read(step, phase):
        rows.append((step, phase, torch.accinte.memory_allocated(device),
                     torch.accinte.memory_reserved(device)))

    for step in range(1, STEPS + 1):
        x = inputs[step - 1].to(device)
        y = targets[step - 1].to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        read(step, "forward")
        loss.backward()
        read(step, "backward")
        optimizer.step()
        read(step, "optimizer step")
        optimizer.zero_grad(set_to_none=True)
        del x, y, loss
        read(step, "zero_grad")
    return rows


if __name__ == "__main__":
    print(f"{'step':>4}  {'after':<15}{'allocated':>12}{'reserved':>12}")
    for step, phase, allocated, reserved in readings():
        print(f"{step:>4}  {phase:<15}{allocated:>12,}{reserved:>12,}")
    stats = torch.accinte.memory_stats(0)
    print(f"peak allocated {stats['allocated_bytes.all.peak']:,} bytes, "
          f"peak reserved {stats['reserved_bytes.all.peak']:,} bytes, "
          f"{stats['num_device_alloc']} device allocations for "
          f"{stats['allocation.all.allocated']} tensor allocations")
