"""index_select along the first axis as row copies on the pool (``_kernels.take_rows``), and
its adjoint, rows added in at an index (``_kernels.add_rows``).

A data loader's batch is one such gather: 128 random rows of a 188 MB image set. NumPy copies
them on one thread, bound by the memory's latency; split over the pool's two threads, a batch
inside a training loop took 37 us instead of 69 (1 thread: 68 against 72). Elsewhere, or for
other layouts, dims and dtypes, NumPy's ``take``, contiguous as the op's lowering makes it."""
from __future__ import annotations

import numpy as np

from .. import fused
from . import FLOATS
from . import _kernels as _loaded

assert _loaded is not None, "imported only once the extension has loaded (native.kernels, native.add_at)"
_kernels = _loaded  # the package's name is None where the extension is off; here it is loaded


def index_select(x, index, *, dim):
    if dim == 0 and x.ndim >= 2 and x.flags.c_contiguous and not x.dtype.hasobject and index.dtype == np.int64:
        out = np.empty((index.shape[0],) + x.shape[1:], dtype=x.dtype)
        _kernels.take_rows(x, np.ascontiguousarray(index), out)
        return out
    return np.take(x, index, axis=dim)  # contiguous as torch's result (x[:, index] lays the dim out first)


def add_at(fallback):
    """``add_at(out, index, values)`` (``np.add.at``, the index_add primitive's accumulation) with
    whole rows of a C-contiguous float ``out`` added in C, one after another in index order: an
    embedding's gradient, (35, 20) lookups of 128 floats into a (2000, 128) table, took 0.48 ms
    (index_put_zeros, one thread) through the sorted sums of ``fallback`` (``fused.add_at``:
    add.reduceat is slow on many short segments) and 0.05 ms here. Everything else goes to
    ``fallback``."""
    add_rows = getattr(_kernels, "add_rows", None)  # an extension built from older sources lacks it
    if add_rows is None:
        return fallback

    def add_at(out, index, values):
        idx = fused.whole_rows(out, index, values)
        if idx is None or idx.dtype.kind != "i" or out.dtype not in FLOATS or not out.size:
            fallback(out, index, values)
            return
        width = out.size // out.shape[0]
        add_rows(out.reshape(out.shape[0], width), np.ascontiguousarray(idx.reshape(-1), dtype=np.int64),
                 np.ascontiguousarray(values).reshape(idx.size, width))
    return add_at
