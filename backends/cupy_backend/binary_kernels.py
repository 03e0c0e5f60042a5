"""add, sub, mul and div of large same-shape float arrays with 16-byte loads (``kernels/binary.cu``).

CuPy's ufuncs load one element per thread. On an H200 that moved a 2**26-element float32 add at
2.5 TB/s, where PyTorch's vectorised kernel moved 4.3 (``benchmarks/gpu_bench.py``): too few
bytes in flight per thread to cover the memory's latency. These primitives take over from the
ufuncs for operands that allow 16-byte loads — one float32/float64 dtype, one shape, both
C-contiguous and 16-byte aligned, at least ``MIN_ELEMENTS`` (4M) elements — and leave
everything else to the ufunc: broadcasting, views, integers, and smaller arrays, whose time
is the launch's on the host rather than the memory's. Each element is the same IEEE
operation, so the results are the ufunc's bit for bit.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy

from .modules import FLOATS, THREADS, blocks, kernel_finder

# Below this, the ufunc runs. Launching a RawKernel from Python, with the checks below, costs
# about 20 us of host time to the ufunc's 13, and a GPU adds 2**20 floats faster than that
# either way; measured on an H200 (gpu_bench.py's add_by_size_us, float32 add, us per call):
# 2**20: ufunc 13.1, kernel 20.0; 2**22: 23.3 and 20.6; 2**24: 83.3 and 50.7 (PyTorch 50.0).
MIN_ELEMENTS = 1 << 22
OPS = ("add", "sub", "mul", "div")


def _address(a) -> int:
    """Where ``a``'s first element lies: CuPy's device pointer, or NumPy's (the CPU tests' arrays)."""
    ptr = getattr(a.data, "ptr", None)
    return a.ctypes.data if ptr is None else ptr


def packable(x, y) -> bool:
    """Whether ``binary.cu`` runs on ``x`` and ``y`` as they lie in memory."""
    return (type(y) is type(x) and y.shape == x.shape and x.dtype == y.dtype and x.dtype in FLOATS
            and x.flags.c_contiguous and y.flags.c_contiguous and not (_address(x) | _address(y)) % 16)


def make_primitives(xp, load: Callable, table: dict) -> dict[str, Callable]:
    """primitive name -> the wide-load kernel in front of ``table``'s ufunc of that name."""
    find = kernel_finder(load)

    def wide(name: str, ufunc: Callable) -> Callable:
        def call(x, y):
            if getattr(x, "size", 0) >= MIN_ELEMENTS and packable(x, y):
                out = xp.empty(x.shape, x.dtype)
                width = 16 // x.dtype.itemsize
                find("binary", name, x.dtype)((blocks(x.size // width),), (THREADS,), (x, y, out, numpy.int64(x.size)))
                return out
            return ufunc(x, y)
        call.__name__ = name
        return call

    return {name: wide(name, table[name]) for name in OPS}
