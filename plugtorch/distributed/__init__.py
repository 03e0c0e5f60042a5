"""torch.distributed for plugtorch: process groups, collectives and point-to-point messages.

``init()`` reads the world this process was launched into: under ``mpiexec`` the
process group comes from the MPI plugin (through the registry service
``"distributed.process_group"``; this package never imports mpi4py); otherwise —
a plain ``python`` run, or MPI not installed — it is the core's single-process
group, whose collectives are no-ops. The same script therefore runs on one
process or many.

Set ``PLUGTORCH_DISTRIBUTED_DEBUG=1`` to check, before every collective, that all
ranks call the same collective with the same shapes and dtypes (see ``debug``).

Every collective and point-to-point op of torch.distributed is here, with torch's
signatures, on the default group or on groups made by ``new_group``/``new_subgroups``
(``groups``); the original four are below, the rest in ``collectives`` and ``p2p``.
The namespace holds torch's names (``__all__``), no helper modules' imports.

Every collective is bounded by the group's ``timeout`` (default 10 minutes,
``PLUGTORCH_DISTRIBUTED_TIMEOUT`` seconds): a rank that does not arrive makes the
others abort the job with a diagnosis instead of hanging. Under a launcher, each
rank's BLAS threads are sized to its share of the node's cores (``plugtorch.threads``).
"""
import datetime as _datetime
import os as _os
import sys as _sys
import warnings as _warnings

from .. import threads as _threads
from ..core.grad_mode import no_grad as _no_grad
from . import groups as _groups
from ._args import check_like as _check_like
from ._args import check_list_len as _check_list_len
from ._args import check_tensor as _check_tensor
from ._args import reduce_op as _reduce_op
from ._args import run as _run
from ._args import scaled as _scaled
from ._device_backends import get_default_backend_for_device
from .collectives import _make_nccl_premul_sum as _make_nccl_premul_sum
from .collectives import (
    all_gather_into_tensor,
    all_to_all,
    all_to_all_single,
    gather,
    gather_object,
    monitored_barrier,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    scatter,
    scatter_object_list,
)
from .device_mesh import DeviceMesh, init_device_mesh
from .grad_bucket import GradBucket
from .groups import (
    GroupMember,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    group,
    new_group,
    new_subgroups,
)
from .p2p import P2POp, batch_isend_irecv, irecv, isend, recv, send
from .process_group import ProcessGroup, ReduceOp, SingleProcessGroup, Work

__all__ = [
    "ReduceOp", "Work", "ProcessGroup", "GroupMember", "P2POp", "GradBucket", "group", "default_pg_timeout",
    "init", "init_process_group", "destroy_process_group", "is_available", "is_initialized",
    "is_mpi_available", "is_torchelastic_launched", "get_rank", "get_world_size", "get_backend",
    "get_node_local_rank", "new_group", "new_subgroups", "get_process_group_ranks", "get_global_rank",
    "get_group_rank", "barrier", "monitored_barrier", "all_reduce", "broadcast", "all_gather",
    "all_gather_into_tensor", "reduce", "reduce_scatter", "reduce_scatter_tensor", "all_to_all",
    "all_to_all_single", "gather", "scatter", "send", "recv", "isend", "irecv", "batch_isend_irecv",
    "all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list", "abort",
    "DeviceMesh", "init_device_mesh", "get_default_backend_for_device",
]

SERVICE = "distributed.process_group"
default_pg_timeout = _datetime.timedelta(minutes=10)


def _timeout_seconds(timeout) -> float:
    """``timeout`` (a timedelta or seconds), else PLUGTORCH_DISTRIBUTED_TIMEOUT, else 10 minutes."""
    if timeout is None:
        env = _os.environ.get("PLUGTORCH_DISTRIBUTED_TIMEOUT")
        if not env:
            return default_pg_timeout.total_seconds()
        try:
            seconds = float(env)
        except ValueError:
            raise ValueError(f"PLUGTORCH_DISTRIBUTED_TIMEOUT={env!r} is not a number of seconds") from None
    else:
        seconds = timeout.total_seconds() if isinstance(timeout, _datetime.timedelta) else float(timeout)
    if not seconds > 0:
        raise ValueError(f"init_process_group: timeout must be positive, got {timeout!r}")
    return seconds


