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

import contextlib
import enum

from ..futures import Future
from ..threads import usable_cores


class ReduceOp(enum.Enum):
    """Reduction applied by ``all_reduce``, ``reduce`` and ``reduce_scatter`` (torch.distributed.ReduceOp).

    The bitwise ops take integer (and bool) tensors only. ``PREMUL_SUM`` multiplies every
    rank's input by a factor before summing; it is used through ``_make_nccl_premul_sum(factor)``
    (or ``ReduceOp.PREMUL_SUM(factor)``), as in torch. Process groups never see it: the front
    end scales the inputs and asks for ``SUM``.
    """

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"
    PREMUL_SUM = "premul_sum"

    def __call__(self, factor) -> PremulSum:
        if self is not ReduceOp.PREMUL_SUM:
            raise TypeError(f"ReduceOp.{self.name} takes no factor; only ReduceOp.PREMUL_SUM(factor) does")
        return PremulSum(factor)

    def __repr__(self) -> str:
        return f"ReduceOp.{self.name}"


BITWISE_OPS = (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)


class PremulSum:
    """``ReduceOp.PREMUL_SUM`` with its factor (a number, or a one-element tensor)."""

    op = ReduceOp.PREMUL_SUM

    def __init__(self, factor):
        self.factor = factor

    def __repr__(self) -> str:
        return f"ReduceOp.PREMUL_SUM({self.factor!r})"


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

    def _source_rank(self) -> int:
        """The group rank a ``recv(src=None)`` received from (torch's ``Work._source_rank()``)."""
        raise RuntimeError("Work._source_rank() is only available for a receive from any source")

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
    """The interface a provider implements. Every method but ``send``/``recv`` is collective
    over the group; ranks here are *group* ranks (the front end translates global ones)."""

    backend_name = "none"
    global_ranks: list[int] | None = None  # the group's ranks in the default group; None: all

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

    def blocking(self) -> contextlib.AbstractContextManager:
        """A context whose collectives (those this thread posts) the caller waits on at once,
        before posting anything else (``async_op=False``), so a provider may skip what only
        helps work in flight while its caller computes (the MPI plugin does not wake its
        progress thread). It must not change what the ranks exchange: the others may have
        posted the same collective async. This default changes nothing."""
        return contextlib.nullcontext()

    def run_waited(self, collective, args: tuple) -> None:
        """Call ``collective(*args)``, one of this group's methods, and wait for it: the front
        end's ``async_op=False``. This default posts it inside ``blocking()``; a provider may
        do the same in fewer steps (each costs a cache miss after a large collective)."""
        with self.blocking():
            work = collective(*args)
        work.wait()

    # -- the rest of torch.distributed; the front end has checked shapes, dtypes and ranks ----
    def _missing(self, what: str):
        raise NotImplementedError(f"the {self.backend_name!r} process group does not provide {what}")

    def reduce(self, tensor, dst: int, op: ReduceOp) -> Work:
        """Reduce ``tensor`` over the group into ``dst``'s ``tensor`` (the others' stay as they are)."""
        return self._missing("reduce")

    def reduce_scatter_tensor(self, output, input, op: ReduceOp) -> Work:
        """Reduce ``input`` (size x output.numel() elements); rank r gets the r-th block in ``output``."""
        return self._missing("reduce_scatter")

    def allgather_into_tensor(self, output, input) -> Work:
        """``output`` (size x input.numel() elements) gets every rank's ``input``, in rank order."""
        return self._missing("all_gather_into_tensor")

    def alltoall(self, outputs: list, inputs: list) -> Work:
        """Rank r's ``inputs[j]`` lands in rank j's ``outputs[r]`` (sizes agreed by the caller)."""
        return self._missing("all_to_all")

    def alltoall_single(self, output, input, output_splits: list[int], input_splits: list[int]) -> Work:
        """``all_to_all_single``: rank r's ``input`` rows, in blocks of ``input_splits[j]`` rows for
        rank j, land in rank j's ``output`` as its r-th block (``output_splits[r]`` rows). This
        default goes through :meth:`alltoall` with the blocks as lists; a provider that can move
        the two tensors' memory directly overrides it."""
        return self.alltoall(list(output.split(output_splits)), list(input.split(input_splits)))

    def gather(self, tensor, outputs: list | None, dst: int) -> Work:
        """``dst``'s ``outputs[r]`` gets rank r's ``tensor``; ``outputs`` is None elsewhere."""
        return self._missing("gather")

    def scatter(self, tensor, inputs: list | None, src: int) -> Work:
        """Every rank r's ``tensor`` gets ``src``'s ``inputs[r]``; ``inputs`` is None elsewhere."""
        return self._missing("scatter")

    def send(self, tensor, dst: int, tag: int) -> Work:
        return self._missing("send")

    def recv(self, tensor, src: int | None, tag: int) -> Work:
        """Receive into ``tensor`` from ``src`` (None: any rank); the work's ``source()`` says who."""
        return self._missing("recv")

    def gather_object(self, obj, dst: int) -> list | None:
        """Every rank's picklable ``obj`` on ``dst`` (None elsewhere)."""
        return self._missing("gather_object")

    def scatter_object(self, objs: list | None, src: int):
        """``src``'s ``objs[r]`` on each rank r."""
        return self._missing("scatter_object_list")

    def monitored_barrier(self, timeout: float, wait_all_ranks: bool) -> None:
        """A barrier that raises on rank 0, naming the ranks that did not arrive within ``timeout`` s."""
        return self._missing("monitored_barrier")

    def new_group(self, ranks: list[int], timeout: float | None = None, local: bool = False) -> ProcessGroup | None:
        """A group of these ranks of this group, in this order, called by every rank of this group
        (``local``: by those ranks only); None on the others. ``timeout``: seconds (None: this
        group's)."""
        return self._missing("new_group")

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

    def reduce(self, tensor, dst: int, op: ReduceOp) -> Work:
        return Work([tensor])

    def reduce_scatter_tensor(self, output, input, op: ReduceOp) -> Work:
        return _copied(output, input)

    def allgather_into_tensor(self, output, input) -> Work:
        return _copied(output, input)

    def alltoall(self, outputs: list, inputs: list) -> Work:
        return _copied(outputs[0], inputs[0])

    def gather(self, tensor, outputs: list | None, dst: int) -> Work:
        return _copied(outputs[0], tensor) if outputs is not None else Work()

    def scatter(self, tensor, inputs: list | None, src: int) -> Work:
        return _copied(tensor, inputs[0]) if inputs is not None else Work([tensor])

    def gather_object(self, obj, dst: int) -> list | None:
        return [obj]

    def scatter_object(self, objs: list | None, src: int):
        return objs[0] if objs is not None else None

    def monitored_barrier(self, timeout: float, wait_all_ranks: bool) -> None:
        return None

    def new_group(self, ranks: list[int], timeout: float | None = None, local: bool = False) -> ProcessGroup | None:
        return SingleProcessGroup()

    def allgather_object(self, obj) -> list:
        return [obj]

    def broadcast_object(self, obj, src: int):
        return obj

    def abort(self, exit_code: int) -> None:
        raise SystemExit(exit_code)


def _copied(out, value) -> Work:
    """``out`` := ``value`` (same number of elements), as a completed work."""
    from ..core.grad_mode import no_grad
    with no_grad():
        out.copy_(value.reshape(out.shape))
    return Work([out])
