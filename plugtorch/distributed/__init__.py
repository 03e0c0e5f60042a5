"""torch.distributed for plugtorch: one process group, collectives on tensors.

``init()`` reads the world this process was launched into: under ``mpiexec`` the
process group comes from the MPI plugin (through the registry service
``"distributed.process_group"``; this package never imports mpi4py); otherwise —
a plain ``python`` run, or MPI not installed — it is the core's single-process
group, whose collectives are no-ops. The same script therefore runs on one
process or many.

Set ``PLUGTORCH_DISTRIBUTED_DEBUG=1`` to check, before every collective, that all
ranks call the same collective with the same shapes and dtypes (see ``debug``).

Every collective is bounded by the group's ``timeout`` (default 10 minutes,
``PLUGTORCH_DISTRIBUTED_TIMEOUT`` seconds): a rank that does not arrive makes the
others abort the job with a diagnosis instead of hanging. Under a launcher, each
rank's BLAS threads are sized to its share of the node's cores (``plugtorch.threads``).
"""
from __future__ import annotations

import datetime
import os
import sys

from .. import threads
from ..core.tensor import Tensor
from .grad_bucket import GradBucket
from .process_group import ProcessGroup, ReduceOp, SingleProcessGroup, Work

__all__ = [
    "ReduceOp", "Work", "ProcessGroup", "init", "init_process_group", "destroy_process_group",
    "is_available", "is_initialized", "is_mpi_available", "get_rank", "get_world_size",
    "get_backend", "barrier", "all_reduce", "broadcast", "all_gather", "all_gather_object",
    "broadcast_object_list", "abort", "group", "default_pg_timeout", "GradBucket",
]

SERVICE = "distributed.process_group"
default_pg_timeout = datetime.timedelta(minutes=10)
_default_pg: ProcessGroup | None = None


class _World:
    """``dist.group.WORLD``: the default process group (None before init)."""

    @property
    def WORLD(self) -> ProcessGroup | None:
        return _default_pg


group = _World()


def _timeout_seconds(timeout) -> float:
    """``timeout`` (a timedelta or seconds), else PLUGTORCH_DISTRIBUTED_TIMEOUT, else 10 minutes."""
    if timeout is None:
        env = os.environ.get("PLUGTORCH_DISTRIBUTED_TIMEOUT")
        if not env:
            return default_pg_timeout.total_seconds()
        try:
            seconds = float(env)
        except ValueError:
            raise ValueError(f"PLUGTORCH_DISTRIBUTED_TIMEOUT={env!r} is not a number of seconds") from None
    else:
        seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
    if not seconds > 0:
        raise ValueError(f"init_process_group: timeout must be positive, got {timeout!r}")
    return seconds


def _size_threads(pg: ProcessGroup) -> None:
    """Give each rank its share of its node's cores, and say so once (see plugtorch.threads)."""
    sharing, cores = pg.cpu_share()
    n = threads.size_for_ranks(sharing, cores)
    if n is not None and pg.rank() == 0:
        sys.stderr.write(
            f"plugtorch.distributed: {sharing} ranks share {cores} cores on this node, so each rank's BLAS "
            f"uses {n} thread{'s' if n > 1 else ''}; set OMP_NUM_THREADS or call plugtorch.set_num_threads() "
            "to choose\n")
        sys.stderr.flush()


def _provider():
    from ..core.plugins import get_registry
    return get_registry().service(SERVICE)


def is_available() -> bool:
    """Always True: the single-process group needs nothing; MPI is a plugin on top."""
    return True


def is_mpi_available() -> bool:
    p = _provider()
    return p is not None and getattr(p, "name", None) == "mpi" and p.available()


def is_initialized() -> bool:
    return _default_pg is not None


def init_process_group(backend: str | None = None, init_method=None, timeout=None,
                       world_size: int = -1, rank: int = -1) -> ProcessGroup:
    """Create the default process group (torch.distributed.init_process_group).

    backend: ``None`` (MPI when launched under it, else a single process), ``"mpi"``
    (required: an error if this process was not launched under MPI) or ``"single"``.
    timeout: a ``datetime.timedelta`` or seconds bounding every collective (default
    ``PLUGTORCH_DISTRIBUTED_TIMEOUT`` seconds, else 10 minutes); a collective that some rank
    does not join in time aborts the job with a diagnosis naming it and the missing ranks.
    ``init_method``, ``world_size`` and ``rank`` are accepted for torch compatibility: with MPI
    the launcher decides the world, and a ``world_size`` or ``rank`` that disagrees with it is
    an error.
    """
    global _default_pg
    if _default_pg is not None:
        raise RuntimeError("trying to initialize the default process group twice; call "
                           "plugtorch.distributed.destroy_process_group() first")
    if backend not in (None, "mpi", "single"):
        raise ValueError(f"unknown distributed backend {backend!r}; plugtorch offers 'mpi' "
                         "(the MPI plugin, under mpiexec) and 'single' (one process)")
    seconds = _timeout_seconds(timeout)
    pg = None
    if backend != "single":
        provider = _provider()
        if provider is not None:
            pg = provider.create(timeout=seconds)
        if pg is None and backend == "mpi":
            why = ("no plugin provides it (pip install 'plugtorch[mpi]')" if provider is None
                   else provider.unavailable_reason())
            raise RuntimeError(f"init_process_group(backend='mpi'): MPI is not usable: {why}")
    if pg is None:
        pg = SingleProcessGroup()
    if world_size not in (-1, pg.size()) or rank not in (-1, pg.rank()):
        pg.shutdown()
        raise ValueError(f"init_process_group(world_size={world_size}, rank={rank}) disagrees with "
                         f"the launcher, which started this process as rank {pg.rank()} of {pg.size()}")
    if pg.size() > 1:
        _size_threads(pg)
    if os.environ.get("PLUGTORCH_DISTRIBUTED_DEBUG", "").upper() in ("1", "DETAIL", "INFO"):
        from .debug import CheckedProcessGroup
        pg = CheckedProcessGroup(pg)
    _default_pg = pg
    return pg


