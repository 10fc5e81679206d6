"""Copy throughput of accinte against the CPU, measured in the same run.

Every number is a ratio to a CPU baseline timed in this process, so results
compare across machines: ``host->device 0.8x`` means moving the bytes onto
accinte takes 1.25 times as long as copying them between two CPU tensors.

    PYTHONPATH=build/stageNN/python python benchmarks/bench_copy.py
"""

import argparse
import statistics
import time

import torch
import torch_accinte  # noqa: F401


def median_seconds(action, repeats):
    """Median wall time of ``action`` over ``repeats`` runs, after a warm-up."""
    action()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()

    count = args.megabytes * 2**20 // 4
    host = torch.rand(count)
    host_target = torch.empty_like(host)
    device = host.to("accinte")
    device_target = torch.empty_like(device)
    strided_host = host.view(-1, 1024).t()

    def sync(action):
        def run():
            action()
            torch.accinte.synchronize()
        return run

    baseline = median_seconds(lambda: host_target.copy_(host), args.repeats)
    cases = {
        "host->device": sync(lambda: device_target.copy_(host)),
        "device->host": lambda: host_target.copy_(device),
        "device->device": sync(lambda: device_target.copy_(device)),
        "host->device (strided source)": sync(lambda: device.view(1024, -1).copy_(strided_host)),
    }
    if torch.accinte.device_count() > 1:
        other = torch.empty_like(host, device="accinte:1")
        cases["accinte:0->accinte:1"] = lambda: other.copy_(device)

    print(f"{args.megabytes} MB float32, median of {args.repeats}; "
          f"CPU copy baseline {args.megabytes / 1024 / baseline:.2f} GB/s")
    for name, action in cases.items():
        seconds = median_seconds(action, args.repeats)
        print(f"  {name:32s} {baseline / seconds:5.2f}x CPU copy speed")


if __name__ == "__main__":
    main()
