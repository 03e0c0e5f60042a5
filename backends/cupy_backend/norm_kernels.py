"""layer_norm, layer_norm_backward, layer_norm_weight_grad and layer_norm_gradients as CUDA
kernels (``kernels/layer_norm.cu``): one block per row for the forward and the input gradient,
where the decompositions make six to ten passes and as many temporaries; the weight gradient is
the rows' statistics (one block per row), then one thread per (chunk of 64 rows, column)
summing down its chunk, and the chunks' sum. layer_norm_gradients, the backward of a layer norm
with a weight, is the input gradient's pass writing the rows' statistics, then one column pass
for the weight's and the bias's partial sums: two kernels and one sum, where its decomposition
(the three ops and a cat) takes three kernels, two sums and a copy.

``make_kernels(xp, load)`` gives the registered-op kernels with the NumPy backend's signatures
(``backends/numpy_backend/fused.py``). Inputs are viewed as (rows, n), n the product of
normalized_shape, copied C-contiguous where they are not; results are C-contiguous, as torch's.
float16 runs in float32 and is rounded back once, as the loss kernels do.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy

from .modules import THREADS, as_operand, blocks, float_work_dtype, kernel_finder

# rows one thread of the weight gradient sums: a (rows, n) input gives ceil(rows / 64) * n threads,
# enough to fill a GPU for a tall activation of few columns
_ROWS_PER_CHUNK = 64


def _work_dtype(op: str, dtype) -> numpy.dtype:
    return float_work_dtype(dtype, op + ": no CUDA kernel for {dtype}: it takes float16, float32 or float64")


def _row_threads(n: int) -> int:
    """Threads of a block that reduces a row of n: a power of two covering it, 32 to 256."""
    return min(256, max(32, 1 << max(0, n - 1).bit_length()))


def make_kernels(xp, load: Callable) -> dict[str, Callable]:
    """op name -> kernel over ``xp`` arrays (``cupy``, or NumPy with the CPU-built kernels)."""
    find = kernel_finder(load)

    def rows_of(a, n, work):
        return as_operand(a, work).reshape(-1, n)

    def param(p, n, work, like):
        # has-flag and array: an absent weight/bias is never read, any array of the dtype will do
        return (numpy.int32(0), like) if p is None else (numpy.int32(1), as_operand(p, work).reshape(n))

    def done(out, dtype):
        return out if out.dtype == dtype else out.astype(dtype)

    def layer_norm(input, weight, bias, *, normalized_shape, eps):
        work = _work_dtype("layer_norm", input.dtype)
        n = math.prod(normalized_shape)
        out = xp.empty(input.shape, dtype=work)
        if input.size:
            x = rows_of(input, n, work)
            rows = x.shape[0]
            has_w, w = param(weight, n, work, x)
            has_b, b = param(bias, n, work, x)
            find("layer_norm", "ln_forward", work)((blocks(rows, 1),), (_row_threads(n),), (
                x, w, b, out, numpy.int64(rows), numpy.int64(n), work.type(eps), has_w, has_b))
        return done(out, input.dtype)

    def layer_norm_backward(grad_output, input, weight, *, normalized_shape, eps):
        work = _work_dtype("layer_norm_backward", input.dtype)
        n = math.prod(normalized_shape)
        out = xp.empty(input.shape, dtype=work)
        if input.size:
            x, g = rows_of(input, n, work), rows_of(grad_output, n, work)
            rows = x.shape[0]
            has_w, w = param(weight, n, work, x)
            find("layer_norm", "ln_backward", work)((blocks(rows, 1),), (_row_threads(n),), (
                g, x, w, out, numpy.int64(rows), numpy.int64(n), work.type(eps), has_w))
        return done(out, input.dtype)

    def layer_norm_weight_grad(grad_output, input, *, normalized_shape, eps):
        work = _work_dtype("layer_norm_weight_grad", input.dtype)
        n = math.prod(normalized_shape)
        out = xp.zeros(tuple(normalized_shape), dtype=work)  # no rows: the sum of nothing
        if input.size:
            x, g = rows_of(input, n, work), rows_of(grad_output, n, work)
            rows = x.shape[0]
            mean, rstd = xp.empty(rows, dtype=work), xp.empty(rows, dtype=work)
            find("layer_norm", "ln_row_stats", work)((blocks(rows, 1),), (_row_threads(n),), (
                x, mean, rstd, numpy.int64(rows), numpy.int64(n), work.type(eps)))
            chunks = -(-rows // _ROWS_PER_CHUNK)
            partial = xp.empty((chunks, n), dtype=work)
            find("layer_norm", "ln_weight_grad", work)((blocks(chunks * n),), (THREADS,), (
                g, x, mean, rstd, partial, numpy.int64(rows), numpy.int64(n), numpy.int64(_ROWS_PER_CHUNK)))
            out = partial.sum(0).reshape(tuple(normalized_shape))
        return done(out, input.dtype)

    def layer_norm_gradients(grad_output, input, weight, *, normalized_shape, eps):
        work = _work_dtype("layer_norm_gradients", input.dtype)
        n, size = math.prod(normalized_shape), input.size
        out = xp.empty(size + 2 * n, dtype=work)  # dx, then the weight's and the bias's gradients
        if not size:
            out[:] = 0  # no rows: the sums of nothing
            return done(out, input.dtype)
        x, g = rows_of(input, n, work), rows_of(grad_output, n, work)
        rows = x.shape[0]
        mean, rstd = xp.empty(rows, dtype=work), xp.empty(rows, dtype=work)
        find("layer_norm", "ln_gradients_rows", work)((blocks(rows, 1),), (_row_threads(n),), (
            g, x, as_operand(weight, work).reshape(n), out[:size], mean, rstd, numpy.int64(rows), numpy.int64(n),
            work.type(eps)))
        chunks = -(-rows // _ROWS_PER_CHUNK)
        partial = xp.empty((2, chunks, n), dtype=work)
        find("layer_norm", "ln_gradients_cols", work)((blocks(chunks * n),), (THREADS,), (
            g, x, mean, rstd, partial[0], partial[1], numpy.int64(rows), numpy.int64(n),
            numpy.int64(_ROWS_PER_CHUNK)))
        partial.sum(1, out=out[size:].reshape(2, n))
        return done(out, input.dtype)

    return {"layer_norm": layer_norm, "layer_norm_backward": layer_norm_backward,
            "layer_norm_weight_grad": layer_norm_weight_grad, "layer_norm_gradients": layer_norm_gradients}
