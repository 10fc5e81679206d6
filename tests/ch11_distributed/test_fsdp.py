"""Chapter 11: FSDP2 and distributed checkpoints on accinte.

As in ``test_collectives.py``, each test starts one process per rank
(``fsdp_worker.py``) on loopback and waits for them within a bounded time;
a rank checks its own results against the CPU, and a test passes when every
rank prints ``OK CASE`` and exits cleanly. What is covered:
``fully_shard`` over a ``DeviceMesh`` of two accinte devices trains a small
transformer to the parameters of one process on the whole batch, with and
without a bfloat16 mixed-precision policy; ``torch.distributed.checkpoint``
saves the sharded model and optimizer from two ranks and loads them into
two fresh ranks and into one unsharded process, where they are identical.
"""

import pathlib

import pytest
import ranks
from ranks import assert_ok

WORKER = pathlib.Path(__file__).with_name("fsdp_worker.py")
WORLD = 2
#: Longer than any case needs (a case has taken 95 s on two cores loaded
#: five times over), shorter than pytest's own timeout.
TIMEOUT = 240


def run_ranks(case, tmp_path, world=WORLD):
    """Runs ``case`` on ``world`` ranks, which share ``tmp_path`` for files."""
    return ranks.run_ranks(WORKER, case, tmp_path, world, TIMEOUT, extra_args=[tmp_path])


@pytest.mark.parametrize("case", ["fsdp_matches_one_process", "fsdp_mixed_precision"])
def test_fsdp(case, tmp_path):
    assert_ok(case, run_ranks(case, tmp_path))


def test_checkpoint_saved_by_two_ranks_loads_into_two_and_into_one(tmp_path):
    assert_ok("checkpoint_two_ranks", run_ranks("checkpoint_two_ranks", tmp_path))
    # Resharding: the same files, read by one process into an unsharded model.
    assert_ok("checkpoint_one_process", run_ranks("checkpoint_one_process", tmp_path, world=1))