def _size_threads(pg: ProcessGroup) -> None:
    """Give each rank its share of its node's cores, and say so once (see plugtorch.threads)."""
    sharing, cores = pg.cpu_share()
    n = _threads.size_for_ranks(sharing, cores)
    if n is not None and pg.rank() == 0:
        _sys.stderr.write(
            f"plugtorch.distributed: {sharing} ranks share {cores} cores on this node, so each rank's BLAS "
            f"uses {n} thread{'s' if n > 1 else ''}; set OMP_NUM_THREADS or call plugtorch.set_num_threads() "
            "to choose\n")
        _sys.stderr.flush()


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
    return _groups._world.default_pg is not None


def is_torchelastic_launched() -> bool:
    """Whether torchrun (torchelastic) or ``python -m plugtorch.distributed.run`` started this
    process; plain mpiexec is not torchelastic."""
    return _os.getenv("TORCHELASTIC_RUN_ID") is not None


def get_node_local_rank(fallback_rank: int | None = None) -> int:
    """This process's rank on its node, from ``LOCAL_RANK`` (torchrun) or the MPI launcher's
    local rank variable; else ``fallback_rank``; else a RuntimeError."""
    for var in ("LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
                "SLURM_LOCALID"):
        if var in _os.environ:
            return int(_os.environ[var])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("LOCAL_RANK is not in the environment. Consider passing fallback_rank to allow "
                       "`get_node_local_rank` to work, assuming you are not running in a multi-device context "
                       "and want the code to run locally instead.")


def init_process_group(backend: str | None = None, init_method=None, timeout=None,
                       world_size: int = -1, rank: int = -1) -> ProcessGroup:
    """Create the default process group (torch.distributed.init_process_group).

    backend: ``None`` (MPI when launched under it, else a single process), ``"mpi"``
    (required: an error if this process was not launched under MPI) or ``"single"``.
    timeout: a ``_datetime.timedelta`` or seconds bounding every collective (default
    ``PLUGTORCH_DISTRIBUTED_TIMEOUT`` seconds, else 10 minutes); a collective that some rank
    does not join in time aborts the job with a diagnosis naming it and the missing ranks.
    ``init_method``, ``world_size`` and ``rank`` are accepted for torch compatibility: with MPI
    the launcher decides the world, and a ``world_size`` or ``rank`` that disagrees with it is
    an error.
    """
    if _groups._world.default_pg is not None:
        raise RuntimeError("trying to initialize the default process group twice; call "
                           "plugtorch.distributed.destroy_process_group() first")
    backend = _torch_backend(backend)
    if backend not in (None, "mpi", "single"):
        raise ValueError(f"unknown distributed backend {backend!r}; plugtorch offers 'mpi' "
                         "(the MPI plugin, under mpiexec), 'single' (one process), and takes 'gloo' "
                         "and 'nccl' as the MPI plugin's CPU collectives")
    if init_method == "env://" and "WORLD_SIZE" in _os.environ:
        # torchrun's contract: the launcher's RANK/WORLD_SIZE must be the world MPI started.
        world_size = int(_os.environ["WORLD_SIZE"]) if world_size == -1 else world_size
        rank = int(_os.environ.get("RANK", -1)) if rank == -1 else rank
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
    if _os.environ.get("PLUGTORCH_DISTRIBUTED_DEBUG", "").upper() in ("1", "DETAIL", "INFO"):
        from .debug import CheckedProcessGroup
        pg = CheckedProcessGroup(pg)
    _groups._world.default_pg = pg
    return pg


_warned_nccl = False


def _torch_backend(backend: str | None) -> str | None:
    """torch's backend names on plugtorch's: ``gloo`` is the default choice (MPI when launched
    under it, else one process); ``nccl`` also, with a warning, as there is no CUDA here."""
    global _warned_nccl
    if backend is None:
        return None
    parts = {p.split(":")[-1].strip().lower() for p in backend.split(",")}  # "cpu:gloo,cuda:nccl"
    if parts <= {"gloo", "nccl"}:
        if "nccl" in parts and not _warned_nccl:
            _warned_nccl = True
            _warnings.warn(f"init_process_group(backend={backend!r}): NCCL needs CUDA devices and this "
                           "plugtorch build has none; using the MPI plugin's CPU collectives (as 'gloo' "
                           "would) instead", UserWarning, stacklevel=3)
        return None
    return backend.lower()


