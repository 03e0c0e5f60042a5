"""How many threads this process's BLAS and OpenMP pools use (torch.set_num_threads).

NumPy's BLAS starts one thread per core. That is right for one process and badly
wrong for N ranks on one machine: each rank's pool takes every core, and the
ranks fight over them (measured: 2 ranks on 2 cores, MLP, 23x slower than one
thread each). So when ``plugtorch.distributed`` starts under a launcher it sizes
each rank's pools to its share of the cores (:func:`size_for_ranks`), unless the
user chose: ``OMP_NUM_THREADS`` (or ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``)
in the environment, or a call to :func:`set_num_threads`.

The pools are resized at run time with threadpoolctl, so this works after NumPy
has loaded its BLAS.
"""
from __future__ import annotations

import os

__all__ = ["set_num_threads", "get_num_threads"]

# The variables a BLAS or OpenMP runtime reads at load time; one of them set means the
# user chose a thread count for this process.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")

_chosen_by_user = False


def _controller():
    import numpy  # noqa: F401  (threadpoolctl finds the pools of libraries already loaded)
    from threadpoolctl import ThreadpoolController
    return ThreadpoolController()


def set_num_threads(n: int) -> None:
    """Use ``n`` threads in this process's BLAS and OpenMP pools (torch.set_num_threads).

    Once called, ``plugtorch.distributed`` no longer sizes the pools for the ranks on the node.
    """
    global _chosen_by_user
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive integer number of threads, got {n!r}")
    _controller().limit(limits=n)
    _chosen_by_user = True


def get_num_threads() -> int:
    """The size of this process's BLAS pool (the largest pool if there are several; 1 if none)."""
    return max((lib.num_threads for lib in _controller().lib_controllers), default=1)


def user_choice() -> str | None:
    """What the user did to choose the thread count, in words, or None."""
    if _chosen_by_user:
        return "plugtorch.set_num_threads() was called"
    chosen = [f"{v}={os.environ[v]}" for v in THREAD_VARIABLES if os.environ.get(v)]
    return " and ".join(chosen) + " is set" if chosen else None


def usable_cores() -> set[int]:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return set(range(os.cpu_count() or 1))


def size_for_ranks(sharing: int, cores: int) -> int | None:
    """Give this process ``cores // sharing`` threads (at least 1), ``sharing`` being the
    number of processes that share its ``cores``; returns that number, or None where the
    user chose a count (which is then left alone)."""
    if user_choice() is not None:
        return None
    n = max(1, cores // max(1, sharing))
    _controller().limit(limits=n)
    return n
