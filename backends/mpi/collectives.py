"""The MPI process group's collectives beyond all-reduce, broadcast and all-gather, and
point-to-point messages, each one non-blocking MPI call posted to the group's engine (so
the stall watchdog bounds it like any other).

Reductions go to MPI in the tensor's dtype (float16 sums through plugtorch's own op, as
``all_reduce`` does). Everything that only moves data goes as bytes, so every dtype
travels, whatever MPI types the library knows. Tensors that MPI reads or writes as a
whole go directly (device memory where the library is CUDA-aware, see ``buffers``);
lists of tensors are packed in host memory.
"""
from __future__ import annotations

import pickle
import time

import numpy as np
from mpi4py import MPI

from plugtorch.backend_api import ReduceOp
from plugtorch.distributed import wire

from .buffers import Buffer, write
from .engine import POLL_S

MPI_OPS = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD,
           ReduceOp.MAX: MPI.MAX, ReduceOp.MIN: MPI.MIN, ReduceOp.BAND: MPI.BAND,
           ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR}
_SUM_OPS: dict = {}  # wire dtype -> MPI.Op summing its 16-bit words, created on first use
# Looking a member up on an Enum class costs ~0.1 us (3.11): the hot paths compare with these
SUM, AVG = ReduceOp.SUM, ReduceOp.AVG


def sum_op(wire_dtype: str):
    op = _SUM_OPS.get(wire_dtype)
    if op is None:
        def add(incoming, inout, datatype):
            wire.add_into(wire_dtype, np.frombuffer(incoming, np.uint16), np.frombuffer(inout, np.uint16))
        op = _SUM_OPS[wire_dtype] = MPI.Op.Create(add, commute=True)
    return op


# MPI has no arithmetic on C_BOOL; torch reduces bool tensors as logical or / and
_BOOL_OPS = {ReduceOp.SUM: MPI.MAX, ReduceOp.MAX: MPI.MAX, ReduceOp.BOR: MPI.MAX, ReduceOp.PRODUCT: MPI.MIN,
             ReduceOp.MIN: MPI.MIN, ReduceOp.BAND: MPI.MIN, ReduceOp.BXOR: MPI.BXOR}


def reduction(array, op: ReduceOp):
    """(MPI buffer spec, MPI op) reducing ``array`` with ``op``."""
    kind = array.dtype.type  # NumPy and CuPy arrays alike; `is` tests: `dtype == x` costs ~0.3 us each
    if kind is np.bool_:
        return array.view(np.uint8), _BOOL_OPS[op]
    if kind is np.float16 and (op is SUM or op is AVG) and isinstance(array, np.ndarray):
        # MPICH's own float16 sum is ~4x slower than a float32 one; ours runs at NumPy speed
        return [array, MPI.UINT16_T], sum_op("float16")
    if op is SUM:  # hashing an Enum runs Python code: the common op skips the dict
        return array, MPI.SUM
    return array, MPI_OPS[op]


def finisher(buf: Buffer, op: ReduceOp, size: int):
    """What completes a reduction into ``buf`` over ``size`` ranks: AVG's division, then the store."""
    if op is AVG and size > 1:
        def finish():
            buf.array /= size
            buf.store()
        return finish
    return buf.store


def as_bytes(array):
    """The bytes of a contiguous array (host or device), as a 1-d view that MPI writes through."""
    return array.reshape(-1).view(np.uint8)


def byte_spec(array) -> list:
    """A contiguous array (host or device) as an MPI buffer of bytes, so that every dtype travels:
    mpi4py counts them from the buffer (cheaper than ``as_bytes``' view: ~0.15 us against 0.45)."""
    return [array, MPI.BYTE]


def _host_bytes(tensor) -> np.ndarray:
    return as_bytes(Buffer(tensor, False).host_array())


def _describe(tensor) -> str:
    return f"{tensor.dtype.name}{list(tensor.shape)}"


