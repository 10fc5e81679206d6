"""What two ranks of stage 11 print: an all_reduce of accinte tensors over
a 'cpu:gloo,accinte:accl' group, and what a lost rank turns into.

Run as a script, it starts both ranks itself (on loopback, meeting through
a file store) and prints their lines in rank order. Under
``torchrun --standalone --nproc-per-node 2``, each process is one rank of
the first part, meeting through torchrun's rendezvous.
"""

import datetime
import os
import subprocess
import sys
import tempfile


def rank_main(rank: int, world: int, init_method: str, lose_rank_1: bool) -> None:
    import torch
    import torch.distributed as dist
    import torch_accinte  # noqa: F401

    device = torch.device("accinte", rank)
    torch.accinte.set_device(device)
    dist.init_process_group("cpu:gloo,accinte:accl", init_method=init_method,
                            rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=4))
    if not lose_rank_1:
        print(f"rank {rank}: backend for accinte tensors:",
              dist.get_backend_config(), flush=True)
        tensor = torch.full((4,), float(rank + 1), device=device)
        work = dist.all_reduce(tensor, async_op=True)
        work.wait()  # the current stream now waits for the collective
        print(f"rank {rank}: after wait(): {tensor.cpu()}", flush=True)
        dist.destroy_process_group()
        return
    # NB: the lost rank leaves once rank 0's group is up, so rank 0's error
    # is the collective's: leaving earlier could break rank 0's own
    # init_process_group, still connecting the group's backends.
    store = dist.distributed_c10d._get_default_store()
    if rank == 1:
        store.wait(["rank 0 is up"])
        os._exit(1)  # the lost rank
    store.set("rank 0 is up", "1")
    tensor = torch.ones(4, device=device)
    dist.all_reduce(tensor)
    try:
        tensor.cpu()
    except RuntimeError as error:
        # NB: gloo's own message (which connection broke, and how) varies
        # from run to run; it is cut here, after the part that does not.
        message = str(error)
        print(f"rank {rank}: RuntimeError:", message[: message.index("failed: [") + 7],
              "[gloo's error ...]", flush=True)
    os._exit(0)


def run(lose_rank_1: bool) -> None:
    with tempfile.TemporaryDirectory() as directory:
        store = os.path.join(directory, "store")
        ranks = [subprocess.Popen([sys.executable, __file__, str(rank), store,
                                   str(int(lose_rank_1))],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for rank in range(2)]
        for rank, process in enumerate(ranks):
            out, err = process.communicate(timeout=120)
            print(out, end="")
            if process.returncode != (1 if lose_rank_1 and rank == 1 else 0):
                sys.exit(f"rank {rank} exited {process.returncode}:\n{err}")


if __name__ == "__main__":
    if "TORCHELASTIC_RUN_ID" in os.environ:  # started by torchrun
        rank_main(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), "env://", False)
    elif len(sys.argv) == 4:
        rank_main(int(sys.argv[1]), 2, f"file://{sys.argv[2]}", sys.argv[3] == "1")
    else:
        print("--- two ranks, all_reduce(SUM) of [rank + 1] * 4 ---")
        run(lose_rank_1=False)
        print("--- rank 1 is lost before the collective ---")
        run(lose_rank_1=True)
