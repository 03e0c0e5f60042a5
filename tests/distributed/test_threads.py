"""BLAS threads per rank: sized from the node's cores and ranks, unless the user chose.

Unsized, 2 ranks on a 2-core machine each start a BLAS thread per core and run the
MLP 20x slower than with one thread each; sized, a run with no thread variable set
must be as fast as one with OMP_NUM_THREADS=1.
"""
from __future__ import annotations

import json

from mpi_harness import _env, launch, needs_mpi

from plugtorch.threads import usable_cores


def run(steps, *args, threads=None):
    result = launch(2, "threads.py", steps, *args, env=_env(threads=threads), timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


@needs_mpi
def test_each_rank_gets_its_share_of_the_cores_and_rank_0_says_so():
    got, err = run(0)
    share = max(1, len(usable_cores()) // 2)
    assert got["threads"] == [share, share]
    assert err.count("plugtorch.distributed: 2 ranks share") == 1, err
    assert f"each rank's BLAS uses {share} thread" in err


@needs_mpi
def test_the_users_choice_is_left_alone():
    got, err = run(0, threads="2")  # OMP_NUM_THREADS=2 set explicitly
    assert got["threads"] == [2, 2] and "ranks share" not in err
    got, err = run(0, 3)  # plugtorch.set_num_threads(3) before init
    assert got["threads"] == [3, 3] and "ranks share" not in err


@needs_mpi
def test_no_thread_variable_is_within_10_percent_of_one_thread_each():
    """Best of interleaved short runs (the machine is shared), stopping once the answer is clear.
    250 steps a run: at 60 (well under 0.1 s once the MLP step got faster) one busy moment on
    the two cores decided a run, and a fresh-clone CI run failed on that noise (74 vs 94 k
    samples/s; the same code passes alone)."""
    best = {"unset": 0.0, "OMP_NUM_THREADS=1": 0.0}
    for round_ in range(6):
        for name in (best if round_ % 2 else list(best)[::-1]):
            got, _ = run(250, threads=None if name == "unset" else "1")
            best[name] = max(best[name], got["samples_per_s"])
        if round_ >= 1 and best["unset"] >= 0.9 * best["OMP_NUM_THREADS=1"]:
            break
    assert best["unset"] >= 0.9 * best["OMP_NUM_THREADS=1"], best