class Collectives:
    """Mixed into ``MPIProcessGroup``; see the module docstring."""

    comm: MPI.Intracomm
    monitor: MPI.Comm
    device_direct: bool
    _rank: int
    _size: int
    _monitor_seq: int

    def _post(self, request, finish, what, tensors=(), status=None, waited: bool = False):
        raise NotImplementedError  # MPIProcessGroup's

    def reduce(self, tensor, dst: int, op: ReduceOp):
        buf = Buffer(tensor, self.device_direct)
        spec, mpi_op = reduction(buf.array, op)
        root = self._rank == dst
        request = self.comm.Ireduce(MPI.IN_PLACE if root else spec, spec if root else None, mpi_op, root=dst)

        def finish():
            if root:
                if op is AVG and self._size > 1:
                    buf.array /= self._size
                buf.store()
        return self._post(request, finish, lambda: f"reduce({op.name}, {_describe(tensor)}, dst={dst})", [tensor])

    def reduce_scatter_tensor(self, output, input, op: ReduceOp):
        send, recv = Buffer(input, self.device_direct), Buffer(output, self.device_direct)
        send_spec, mpi_op = reduction(send.array, op)  # MPI counts a buffer's elements, whatever its shape
        recv_spec = recv.array if send_spec is send.array else reduction(recv.array, op)[0]
        request = self.comm.Ireduce_scatter_block(send_spec, recv_spec, mpi_op)
        return self._post(request, finisher(recv, op, self._size),
                          lambda: f"reduce_scatter({op.name}, {_describe(input)})", [output])

    def allgather_into_tensor(self, output, input):
        send, recv = Buffer(input, self.device_direct), Buffer(output, self.device_direct)
        request = self.comm.Iallgather([send.array, MPI.BYTE], [recv.array, MPI.BYTE])  # byte_spec's, inline
        return self._post(request, recv.store, lambda: f"all_gather_into_tensor({_describe(input)})", [output])

    def alltoall(self, outputs: list, inputs: list):
        parts = [_host_bytes(t) for t in inputs]
        send = np.concatenate(parts) if parts else np.empty(0, np.uint8)
        send_counts = np.array([p.size for p in parts], dtype=np.int64)
        recv_counts = np.array([t.numel() * t.element_size() for t in outputs], dtype=np.int64)
        recv = np.empty(int(recv_counts.sum()), np.uint8)
        request = self.comm.Ialltoallv([send, (send_counts, _displacements(send_counts)), MPI.BYTE],
                                       [recv, (recv_counts, _displacements(recv_counts)), MPI.BYTE])

        def finish():
            for out, start, count in zip(outputs, _displacements(recv_counts), recv_counts):
                write(out, recv[start:start + count].view(_np_dtype(out)).reshape(out.shape), from_host=True)
        return self._post(request, finish, lambda: f"all_to_all({send.size} bytes out, {recv.size} in)", list(outputs))

    def alltoall_single(self, output, input, output_splits: list[int], input_splits: list[int]):
        # The two tensors' own memory, as Alltoallv's buffers: packing the blocks into lists
        # (alltoall's way) cost two extra copies and ran at a fifth of raw MPI's bandwidth.
        send, recv = Buffer(input, self.device_direct), Buffer(output, self.device_direct)
        sa, ra = send.array, recv.array
        if sa is ra or (isinstance(sa, np.ndarray) and isinstance(ra, np.ndarray)  # two arrays that own their
                        and (sa.base is not None or ra.base is not None)        # memory never overlap
                        and np.may_share_memory(sa, ra)):
            # MPI forbids overlapping send and receive buffers: through copies, as alltoall does
            return self.alltoall(list(output.split(output_splits)), list(input.split(input_splits)))
        first = input_splits[0] if input_splits else 0
        if output_splits is input_splits or (input_splits.count(first) == len(input_splits)
                                             and output_splits.count(first) == len(output_splits)):
            # equal blocks: MPICH's Alltoall beats its Alltoallv
            request = self.comm.Ialltoall([send.array, MPI.BYTE], [recv.array, MPI.BYTE])
        else:
            row = input.element_size() * (input.numel() // max(input.shape[0], 1))  # bytes per dim-0 row
            send_counts = np.array(input_splits, dtype=np.int64) * row
            recv_counts = np.array(output_splits, dtype=np.int64) * row
            request = self.comm.Ialltoallv(
                [as_bytes(send.array), (send_counts, _displacements(send_counts)), MPI.BYTE],
                [as_bytes(recv.array), (recv_counts, _displacements(recv_counts)), MPI.BYTE])
        return self._post(request, recv.store,
                          lambda: f"all_to_all_single({_describe(input)} -> {_describe(output)})", [output])

    def gather(self, tensor, outputs: list | None, dst: int):
        send = Buffer(tensor, self.device_direct)
        recv = send.empty_like(self._size) if self._rank == dst else None
        request = self.comm.Igather(byte_spec(send.array), None if recv is None else byte_spec(recv), root=dst)

        def finish():
            if recv is not None and outputs is not None:
                for r, out in enumerate(outputs):
                    write(out, recv[r], send.staged)
        return self._post(request, finish, lambda: f"gather({_describe(tensor)}, dst={dst})", list(outputs or ()))

    def scatter(self, tensor, inputs: list | None, src: int):
        recv = Buffer(tensor, self.device_direct)
        send = np.concatenate([_host_bytes(t) for t in inputs]) if inputs is not None else None
        request = self.comm.Iscatter(send, byte_spec(recv.array), root=src)
        return self._post(request, recv.store, lambda: f"scatter({_describe(tensor)}, src={src})", [tensor])

    # -- point to point ----------------------------------------------------------------------
    def send(self, tensor, dst: int, tag: int):
        buf = Buffer(tensor, self.device_direct)
        request = self.comm.Isend([buf.array, MPI.BYTE], dest=dst, tag=tag)  # byte_spec's, inline
        return self._post(request, None, lambda: f"send({_describe(tensor)}, dst={dst}, tag={tag})", [tensor])

    def recv(self, tensor, src: int | None, tag: int):
        buf = Buffer(tensor, self.device_direct)
        source = MPI.ANY_SOURCE if src is None else src
        request = self.comm.Irecv([buf.array, MPI.BYTE], source=source, tag=tag)
        return self._post(request, buf.store, lambda: f"recv({_describe(tensor)}, src={src}, tag={tag})", [tensor],
                          status=MPI.Status() if src is None else None)

    # -- objects ----------------------------------------------------------------------------
    def gather_object(self, obj, dst: int) -> list | None:
        data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
        root = self._rank == dst
        counts = np.zeros(self._size, dtype=np.int64) if root else None
        self._post(self.comm.Igather(np.array([data.size], dtype=np.int64), counts, root=dst), None,
                   f"gather_object(dst={dst}) sizes", waited=True).wait()
        everything = np.empty(int(counts.sum()), np.uint8) if counts is not None else None
        spec = None if counts is None else [everything, (counts, _displacements(counts)), MPI.BYTE]
        self._post(self.comm.Igatherv(data, spec, root=dst), None, f"gather_object(dst={dst})", waited=True).wait()
        if counts is None or everything is None:
            return None
        offsets = _displacements(counts)
        return [pickle.loads(everything[o:o + c].tobytes()) for o, c in zip(offsets, counts)]

    def scatter_object(self, objs: list | None, src: int):
        parts = [np.frombuffer(pickle.dumps(o), dtype=np.uint8) for o in objs] if objs is not None else None
        counts = np.array([p.size for p in parts], dtype=np.int64) if parts is not None else None
        mine = np.zeros(1, dtype=np.int64)
        self._post(self.comm.Iscatter(counts, mine, root=src), None, f"scatter_object_list(src={src}) sizes",
                   waited=True).wait()
        data = np.empty(int(mine[0]), np.uint8)
        spec = None if parts is None else [np.concatenate(parts), (counts, _displacements(counts)), MPI.BYTE]
        self._post(self.comm.Iscatterv(spec, data, root=src), None, f"scatter_object_list(src={src})",
                   waited=True).wait()
        return pickle.loads(data.tobytes())

    # -- monitored barrier ---------------------------------------------------------------------
    def monitored_barrier(self, timeout: float, wait_all_ranks: bool) -> None:
        """Every rank reports to rank 0, which releases them all or names who did not come.

        It runs on a communicator of its own, and each call has its own tags, so that the
        token of a rank that arrives after a failed barrier matches nothing else.
        """
        self._monitor_seq = (self._monitor_seq + 1) % 16000
        arrive, release = 2 * self._monitor_seq, 2 * self._monitor_seq + 1
        deadline = time.monotonic() + timeout
        token = np.zeros(1, np.uint8)
        if self._rank != 0:
            self.monitor.Isend(token, dest=0, tag=arrive).Free()  # a 1-byte message goes eagerly
            request = self.monitor.Irecv(np.zeros(1, np.uint8), source=0, tag=release)
            if _pending(request, deadline):
                raise RuntimeError(f"Rank {self._rank} successfully reached monitoredBarrier, but received "
                                   "errors while waiting for send/recv from rank 0. Please check rank 0 logs "
                                   "for faulty rank.")
            return
        waits = {r: self.monitor.Irecv(np.zeros(1, np.uint8), source=r, tag=arrive) for r in range(1, self._size)}
        missing = []
        for r, request in waits.items():  # in rank order, as torch reports the first one
            if _pending(request, deadline):
                missing.append(r)
                if not wait_all_ranks:
                    break
        if missing:
            ms = int(round(timeout * 1000))
            if wait_all_ranks:
                raise RuntimeError(f"[Rank 0]: Ranks {', '.join(map(str, missing))} failed to pass "
                                   f"monitoredBarrier in {ms} ms")
            raise RuntimeError(f"[Rank 0]: Rank {missing[0]} failed to pass monitoredBarrier in {ms} ms")
        MPI.Request.Waitall([self.monitor.Isend(token, dest=r, tag=release) for r in range(1, self._size)])


def _pending(request, deadline: float) -> bool:
    """Whether ``request`` is still incomplete at ``deadline`` (then it is cancelled)."""
    while not request.Test():
        if time.monotonic() > deadline:
            request.Cancel()
            request.Wait()
            return True
        time.sleep(POLL_S)
    return False


def _displacements(counts) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if len(counts) else np.zeros(0, np.int64)


def _np_dtype(tensor) -> np.dtype:
    return np.dtype(tensor.dtype.name)
