"""PLUGTORCH_DISTRIBUTED_DEBUG=1: catch collectives that differ across ranks.

MPI matches collectives by call order alone. If rank 0 all-reduces a [10] tensor
while rank 1 broadcasts a [20] one, the job hangs or silently mixes data. In debug
mode every collective first exchanges a fingerprint (sequence number, collective,
shapes, dtypes, op/src) with all ranks, and every rank raises the same error naming
the first rank that disagrees, as torch's TORCH_DISTRIBUTED_DEBUG=DETAIL does. The
exchange costs one small blocking all-gather per collective: for debugging only.
"""
from __future__ import annotations

from .process_group import ProcessGroup


class CollectiveMismatchError(RuntimeError):
    pass


def _describe(t) -> str:
    return f"{t.dtype.name}{list(t.shape)}"


class CheckedProcessGroup(ProcessGroup):
    """Wraps a process group; checks each collective's fingerprint across ranks first."""

    def __init__(self, pg: ProcessGroup):
        self.pg = pg
        self.backend_name = pg.backend_name
        self.seq = 0

    def rank(self) -> int:
        return self.pg.rank()

    def size(self) -> int:
        return self.pg.size()

    def _check(self, fingerprint: str) -> None:
        self.seq += 1
        mine = f"collective #{self.seq}: {fingerprint}"
        everyone = self.pg.allgather_object(mine)
        for r, theirs in enumerate(everyone):
            if theirs != mine:
                raise CollectiveMismatchError(
                    "Detected mismatch between collectives on ranks. "
                    f"Rank {self.rank()} is running {mine}, but rank {r} is running {theirs}. "
                    "Every rank must call the same collectives in the same order with tensors of "
                    "the same shape and dtype."
                )

    def allreduce(self, tensor, op, wire_dtype=None):
        wire = "" if wire_dtype is None else f", wire_dtype={wire_dtype}"
        self._check(f"all_reduce({_describe(tensor)}, op={op.name}{wire})")
        return self.pg.allreduce(tensor, op, wire_dtype)

    def broadcast(self, tensor, src):
        self._check(f"broadcast({_describe(tensor)}, src={src})")
        return self.pg.broadcast(tensor, src)

    def allgather(self, out_tensors, tensor):
        self._check(f"all_gather({_describe(tensor)})")
        return self.pg.allgather(out_tensors, tensor)

    def barrier(self):
        self._check("barrier()")
        return self.pg.barrier()

    def allgather_object(self, obj):
        self._check("all_gather_object()")
        return self.pg.allgather_object(obj)

    def broadcast_object(self, obj, src):
        self._check(f"broadcast_object(src={src})")
        return self.pg.broadcast_object(obj, src)

    def cpu_share(self):
        return self.pg.cpu_share()

    def __getattr__(self, name):  # the wrapped group's own attributes (timeout, counters)
        pg = self.__dict__.get("pg")
        if pg is None:
            raise AttributeError(name)
        return getattr(pg, name)

    def shutdown(self) -> None:
        self.pg.shutdown()

    def abort(self, exit_code: int) -> None:
        self.pg.abort(exit_code)
