"""BLAS threads per rank: sized from the node's cores and ranks, unless the user chose.

Unsized, 2 ranks on a 2-core machine each start a BLAS thread per core and run the
MLP 20x slower than with one thread each. These tests read each rank's pool size from the
BLAS library itself; the speed that sizing buys is a benchmark's to measure, not a test's
(``benchmarks/bench_distributed_training.py --ranks 2``, with and without ``--threads 1``).
"""
from __future__ import annotations

import json

from mpi_harness import _env, launch, needs_mpi

from plugtorch.threads import usable_cores


def run(*args, threads=None):
    result = launch(2, "threads.py", *args, env=_env(threads=threads), timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


@needs_mpi
def test_each_rank_gets_its_share_of_the_cores_and_rank_0_says_so():
    got, err = run()
    share = max(1, len(usable_cores()) // 2)
    assert got["threads"] == [share, share]
    assert err.count("plugtorch.distributed: 2 ranks share") == 1, err
    assert f"each rank's BLAS uses {share} thread" in err


@needs_mpi
def test_the_users_choice_is_left_alone():
    got, err = run(threads="2")  # OMP_NUM_THREADS=2 set explicitly
    assert got["threads"] == [2, 2] and "ranks share" not in err
    got, err = run(3)  # plugtorch.set_num_threads(3) before init
    assert got["threads"] == [3, 3] and "ranks share" not in err
