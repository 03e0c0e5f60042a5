"""Whether this process was started by an MPI launcher, and joining that world.

The launcher is detected from the environment it sets, so a plain ``python``
run neither imports mpi4py nor initialises MPI (which can take a second, or fail
on a machine whose MPI needs a launcher). A process that initialised MPI itself
through mpi4py is also accepted.
"""
from __future__ import annotations

import os
import sys
import warnings

# Size variables set by the common launchers: MPICH/Hydra and Intel MPI (PMI_SIZE),
# Open MPI (OMPI_COMM_WORLD_SIZE), PMIx-based ones such as Slurm's srun --mpi=pmix
# (PMIX_RANK, no size variable), MVAPICH (MV2_COMM_WORLD_SIZE).
_LAUNCHER_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE")


def launched_size() -> int | None:
    """The world size the launcher announced (1 if it named none), or None if not launched."""
    for var in _LAUNCHER_VARS:
        value = os.environ.get(var)
        if value is not None:
            return int(value) if var.endswith("SIZE") and value.isdigit() else 1
    return None


def _mpi_already_initialized() -> bool:
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized()


class MPIProvider:
    """The ``"distributed.process_group"`` service: creates the MPI process group on demand."""

    name = "mpi"

    def available(self) -> bool:
        try:
            import mpi4py  # noqa: F401  (the package only: this does not initialise MPI)
        except ImportError:
            return False
        return True

    def unavailable_reason(self) -> str:
        if not self.available():
            return "mpi4py is not installed (pip install mpi4py mpich, or pip install 'plugtorch[mpi]')"
        if launched_size() is None and not _mpi_already_initialized():
            return "this process was not started by an MPI launcher (run it with mpiexec -n N ...)"
        return "no reason known"

    def create(self, timeout: float = 600.0):
        """The process group of the launched world, or None for a plain single-process run.

        ``timeout`` (seconds) bounds every collective of the group, its creation included.
        """
        size = launched_size()
        if size is None and not _mpi_already_initialized():
            return None
        if not self.available():
            if size and size > 1:
                warnings.warn(
                    f"this process was started by an MPI launcher for {size} processes, but mpi4py is "
                    "not installed, so every process will run alone as rank 0 of 1 (duplicating the "
                    "work). Install it: pip install mpi4py mpich", RuntimeWarning, stacklevel=3)
            return None
        # MPICH's default for a non-blocking reduce-scatter (recursive halving) ran at a fifth of
        # its blocking one at 1 MB on 2 ranks in memory; pairwise exchange keeps up from 1 MB (the
        # same bandwidth term; P - 1 latencies instead of log2 P). Read when MPI initialises (on
        # the import below, unless the user's code did first); another MPI ignores it; a value
        # the user set wins.
        os.environ.setdefault("MPIR_CVAR_IREDUCE_SCATTER_BLOCK_INTRA_ALGORITHM", "sched_pairwise")
        from .group import MPIProcessGroup
        return MPIProcessGroup(timeout=timeout)
