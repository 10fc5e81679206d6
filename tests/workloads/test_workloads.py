"""Real users' code on the final stage, against the CPU (see workloads.py).

Each test runs one workload unmodified on accinte and on the CPU and fails,
naming the value, where accinte disagrees with the CPU. The fallback table
of the recorded step is printed, so ``pytest -s`` shows what each workload
still runs on the CPU fallback.
"""

import pytest
import torch

from . import workloads


@pytest.mark.parametrize("name", list(workloads.WORKLOADS))
def test_workload_agrees_with_the_cpu(name):
    # NB: the workloads seed; every random state is put back after.
    with torch.random.fork_rng(devices=range(torch.accinte.device_count()),
                               device_type="accinte"):
        result = workloads.WORKLOADS[name]()
    print(f"\n{result.name}: {result.fallback_calls} fallback calls in one step")
    for op, calls in sorted(result.fallbacks.items(), key=lambda item: -item[1]):
        print(f"  {op:<40} {calls:>4}")
    result.check()
    # NB: every operator of every workload has a native kernel (issue 27); a
    # fallback call means one was lost.
    assert not result.fallbacks, (
        f"{result.name}: took the CPU fallback for {sorted(result.fallbacks)}")


def test_a_disagreement_names_the_value():
    # The comparison itself must be able to fail.
    result = workloads.Result("example", "one value")
    result.compare("the value", torch.ones(2), torch.zeros(2))
    with pytest.raises(AssertionError, match="example: the value differs from the CPU"):
        result.check()
    assert not result.agrees
