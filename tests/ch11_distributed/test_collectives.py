"""Chapter 11: the accl backend across processes.

Each test starts one process per rank (``worker.py``, on loopback only),
each on the accinte device of its rank, and waits for both within a bounded
time; the cases of ``test_collective`` share one start, one after the other
in one group. A worker checks its own results against values computed on the CPU,
so a test passes when every rank prints ``OK CASE`` and exits cleanly.
What is covered: every collective and reduction, point to point, barrier
and object collectives, stream ordering (the collective reads what the
current stream wrote, and ``Work.wait()`` orders the current stream after
it), bad input, a user's error reported once and not by later
collectives, DistributedDataParallel against one process on the whole
batch, and a rank that dies or stalls (an error, never a hang, and never a
silently stale result).
"""

import pathlib
import subprocess

import pytest
import ranks
import torch
import torch_accinte  # noqa: F401
from conftest import hermetic_python
from ranks import assert_ok

WORKER = pathlib.Path(__file__).with_name("worker.py")
WORLD = 2
#: Longer than any case needs, shorter than pytest's own timeout.
TIMEOUT = 120


def run_ranks(case, tmp_path, env=None):
    """Runs ``case`` on WORLD ranks; returns each rank's (code, stdout, stderr)."""
    return ranks.run_ranks(WORKER, case, tmp_path, WORLD, TIMEOUT, env=env)


def test_backend_is_registered_for_the_device():
    import torch.distributed as dist

    assert dist.Backend.ACCL == "accl"
    assert dist.Backend.default_device_backend_map["accinte"] == "accl"
    assert dist.Backend.backend_capability["accl"] == ["accinte"]


CASES = ["all_reduce", "broadcast_and_reduce", "gathers_and_scatters", "list_collectives",
         "coalesced_collectives", "object_collectives", "point_to_point_and_barrier",
         "recv_from_any_source", "ordering_with_streams", "bad_input",
         "all_reduce_after_a_user_error", "ddp_matches_one_process"]


@pytest.fixture(scope="module")
def collectives(tmp_path_factory):
    """Every case of CASES, run once by one pair of ranks, in order: each
    case also runs after the others in one group, as a user's program does
    (a user's error reported once must not fail the cases after it)."""
    return run_ranks(",".join(CASES), tmp_path_factory.mktemp("collectives"))


@pytest.mark.parametrize("case", CASES)
def test_collective(case, collectives):
    assert_ok(case, collectives)


def test_collectives_on_two_devices_keep_the_programs_order(tmp_path):
    # Issue 39, item 3: all_reduce(x on accinte:0) then all_reduce(y on
    # accinte:1), with earlier work holding a different device on each rank;
    # pairing them by which device's stream is ready first mixed x with y.
    # Its own start: the failure it guards against can be a hang of the group.
    case = "collectives_on_two_devices"
    assert_ok(case, run_ranks(case, tmp_path))


def test_ddp_under_torchrun():
    # The launcher users run: torchrun starts the ranks, which meet through
    # its rendezvous on localhost instead of a file store.
    case = "ddp_matches_one_process"
    result = subprocess.run(
        [hermetic_python(), "-m", "torch.distributed.run", "--standalone",
         "--nproc-per-node", str(WORLD), str(WORKER), case],
        capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(f"OK {case}") == WORLD, result.stdout


def test_the_chapters_example_under_torchrun():
    example = pathlib.Path(__file__).parents[2] / "chapters/11_distributed/output/two_ranks.py"
    result = subprocess.run(
        [hermetic_python(), "-m", "torch.distributed.run", "--standalone",
         "--nproc-per-node", str(WORLD), str(example)],
        capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in range(WORLD):
        assert f"rank {rank}: after wait(): tensor([3., 3., 3., 3.])" in result.stdout, result.stdout


# NB: which rank torchrun sees fail first varies when a rank exits at once:
# what holds is that it ends every rank and names the lost one's exit code.
@pytest.mark.parametrize("case, evidence", [("rank_fails", "exitcode  : 3"),
                                            ("rank_stalls", "Timed out")])
def test_a_lost_rank_under_torchrun(case, evidence):
    # torchrun ends the whole job, within the group's timeout, when a rank
    # exits (rank_fails) or when a collective times out (rank_stalls: rank
    # 0 fails, and torchrun stops rank 1, still asleep).
    result = subprocess.run(
        [hermetic_python(), "-m", "torch.distributed.run", "--standalone",
         "--nproc-per-node", str(WORLD), str(WORKER), case],
        capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode != 0, result.stdout + result.stderr
    assert evidence in result.stdout + result.stderr, result.stdout + result.stderr


@pytest.mark.parametrize("backend, case", [("accl", "point_to_point_and_barrier"),
                                           ("default", "point_to_point_and_barrier"),
                                           ("default", "object_collectives")])
def test_group_of_accl_alone(backend, case, tmp_path):
    # Without a CPU backend in the group, the barrier and the object
    # collectives go through accl too; "default" names no backend at all.
    assert_ok(case, run_ranks(case, tmp_path, {"ACCL_TEST_BACKEND": backend}))


def test_ddp_on_a_group_made_with_no_backend(tmp_path):
    # What the page tells users to write: init_process_group() alone.
    assert_ok("ddp_matches_one_process",
              run_ranks("ddp_matches_one_process", tmp_path, {"ACCL_TEST_BACKEND": "default"}))


def test_which_releases_need_the_default_backend_fix(tmp_path):
    # The same, with chapter 11's fix undone: DDP fails on exactly the
    # releases of NEEDS_DEFAULT_BACKEND_FIX (pytorch/pytorch#189193), so the
    # list cannot go stale in either direction as releases come and go.
    case = "ddp_without_the_default_backend_fix"
    assert_ok(case, run_ranks(case, tmp_path, {"ACCL_TEST_BACKEND": "default"}))


def test_group_bound_to_a_device(tmp_path):
    assert_ok("all_reduce", run_ranks("all_reduce", tmp_path, {"ACCL_TEST_BIND_DEVICE": "1"}))


# NB: how gloo words a lost peer varies ("Connection reset by peer",
# "Connection closed by peer"); that it is gloo's error about it does not.
@pytest.mark.parametrize("case, cause", [("rank_fails", "peer"),
                                         ("rank_stalls", "Timed out")])
def test_a_lost_rank_is_an_error_not_a_hang(case, cause, tmp_path):
    (code0, out0, err0), (code1, _, err1) = run_ranks(case, tmp_path)
    assert code1 in (0, 3), f"rank 1 exited {code1}:\n{err1[-2000:]}"
    assert code0 == 4, f"rank 0 exited {code0}:\n{out0}\n{err0}"
    line = next(line for line in out0.splitlines() if line.startswith("FAILED AS EXPECTED"))
    assert "waited for an event of a stream whose earlier work failed" in line
    assert cause in line, line
