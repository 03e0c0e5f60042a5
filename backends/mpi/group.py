"""The MPI process group: torch.distributed's collectives as non-blocking MPI calls.

Every collective — object collectives included — is posted as a non-blocking MPI
operation (``Iallreduce``, ``Ibcast``, ``Iallgather(v)``, ``Ibarrier``) and returns
an :class:`MPIWork`; the result reaches the tensor when the work is waited on (or
found complete). That lets DistributedDataParallel overlap gradient all-reduces
with backward, and lets the group's :class:`~.engine.Engine` progress them and
bound each one by the group's timeout. One posted inside ``with group.blocking():``
(the front end's ``async_op=False``), or that the group waits on itself at once, is
posted without waking the engine's thread (see ``engine``). The group talks on its own
duplicate of COMM_WORLD, so a user's own mpi4py traffic can never be matched with ours.
"""
from __future__ import annotations

import pickle
import threading
import time

import numpy as np
from mpi4py import MPI

from plugtorch.backend_api import ProcessGroup, ReduceOp, Work
from plugtorch.distributed import wire
from plugtorch.threads import usable_cores

from .buffers import Buffer, cuda_aware, write
from .collectives import Collectives, finisher, reduction, sum_op
from .engine import POLL_S, Engine, in_words
from .faults import abort_on_uncaught_exception


class MPIWork(Work):
    """A posted MPI request, and what to do once it completes (copy back, average)."""

    __slots__ = ("request", "finish", "_what", "engine", "seq", "deadline", "completed", "claimed",
                 "finished", "tensors", "status")

    def __init__(self, engine: Engine, request, finish, what, tensors=(), status=None):
        """``what``: the collective in words, or a function that says it (formatting costs a few
        µs, paid only for a report). The group hands it to ``engine`` (see ``MPIProcessGroup._post``)."""
        self.request, self.finish, self._what, self.engine = request, finish, what, engine
        self.status = status  # an MPI.Status for a receive from any rank: who sent it
        self.seq, self.deadline = 0, 0.0  # set by the engine when posted
        self.tensors = tensors if type(tensors) is list else list(tensors)  # the groups pass lists of their own
        self.completed = self.claimed = self.finished = False

    @property
    def what(self) -> str:
        return in_words(self._what)

    def _finish(self) -> None:
        if not self.finished:
            self.finished = True
            if self.finish is not None:
                self.finish()

    def wait(self, timeout=None) -> bool:
        if self.finished:
            return True
        if timeout is None:
            self.engine.wait(self)
            self.finished = True  # _finish's work inline: a waited collective's every call counts
            if self.finish is not None:
                self.finish()
            return True
        seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
        deadline = time.monotonic() + seconds
        while not self.engine.test(self):
            if time.monotonic() > deadline:
                raise TimeoutError(f"collective #{self.seq} {self.what} did not complete within {seconds:g} s "
                                   "(Work.wait(timeout=)); are all ranks calling the same collectives in "
                                   "the same order?")
            if self.engine.thread is None:
                self.engine.service()
            time.sleep(POLL_S)
        self._finish()
        return True

    def is_completed(self) -> bool:
        if not self.finished and self.engine.test(self):
            self._finish()
        return self.finished

    def _source_rank(self) -> int:
        if self.status is None:
            return super()._source_rank()
        self.wait()
        return self.status.Get_source()


class _Done(Work):
    """What ``_post`` returns for a collective it waited on itself: complete (its caller waits on
    it at once, and has the tensors it wrote)."""


DONE = _Done()


class _Received(_Done):
    """A receive from any rank that ``_post`` waited on: it knows who sent it."""

    def __init__(self, status) -> None:
        super().__init__()
        self.status = status

    def _source_rank(self) -> int:
        return self.status.Get_source()


def _describe(tensor) -> str:
    return f"{tensor.dtype.name}{list(tensor.shape)}"