def init(backend: str | None = None, timeout=None) -> ProcessGroup:
    """Join the launched world (or a single process); a no-op if already initialised.

    ``timeout`` as for :func:`init_process_group`.
    """
    return _default_pg if _default_pg is not None else init_process_group(backend, timeout=timeout)


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    global _default_pg
    if _default_pg is not None:
        _default_pg.shutdown()
    _default_pg = None


def abort(exit_code: int = 1) -> None:
    """End every rank of the job now with ``exit_code`` (plugtorch's own; no torch peer).

    A rank that stops on an error the others cannot see (it returns an error status
    instead of raising) must call this: otherwise the other ranks wait forever in their
    next collective, and this one in MPI's shutdown. Uncaught exceptions need nothing:
    the MPI plugin aborts the job for them. With one process this is ``SystemExit``.
    """
    import sys
    sys.stdout.flush()
    sys.stderr.flush()
    if _default_pg is None:
        raise SystemExit(exit_code)
    _default_pg.abort(exit_code)


def _group(group) -> ProcessGroup:
    if group is not None:
        return group
    if _default_pg is None:
        raise ValueError("Default process group has not been initialized, please make sure to "
                         "call plugtorch.distributed.init() (or init_process_group()) first")
    return _default_pg


def get_rank(group: ProcessGroup | None = None) -> int:
    return _group(group).rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    return _group(group).size()


def get_backend(group: ProcessGroup | None = None) -> str:
    return _group(group).backend_name


def _check_tensor(t, name: str, fn: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}: {name} must be a plugtorch.Tensor, got {type(t).__name__}")


def _check_src(pg, src: int, fn: str) -> None:
    if not 0 <= src < pg.size():
        raise ValueError(f"{fn}: src={src} is not a rank of this group (size {pg.size()})")


def _finish(work: Work, async_op: bool):
    if async_op:
        return work
    work.wait()
    return None


def barrier(group: ProcessGroup | None = None, async_op: bool = False):
    return _finish(_group(group).barrier(), async_op)


def all_reduce(tensor, op: ReduceOp = ReduceOp.SUM, group: ProcessGroup | None = None,
               async_op: bool = False):
    """Reduce ``tensor`` over all ranks, in place, with ``op``; every rank gets the result."""
    _check_tensor(tensor, "tensor", "all_reduce")
    if not isinstance(op, ReduceOp):
        raise TypeError(f"all_reduce: op must be a plugtorch.distributed.ReduceOp, got {op!r}")
    if op is ReduceOp.AVG and not tensor.dtype.is_floating_point:
        raise TypeError(f"all_reduce: ReduceOp.AVG needs a floating-point tensor, got {tensor.dtype.name}; "
                        "use ReduceOp.SUM and divide")
    return _finish(_group(group).allreduce(tensor, op), async_op)


def broadcast(tensor, src: int = 0, group: ProcessGroup | None = None, async_op: bool = False):
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every rank, in place."""
    _check_tensor(tensor, "tensor", "broadcast")
    pg = _group(group)
    _check_src(pg, src, "broadcast")
    return _finish(pg.broadcast(tensor, src), async_op)


def all_gather(tensor_list: list, tensor, group: ProcessGroup | None = None, async_op: bool = False):
    """Fill ``tensor_list[r]`` with rank r's ``tensor`` (all of one shape and dtype)."""
    _check_tensor(tensor, "tensor", "all_gather")
    pg = _group(group)
    if len(tensor_list) != pg.size():
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors, but the group has "
                         f"{pg.size()} ranks; pass one tensor per rank")
    for i, t in enumerate(tensor_list):
        _check_tensor(t, f"tensor_list[{i}]", "all_gather")
        if t.shape != tensor.shape or t.dtype is not tensor.dtype:
            raise ValueError(f"all_gather: tensor_list[{i}] is {t.dtype.name}{list(t.shape)} but tensor "
                             f"is {tensor.dtype.name}{list(tensor.shape)}; they must match")
    return _finish(pg.allgather(tensor_list, tensor), async_op)


def all_gather_object(object_list: list, obj, group: ProcessGroup | None = None) -> None:
    """Fill ``object_list`` (one slot per rank) with every rank's picklable ``obj``."""
    pg = _group(group)
    if len(object_list) != pg.size():
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} slots for a group "
                         f"of {pg.size()} ranks")
    object_list[:] = pg.allgather_object(obj)


def broadcast_object_list(object_list: list, src: int = 0, group: ProcessGroup | None = None) -> None:
    """Replace ``object_list``'s items on every rank with those of rank ``src``."""
    pg = _group(group)
    _check_src(pg, src, "broadcast_object_list")
    object_list[:] = pg.broadcast_object(list(object_list), src)
