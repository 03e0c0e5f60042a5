"""``plugtorch.multiprocessing``: Python's ``multiprocessing``, with tensors shared, as torch's.

Everything ``multiprocessing`` exports (``Process``, ``Queue``, ``Pipe``, ``get_context``,
``set_start_method``...) is re-exported unchanged. Importing this package registers reducers
with ``multiprocessing.reduction.ForkingPickler``, so a tensor sent through a ``Queue``, a
``Pipe`` or a ``Process``'s arguments is moved to shared memory and arrives as a view of the
same memory, not a copy (:mod:`.reductions`). ``spawn`` / ``start_processes`` run
``fn(rank, *args)`` in several processes and raise a child's exception in the parent
(:mod:`.spawn`). See docs/serialization.md ("Sharing tensors between processes").
"""
from __future__ import annotations

import multiprocessing
from multiprocessing import *  # noqa: F403

from .reductions import init_reductions
from .spawn import (
    ProcessContext,
    ProcessException,
    ProcessExitedException,
    ProcessRaisedException,
    spawn,
    start_processes,
)

__all__ = [*multiprocessing.__all__, "ProcessContext", "ProcessException",
           "ProcessExitedException", "ProcessRaisedException", "get_all_sharing_strategies",
           "get_sharing_strategy", "set_sharing_strategy", "spawn", "start_processes"]

_SHARING_STRATEGY = "file_descriptor"


def set_sharing_strategy(new_strategy: str) -> None:
    """Only ``"file_descriptor"`` exists here (torch's default on Linux); see :mod:`.reductions`."""
    if new_strategy not in get_all_sharing_strategies():
        raise ValueError(f"set_sharing_strategy: unknown strategy {new_strategy!r}; plugtorch "
                         f"shares tensors by {sorted(get_all_sharing_strategies())} only")


def get_sharing_strategy() -> str:
    return _SHARING_STRATEGY


def get_all_sharing_strategies() -> set[str]:
    return {_SHARING_STRATEGY}


init_reductions()