class MPIProcessGroup(Collectives, ProcessGroup):
    """The world's group (``parent=None``: a duplicate of ``comm``, COMM_WORLD by default), or
    a subgroup of ``parent`` that owns ``comm`` (made by :meth:`new_group`)."""

    backend_name = "mpi"

    def __init__(self, comm=None, timeout: float = 600.0, parent: MPIProcessGroup | None = None,
                 global_ranks: list[int] | None = None):
        self.comm: MPI.Intracomm
        if parent is None:
            world = comm or MPI.COMM_WORLD
            self.comm, request = world.Idup()
            _wait_for_everyone(request, world, timeout)
        else:
            self.comm = comm
        self._rank = self.comm.Get_rank()
        self._size = self.comm.Get_size()
        self.global_ranks = global_ranks
        self.timeout = timeout
        if parent is None:
            self.device_direct = cuda_aware(self.comm, getattr(MPI, "Query_cuda_support", None))
            if self._size > 1:
                abort_on_uncaught_exception(self.comm)
            self._cpu_share = self._measure_cpu_share()
        else:
            self.device_direct, self._cpu_share = parent.device_direct, parent._cpu_share
        sharing, cores = self._cpu_share
        self.engine = Engine(self.comm, timeout, oversubscribed=sharing > cores)
        self.monitor = self.comm.Dup()  # monitored_barrier's tokens, apart from everything else
        self._monitor_seq = 0
        self._waiter: int | None = None  # the thread inside ``blocking()``
        self.bytes_reduced = 0  # all-reduce payload this rank has contributed, as sent

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    def blocking(self) -> _Blocking:
        return _Blocking(self)

    def run_waited(self, collective, args: tuple) -> None:
        """``blocking()`` and the wait, inline: ``_post`` waits on the collective itself
        unless waits sleep."""
        outer, self._waiter = self._waiter, threading.get_ident()
        try:
            work = collective(*args)
        finally:
            self._waiter = outer
        if work is not DONE:
            work.wait()

    def _post(self, request, finish, what, tensors=(), status=None, waited: bool = False) -> Work:
        """The work of ``request``. ``waited``: the group waits on it at once itself (so does a
        caller inside ``blocking()``); where waits spin, it is then waited on here, and the work
        returned is complete. That spares the Python layers between a posted request and its
        wait (see ``Engine.run_waited``); so a method posts one request per call (a second
        would wait for the first)."""
        engine = self.engine
        if (waited or self._waiter == threading.get_ident()) and engine.quiet_waits:
            engine.run_waited(request, status, what)
            if finish is not None:
                finish()
            return DONE if status is None else _Received(status)
        work = MPIWork(engine, request, finish, what, tensors, status)
        engine.post(work)
        return work

    def new_group(self, ranks: list[int], timeout: float | None = None,
                  local: bool = False) -> MPIProcessGroup | None:
        """Split this group's communicator (``local``: only ``ranks`` call, MPI_Comm_create_group)."""
        member = self._rank in ranks
        comm: MPI.Comm
        if local:
            whole = self.comm.Get_group()
            incl = whole.Incl(ranks)
            comm = self.comm.Create_group(incl)
            incl.Free()
            whole.Free()
        else:
            self._post(self.comm.Ibarrier(), None, f"new_group(ranks={ranks})",  # bounded by the watchdog
                       waited=True).wait()
            comm = self.comm.Split(0 if member else MPI.UNDEFINED, ranks.index(self._rank) if member else 0)
        if not member:
            return None
        mine = self.global_ranks or list(range(self._size))
        return MPIProcessGroup(comm, self.timeout if timeout is None else timeout, parent=self,
                               global_ranks=[mine[r] for r in ranks])

    def allreduce(self, tensor, op: ReduceOp, wire_dtype: str | None = None) -> Work:
        if wire_dtype is not None:
            return self._allreduce_on_wire(tensor, op, wire_dtype)
        buf = Buffer(tensor, self.device_direct)
        array = buf.array
        spec, mpi_op = reduction(array, op)  # float16 sums and bool tensors get their own op
        request = self.comm.Iallreduce(MPI.IN_PLACE, spec, mpi_op)
        self.bytes_reduced += array.nbytes
        return self._post(request, finisher(buf, op, self._size),
                          lambda: f"all_reduce({op.name}, {_describe(tensor)})", [tensor])

    def _allreduce_on_wire(self, tensor, op: ReduceOp, wire_dtype: str) -> Work:
        """All-reduce with the values travelling as ``wire_dtype`` (the compressed bucket exists
        only here, on the wire)."""
        wire.check(wire_dtype, tensor.dtype, op.name)
        buf = Buffer(tensor, self.device_direct)
        host = buf.host_array()
        array = wire.CODECS[wire_dtype][0](host / self._size if op is ReduceOp.AVG else host)
        request = self.comm.Iallreduce(MPI.IN_PLACE, [array, MPI.UINT16_T], sum_op(wire_dtype))
        self.bytes_reduced += array.nbytes

        def finish():
            buf.store_host(wire.CODECS[wire_dtype][1](array).reshape(buf.array.shape))
        return self._post(request, finish, lambda: f"all_reduce({op.name}, {_describe(tensor)} as {wire_dtype})",
                          [tensor])

    def broadcast(self, tensor, src: int) -> Work:
        buf = Buffer(tensor, self.device_direct)
        request = self.comm.Ibcast(buf.array, root=src)
        return self._post(request, buf.store, lambda: f"broadcast({_describe(tensor)}, src={src})", [tensor])

    def allgather(self, out_tensors: list, tensor) -> Work:
        send = Buffer(tensor, self.device_direct)
        recv = send.empty_like(self._size)
        request = self.comm.Iallgather(send.array, recv)

        def finish():
            for r, out in enumerate(out_tensors):
                write(out, recv[r], send.staged)
        return self._post(request, finish, lambda: f"all_gather({_describe(tensor)})", list(out_tensors))

    def barrier(self) -> Work:
        return self._post(self.comm.Ibarrier(), None, "barrier()")

    def allgather_object(self, obj) -> list:
        data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
        counts = np.zeros(self._size, dtype=np.int64)
        self._post(self.comm.Iallgather(np.array([data.size], dtype=np.int64), counts), None,
                   "all_gather_object() sizes", waited=True).wait()
        everything = np.empty(int(counts.sum()), dtype=np.uint8)
        self._post(self.comm.Iallgatherv(data, [everything, counts]), None,
                   f"all_gather_object() of {data.size} bytes", waited=True).wait()
        offsets = np.concatenate([[0], np.cumsum(counts)])
        return [pickle.loads(everything[offsets[r]:offsets[r + 1]].tobytes()) for r in range(self._size)]

    def broadcast_object(self, obj, src: int):
        data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8) if self._rank == src else None
        count = np.array([0 if data is None else data.size], dtype=np.int64)
        self._post(self.comm.Ibcast(count, root=src), None, f"broadcast_object(src={src}) size", waited=True).wait()
        if data is None:
            data = np.empty(int(count[0]), dtype=np.uint8)
        self._post(self.comm.Ibcast(data, root=src), None, f"broadcast_object(src={src}) data", waited=True).wait()
        return obj if self._rank == src else pickle.loads(data.tobytes())

    def cpu_share(self) -> tuple[int, int]:
        return self._cpu_share

    def _measure_cpu_share(self) -> tuple[int, int]:
        """Ranks on this node whose allowed cores overlap this rank's, and this rank's cores.

        Ranks bound to disjoint cores (``mpiexec -bind-to core``) do not share; unbound
        ranks on one node all do.
        """
        mine = usable_cores()
        node = self.comm.Split_type(MPI.COMM_TYPE_SHARED)
        try:
            everyone = node.allgather(sorted(mine))
        finally:
            node.Free()
        return sum(1 for cores in everyone if mine & set(cores)), len(mine)

    def abort(self, exit_code: int) -> None:
        self.comm.Abort(exit_code)

    def shutdown(self) -> None:
        if MPI.Is_finalized():
            return
        self.engine.stop()
        for comm in (self.monitor, self.comm):
            if comm != MPI.COMM_NULL:
                comm.Free()


class _Blocking:
    """``with group.blocking():``: this thread waits on what it posts at once (see ``_post``)."""

    __slots__ = ("group", "outer")

    def __init__(self, group: MPIProcessGroup):
        self.group = group

    def __enter__(self) -> None:
        self.outer = self.group._waiter
        self.group._waiter = threading.get_ident()

    def __exit__(self, *exc) -> None:
        self.group._waiter = self.outer


def _wait_for_everyone(request, comm, timeout: float) -> None:
    """Complete the group's creation, or abort the job naming the limit if a rank never comes."""
    deadline = time.monotonic() + timeout
    while not request.Test():
        if time.monotonic() > deadline:
            import sys
            sys.stderr.write(f"plugtorch.distributed: rank {comm.Get_rank()} of {comm.Get_size()} waited "
                             f"{timeout:g} s for the other ranks to call init_process_group(); some never did "
                             "(they failed or are stuck before it). Aborting the job.\n")
            sys.stderr.flush()
            comm.Abort(1)
        time.sleep(POLL_S)
