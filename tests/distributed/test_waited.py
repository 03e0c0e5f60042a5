"""Collectives waited on at once (``async_op=False``) beside async ones (``mpi_scripts/waited.py``).

A sync collective is posted without waking the group's communication thread, yet stays
the same non-blocking MPI call as an async one: MPI never matches a blocking collective
with a non-blocking one, so a rank that waits at once must still meet a rank that does
not (a job that hangs is killed and fails). The watchdog over sync collectives is tested
in ``test_stalls.py`` and ``test_mpi_all_ops.py`` (a rank stalls while the others wait).
"""
from __future__ import annotations

import pytest
from mpi_harness import check, launch, needs_mpi


@needs_mpi
@pytest.mark.parametrize("nprocs", [2, 3])  # 2 ranks on 2 cores spin in their waits, 3 sleep
def test_sync_and_async_collectives_meet_and_sync_ones_post_quietly(nprocs):
    check(launch(nprocs, "waited.py", timeout=60), nprocs)
