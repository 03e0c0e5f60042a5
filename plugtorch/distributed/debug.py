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

    def blocking(self):  # the wrapped group's, for the collective itself (the check's is waited anyway)
        return self.pg.blocking()

    def allgather_object(self, obj):
        self._check("all_gather_object()")
        return self.pg.allgather_object(obj)

    def broadcast_object(self, obj, src):
        self._check(f"broadcast_object(src={src})")
        return self.pg.broadcast_object(obj, src)

    def reduce(self, tensor, dst, op):
        self._check(f"reduce({_describe(tensor)}, dst={dst}, op={op.name})")
        return self.pg.reduce(tensor, dst, op)

    def reduce_scatter_tensor(self, output, input, op):
        self._check(f"reduce_scatter({_describe(input)} -> {_describe(output)}, op={op.name})")
        return self.pg.reduce_scatter_tensor(output, input, op)

    def allgather_into_tensor(self, output, input):
        self._check(f"all_gather_into_tensor({_describe(input)} -> {_describe(output)})")
        return self.pg.allgather_into_tensor(output, input)

    def alltoall(self, outputs, inputs):
        self._check(f"all_to_all({len(inputs)} tensors of {inputs[0].dtype.name if inputs else '-'})")
        return self.pg.alltoall(outputs, inputs)

    def alltoall_single(self, output, input, output_splits, input_splits):
        self._check(f"all_to_all({len(input_splits)} tensors of {input.dtype.name})")
        return self.pg.alltoall_single(output, input, output_splits, input_splits)

    def gather(self, tensor, outputs, dst):
        self._check(f"gather({_describe(tensor)}, dst={dst})")
        return self.pg.gather(tensor, outputs, dst)

    def scatter(self, tensor, inputs, src):
        self._check(f"scatter({_describe(tensor)}, src={src})")
        return self.pg.scatter(tensor, inputs, src)

    def gather_object(self, obj, dst):
        self._check(f"gather_object(dst={dst})")
        return self.pg.gather_object(obj, dst)

    def scatter_object(self, objs, src):
        self._check(f"scatter_object_list(src={src})")
        return self.pg.scatter_object(objs, src)

    def monitored_barrier(self, timeout, wait_all_ranks):  # its point is to find who did not come: unchecked
        return self.pg.monitored_barrier(timeout, wait_all_ranks)

    def send(self, tensor, dst, tag):  # point to point: nothing for the other ranks to agree on
        return self.pg.send(tensor, dst, tag)

    def recv(self, tensor, src, tag):
        return self.pg.recv(tensor, src, tag)

    def new_group(self, ranks, timeout=None, local=False):
        if not local:
            self._check(f"new_group(ranks={ranks})")
        sub = self.pg.new_group(ranks, timeout, local)
        return None if sub is None else CheckedProcessGroup(sub)

    @property
    def global_ranks(self):  # type: ignore[override]
        return self.pg.global_ranks

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
