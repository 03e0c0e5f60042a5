"""Tensors in shared memory, and sending them to other processes as handles, not copies.

``Tensor.share_memory_()`` moves a tensor's data into a shared segment: an anonymous
``memfd_create`` file (on other POSIX systems, a file in ``/dev/shm`` unlinked at once), mapped
with ``mmap``. The segment has no name anywhere, so nothing can leak in ``/dev/shm``: the
kernel frees it when the last process holding a mapping or descriptor of it lets go.

A shared tensor pickles (through ``multiprocessing.reduction.ForkingPickler``, which
``multiprocessing``'s ``Queue``, ``Pipe`` and ``Process`` arguments use) as the segment's file
descriptor, its byte offset, shape, strides and dtype; the receiver maps the same memory, so a
write on either side is seen by the other. This is torch's ``file_descriptor`` strategy: the
descriptor goes with ``Process`` arguments when a child is started, and through
``multiprocessing``'s resource sharer (the sender must still be running) otherwise. A tensor
not yet shared is moved to shared memory when it is sent, in place, as torch does.

Only host-memory (NumPy backend) tensors can be shared; a GPU tensor is refused (torch's CUDA
IPC has no equivalent here): move it with ``.cpu()`` first.
"""
from __future__ import annotations

import mmap
import os
import tempfile
import weakref
from multiprocessing import reduction

import numpy as np

from ..core.dtypes import bfloat16, int16
from ..core.ops.creation import from_numpy
from ..core.tensor import Tensor

__all__ = ["init_reductions", "is_shared", "share_memory_"]


class _Segment(mmap.mmap):
    """A mapping of a shared-memory file; owns its descriptor, closed when the mapping dies."""

    fd: int

    @classmethod
    def attach(cls, fd: int, size: int) -> _Segment:
        seg = cls(fd, size)
        seg.fd = fd
        weakref.finalize(seg, os.close, fd)
        return seg

    @classmethod
    def create(cls, nbytes: int) -> _Segment:
        size = max(nbytes, 1)  # mmap cannot map zero bytes
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("plugtorch-shared", os.MFD_CLOEXEC)
        else:
            where = "/dev/shm" if os.path.isdir("/dev/shm") else None
            fd, path = tempfile.mkstemp(prefix="plugtorch-shared-", dir=where)
            os.unlink(path)
        try:
            os.ftruncate(fd, size)
            return cls.attach(fd, size)
        except BaseException:
            os.close(fd)
            raise


def _segment_of(array: np.ndarray) -> _Segment | None:
    base: object = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return base if isinstance(base, _Segment) else None


def _refuse_device(t: Tensor, what: str) -> None:
    if t.backend != "numpy":
        raise RuntimeError(
            f"{what}: the tensor is on the {t.backend} backend ({t.device}); only tensors in host "
            "memory (the numpy backend) can be shared between processes, as CUDA IPC is not "
            "supported. Move it to the CPU with .cpu() first")


def _host(t: Tensor) -> np.ndarray:
    """``t``'s memory as an array (a bfloat16 tensor's as int16: numpy() refuses it, as torch's)."""
    t = t.detach()
    return t.view(int16).numpy() if t.dtype is bfloat16 else t.numpy()


def _tensor_of(array: np.ndarray, dtype_name: str) -> Tensor:
    t = from_numpy(array)
    return t.view(bfloat16) if dtype_name == "bfloat16" else t


def is_shared(t: Tensor) -> bool:
    return t.backend == "numpy" and _segment_of(_host(t)) is not None


def share_memory_(t: Tensor) -> Tensor:
    """Move ``t``'s data to a shared segment, in place (``t`` keeps its identity and values)."""
    _refuse_device(t, "share_memory_")
    src = _host(t)
    if _segment_of(src) is not None:
        return t
    seg = _Segment.create(src.nbytes)
    shared = np.ndarray(src.shape, dtype=src.dtype, buffer=seg)
    shared[...] = src
    t.data = _tensor_of(shared, t.dtype.name)
    return t


def _address(seg: _Segment) -> int:
    return np.frombuffer(seg, dtype=np.uint8).__array_interface__["data"][0]


def _reduce_tensor(t: Tensor):
    if t.requires_grad and not t.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd "
            "does not support crossing process boundaries.  If you just want to transfer the data, "
            "call detach() on the tensor before serializing (e.g., putting it on the queue).")
    _refuse_device(t, "sending a tensor to another process")
    share_memory_(t)
    array = _host(t)
    seg = _segment_of(array)
    assert seg is not None  # share_memory_ just put it there
    offset = array.__array_interface__["data"][0] - _address(seg)
    return _rebuild_tensor, (type(t), reduction.DupFd(seg.fd), len(seg), offset, array.dtype.str,
                             array.shape, array.strides, bool(t.requires_grad), t.dtype.name)


def _rebuild_tensor(cls, dup_fd, size, offset, dtype, shape, strides, requires_grad, dtype_name=""):
    seg = _Segment.attach(dup_fd.detach(), size)
    t = _tensor_of(np.ndarray(shape, dtype=np.dtype(dtype), buffer=seg, offset=offset, strides=strides),
                   dtype_name)
    from ..nn.parameter import Parameter
    if issubclass(cls, Parameter):
        return Parameter(t, requires_grad=requires_grad)
    return t.requires_grad_(True) if requires_grad else t


def init_reductions() -> None:
    """Register the tensor reducers with ``ForkingPickler`` (done when this package is imported)."""
    from ..nn.parameter import Parameter
    for cls in (Tensor, Parameter):
        reduction.ForkingPickler.register(cls, _reduce_tensor)
