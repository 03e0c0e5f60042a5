"""What a process group is, and the core's own one: a single process.

A process-group *provider* is a plugin service registered under
``"distributed.process_group"`` (the MPI plugin is one). It is an object with

* ``name``: the backend name users pass to ``init_process_group`` ("mpi");
* ``available()`` / ``unavailable_reason()``: whether it can run here, and why not;
* ``create()``: a :class:`ProcessGroup` for the world this process was launched
  into, or ``None`` when it was not launched by that provider's launcher (a plain
  ``python script.py``), in which case the core's :class:`SingleProcessGroup` is used.

A process group works on tensors *in place*, like torch.distributed. Collectives
return a :class:`Work`; the result is in the tensor once ``wait()`` returns. The
provider owns how a tensor's memory reaches the wire (host view, device buffer,
staging copy); this package never touches backend arrays.
"""
from __future__ import annotations

import enum

from ..futures import Future
from ..threads import usable_cores


class ReduceOp(enum.Enum):
    """Reduction applied by ``all_reduce`` (torch.distributed.ReduceOp)."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MAX = "max"
    MIN = "min"

    def __repr__(self) -> str:
        return f"ReduceOp.{self.name}"


class Work:
    """The handle of a collective; ``wait()`` blocks until its result is in the tensors.

    This base class is a collective that completed when it was posted (one process).
    """

    def __init__(self, tensors=()):
        self.tensors = list(tensors)

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return self.is_completed()

    def result(self) -> list:
        """The tensors the collective wrote (torch's ``Work.result()``)."""
        return self.tensors

    def get_future(self) -> Future:
        """A :class:`~plugtorch.futures.Future` completed with ``result()`` once the work is."""
        def drive():
            try:
                self.wait()
            except Exception as e:  # the future carries the failure to whoever waits on it
                fut.set_exception(e)
            else:
                fut.set_result(self.result())
        fut = Future._pending(drive, self.is_completed)
        return fut


class ProcessGroup:
    """The interface a provider implements. Every method is collective over the group."""

    backend_name = "none"

    def rank(self) -> int:
        raise NotImplementedError

    def size(self) -> int:
        raise NotImplementedError

    def allreduce(self, tensor, op: ReduceOp, wire_dtype: str | None = None) -> Work:
        """Reduce ``tensor`` in place. ``wire_dtype="bfloat16"``: the values travel and are
        reduced as bfloat16 (half the bytes; plugtorch has no bfloat16 tensor dtype), and the
        result is written back in ``tensor``'s dtype."""
        raise NotImplementedError

    def broadcast(self, tensor, src: int) -> Work:
        raise NotImplementedError

    def allgather(self, out_tensors: list, tensor) -> Work:
        raise NotImplementedError

    def barrier(self) -> Work:
        raise NotImplementedError

    def cpu_share(self) -> tuple[int, int]:
        """(processes of this group that share this process's cores, itself included; those cores)."""
        return 1, len(usable_cores())

    def allgather_object(self, obj) -> list:
        """Every rank's picklable ``obj``, in rank order."""
        raise NotImplementedError

    def broadcast_object(self, obj, src: int):
        """``src``'s picklable ``obj`` on every rank."""
        raise NotImplementedError

    def shutdown(self) -> None:
        """Release the group's resources (the provider may keep the library initialised)."""

    def abort(self, exit_code: int) -> None:
        """End every process of the job now with ``exit_code``; does not return."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<ProcessGroup backend={self.backend_name} rank={self.rank()} size={self.size()}>"


class SingleProcessGroup(ProcessGroup):
    """The world of one process: every collective is the identity.

    Used when a script is not launched under MPI, or when no provider is installed,
    so the same training code runs unchanged on one process.
    """

    backend_name = "single"

    def rank(self) -> int:
        return 0

    def size(self) -> int:
        return 1

    def allreduce(self, tensor, op: ReduceOp, wire_dtype: str | None = None) -> Work:
        if wire_dtype is not None:
            from .wire import round_to
            round_to(tensor, wire_dtype)
        return Work([tensor])

    def broadcast(self, tensor, src: int) -> Work:
        return Work([tensor])

    def allgather(self, out_tensors: list, tensor) -> Work:
        from ..core.grad_mode import no_grad
        with no_grad():
            out_tensors[0].copy_(tensor)
        return Work(out_tensors)

    def barrier(self) -> Work:
        return Work()

    def allgather_object(self, obj) -> list:
        return [obj]

    def broadcast_object(self, obj, src: int):
        return obj

    def abort(self, exit_code: int) -> None:
        raise SystemExit(exit_code)
