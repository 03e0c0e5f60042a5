"""Uneven inputs: ``DistributedDataParallel.join()`` under mpiexec (see mpi_scripts/join_uneven.py).

Rank r has 3 + 3r batches; the job must finish (the harness fails it if it hangs) with
every rank holding the parameters one process computes from the same per-step batches.
"""
from __future__ import annotations

import pytest
from mpi_harness import check, launch, needs_mpi


@needs_mpi
@pytest.mark.parametrize("nprocs", [2, 4])
def test_uneven_inputs_train_without_hanging_and_average_correctly(nprocs):
    check(launch(nprocs, "join_uneven.py", timeout=90), nprocs)
