"""Starting the ranks of a chapter 11 test: one process per rank, on
loopback, meeting through a file store, each waited for within a bound."""

import os
import subprocess

from conftest import hermetic_python


def run_ranks(worker, case, tmp_path, world, timeout, env=None, extra_args=()):
    """Runs ``worker CASE RANK WORLD STORE *extra_args`` for each rank;
    returns each rank's (code, stdout, stderr). A rank still running after
    ``timeout`` seconds fails the test, and no rank outlives it."""
    full_env = dict(os.environ, **(env or {}))
    store = tmp_path / "store"
    processes = [
        subprocess.Popen([hermetic_python(), str(worker), case, str(rank), str(world), str(store),
                          *map(str, extra_args)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=full_env)
        for rank in range(world)
    ]
    results = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=timeout)
            results.append((process.returncode, out, err))
    finally:
        for process in processes:
            process.kill()
    return results


def assert_ok(case, results):
    """Every rank printed ``OK CASE`` and exited cleanly."""
    for rank, (code, out, err) in enumerate(results):
        # NB: whole lines: "OK all_reduce" is part of another case's line.
        assert code == 0 and f"OK {case}" in out.splitlines(), \
            f"rank {rank} exited {code}:\n{out}\n{err}"