def init(backend: str | None = None, timeout=None) -> ProcessGroup:
    """Join the launched world (or a single process); a no-op if already initialised.

    ``timeout`` as for :func:`init_process_group`.
    """
    pg = _groups._world.default_pg
    return pg if pg is not None else init_process_group(backend, timeout=timeout)


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Shut ``group`` down; None (or the default group): every group, and the default one."""
    _groups.destroy(group)


def abort(exit_code: int = 1) -> None:
    """End every rank of the job now with ``exit_code`` (plugtorch's own; no torch peer).

    A rank that stops on an error the others cannot see (it returns an error status
    instead of raising) must call this: otherwise the other ranks wait forever in their
    next collective, and this one in MPI's shutdown. Uncaught exceptions need nothing:
    the MPI plugin aborts the job for them. With one process this is ``SystemExit``.
    """
    _sys.stdout.flush()
    _sys.stderr.flush()
    pg = _groups._world.default_pg
    if pg is None:
        raise SystemExit(exit_code)
    pg.abort(exit_code)


def _group(group) -> ProcessGroup:
    """``group``, or the default group for None (DistributedDataParallel's lookup)."""
    return group if group is not None else _groups.default_group()


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank in ``group`` (-1 outside it)."""
    pg = _groups.default_group() if group is None else None if group == GroupMember.NON_GROUP_MEMBER else group
    return -1 if pg is None else pg.rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    """The number of ranks of ``group`` (-1 outside it)."""
    pg = _groups.default_group() if group is None else None if group == GroupMember.NON_GROUP_MEMBER else group
    return -1 if pg is None else pg.size()


def get_backend(group: ProcessGroup | None = None) -> str:
    pg = _groups.resolve(group, "get_backend")
    if pg is None:
        raise ValueError("Invalid process group specified")
    return pg.backend_name


def barrier(group: ProcessGroup | None = None, async_op: bool = False, device_ids=None, timeout=None):
    """Wait until every rank of ``group`` has called it (``device_ids`` and ``timeout`` are accepted
    for torch compatibility; the group's timeout bounds it)."""
    pg = _groups.resolve(group, "barrier")
    return None if pg is None else _run(pg.barrier, async_op)


def all_reduce(tensor, op=ReduceOp.SUM, group: ProcessGroup | None = None, async_op: bool = False):
    """Reduce ``tensor`` over all ranks, in place, with ``op``; every rank gets the result."""
    _check_tensor(tensor, "tensor", "all_reduce")
    pg = _groups.resolve(group, "all_reduce")
    if pg is None:
        return None
    op, factor = _reduce_op(op, tensor.dtype, "all_reduce")
    if factor is not None:
        with _no_grad():  # the tensor is overwritten with the result anyway
            tensor.copy_(_scaled(tensor, factor))
    return _run(pg.allreduce, async_op, tensor, op)


def broadcast(tensor, src: int | None = None, group: ProcessGroup | None = None, async_op: bool = False,
              group_src: int | None = None):
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every rank, in place."""
    _check_tensor(tensor, "tensor", "broadcast")
    pg = _groups.resolve(group, "broadcast")
    if pg is None:
        return None
    root = _groups.group_rank(pg, src, group_src, "broadcast", "src")
    return _run(pg.broadcast, async_op, tensor, root)


def all_gather(tensor_list: list, tensor, group: ProcessGroup | None = None, async_op: bool = False):
    """Fill ``tensor_list[r]`` with rank r's ``tensor`` (all of one shape and dtype)."""
    _check_tensor(tensor, "tensor", "all_gather")
    pg = _groups.resolve(group, "all_gather")
    if pg is None:
        return None
    _check_list_len(tensor_list, pg.size(), "tensor_list", "all_gather")
    for i, t in enumerate(tensor_list):
        _check_tensor(t, f"tensor_list[{i}]", "all_gather")
        _check_like(t, tensor, "all_gather", f"tensor_list[{i}]")
    return _run(pg.allgather, async_op, tensor_list, tensor)


def all_gather_object(object_list: list, obj, group: ProcessGroup | None = None) -> None:
    """Fill ``object_list`` (one slot per rank) with every rank's picklable ``obj``."""
    pg = _groups.resolve(group, "all_gather_object")
    if pg is None:
        return
    if len(object_list) != pg.size():
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} slots for a group "
                         f"of {pg.size()} ranks")
    object_list[:] = pg.allgather_object(obj)


def broadcast_object_list(object_list: list, src: int | None = None, group: ProcessGroup | None = None,
                          device=None, group_src: int | None = None) -> None:
    """Replace ``object_list``'s items on every rank with those of rank ``src``."""
    pg = _groups.resolve(group, "broadcast_object_list")
    if pg is None:
        return
    root = _groups.group_rank(pg, src, group_src, "broadcast_object_list", "src")
    object_list[:] = pg.broadcast_object(list(object_list), root)
