"""softmax, log_softmax, cross_entropy and cross_entropy_backward as CUDA kernels.

``make_kernels(xp, load)`` gives the registered-op kernels, with the NumPy backend's
signatures (``backends/numpy_backend/fused.py``): ``kernels/softmax.cu`` runs one block per
row with the row's max and sum reduced in shared memory, ``kernels/cross_entropy.cu`` fuses
log-softmax, pick, weights, smoothing and the reduction. 'mean' divides on the device (a 0-d
device array from a one-block kernel, read by the next kernel): no value comes back to the
host, so a step never waits for the GPU here.

float32 and float64 run as themselves; float16 runs in float32 and is rounded back once
(there is no half kernel: NVRTC has no cuda_fp16.h without the toolkit's headers).
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy

from .modules import as_operand, blocks, float_work_dtype, kernel_finder

_REDUCTIONS = ("none", "mean", "sum")


def _work_dtype(dtype) -> numpy.dtype:
    return float_work_dtype(dtype, "no CUDA kernel for {dtype}: these kernels take float16, float32 or float64")


def _threads_for(n: int) -> int:
    """Threads of a block that reduces n values: a power of two covering them, 32 to 256."""
    return min(256, max(32, 1 << max(0, n - 1).bit_length()))


def make_kernels(xp, load: Callable) -> dict[str, Callable]:
    """op name -> kernel over ``xp`` arrays (``cupy``, or NumPy with the CPU-built kernels)."""
    function = kernel_finder(load)
    contiguous = as_operand

    def done(out, dtype):
        return out if out.dtype == dtype else out.astype(dtype)

    def softmax_like(name):
        def kernel(x, dim):
            if x.ndim == 0:
                return kernel(x.reshape(1), 0).reshape(())
            if x.size == 0:
                return xp.empty(x.shape, dtype=x.dtype)
            work = _work_dtype(x.dtype)
            d = dim % x.ndim
            xc = contiguous(x, work)
            cols = x.shape[d]
            inner = math.prod(x.shape[d + 1:])
            rows = x.size // cols
            y = xp.empty(x.shape, dtype=work)
            function("softmax", name, work)((blocks(rows, 1),), (_threads_for(cols),),
                                            (xc, y, numpy.int64(rows), numpy.int64(cols), numpy.int64(inner)))
            return done(y, x.dtype)
        kernel.__name__ = kernel.__qualname__ = name
        return kernel

    def operands(op_name, input, target, weight, label_smoothing):
        """(x, t, w, has_weight, probabilities, n, c, s, keep, each) for the kernels."""
        if input.ndim < 2:
            raise ValueError(f"{op_name}: the kernel takes input (N, C, *d), got shape {tuple(input.shape)}")
        work = _work_dtype(input.dtype)
        n, c = input.shape[:2]
        s = math.prod(input.shape[2:])
        if c == 0 and n * s:
            raise ValueError(f"{op_name}: input of shape {tuple(input.shape)} has no classes to normalise over")
        probabilities = target.dtype.kind == "f"
        x = contiguous(input, work)
        t = contiguous(target, work if probabilities else numpy.dtype(numpy.int64))
        has_weight = weight is not None
        w = contiguous(weight, work) if has_weight else x  # never read without has_weight
        ls = float(label_smoothing)
        return (x, t, w, numpy.int32(has_weight), probabilities, n, c, s,
                work.type(1 - ls), work.type(ls / c if c else 0.0))

    def cross_entropy(input, target, weight=None, *, ignore_index, reduction, label_smoothing):
        if reduction not in _REDUCTIONS:
            raise ValueError(f"cross_entropy: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
        x, t, w, has_weight, probabilities, n, c, s, keep, each = operands(
            "cross_entropy", input, target, weight, label_smoothing)
        work, rows = x.dtype, n * s
        smoothing = numpy.int32(label_smoothing != 0)
        if rows == 0:  # nothing to launch: 'sum' of nothing is 0, 'mean' 0 / 0 = nan as torch
            if reduction == "none":
                return xp.empty((n,) + tuple(input.shape[2:]), dtype=input.dtype)
            return xp.full((), 0.0 if reduction == "sum" else math.nan, dtype=input.dtype)
        loss = xp.empty(rows, dtype=work)
        grid, block = (blocks(rows, 1),), (_threads_for(c),)
        if probabilities:
            function("cross_entropy", "ce_prob_forward", work)(grid, block, (
                x, t, w, loss, numpy.int64(rows), numpy.int64(c), numpy.int64(s), has_weight, smoothing, keep,
                each))
        else:
            function("cross_entropy", "ce_index_forward", work)(grid, block, (
                x, t, w, loss, numpy.int64(rows), numpy.int64(c), numpy.int64(s), numpy.int64(ignore_index),
                has_weight, smoothing, keep, each))
        if reduction == "none":
            return done(loss.reshape((n,) + tuple(input.shape[2:])), input.dtype)
        out = xp.empty((), dtype=work)
        if reduction == "mean" and not probabilities:  # divided by the targets' summed weights
            function("cross_entropy", "ce_weighted_mean", work)((1,), (_threads_for(rows),), (
                loss, numpy.int64(rows), t, w, out, numpy.int64(rows), numpy.int64(c), numpy.int64(ignore_index),
                has_weight))
        else:  # 'sum', or 'mean' of probability targets over the N * d1 * ... rows
            divisor = work.type(rows if reduction == "mean" else 1)
            function("cross_entropy", "ce_sum", work)((1,), (_threads_for(rows),), (
                loss, numpy.int64(rows), out, divisor))
        return done(out, input.dtype)

    def cross_entropy_backward(grad_output, input, target, weight=None, *, ignore_index, reduction,
                               label_smoothing):
        if reduction not in _REDUCTIONS:
            raise ValueError(f"cross_entropy_backward: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
        x, t, w, has_weight, probabilities, n, c, s, keep, each = operands(
            "cross_entropy_backward", input, target, weight, label_smoothing)
        work, rows = x.dtype, n * s
        smoothing = numpy.int32(label_smoothing != 0)
        if rows == 0 or c == 0:
            return xp.empty(input.shape, dtype=input.dtype)
        g = contiguous(grad_output, work)
        if reduction == "none":
            scale, stride = g, 1
        elif reduction == "sum":
            scale, stride = g, 0
        else:  # 'mean': grad_output / divisor, computed into a device scalar
            scale, stride = xp.empty((), dtype=work), 0
            if probabilities:
                function("cross_entropy", "ce_sum", work)((1,), (_threads_for(1),), (
                    g, numpy.int64(1), scale, work.type(rows)))
            else:
                function("cross_entropy", "ce_weighted_mean", work)((1,), (_threads_for(rows),), (
                    g, numpy.int64(1), t, w, scale, numpy.int64(rows), numpy.int64(c), numpy.int64(ignore_index),
                    has_weight))
        dx = xp.empty(input.shape, dtype=work)
        grid, block = (blocks(rows, 1),), (_threads_for(c),)
        if probabilities:
            function("cross_entropy", "ce_prob_backward", work)(grid, block, (
                x, t, w, scale, numpy.int64(stride), dx, numpy.int64(rows), numpy.int64(c), numpy.int64(s),
                has_weight, smoothing, keep, each))
        else:
            function("cross_entropy", "ce_index_backward", work)(grid, block, (
                x, t, w, scale, numpy.int64(stride), dx, numpy.int64(rows), numpy.int64(c), numpy.int64(s),
                numpy.int64(ignore_index), has_weight, smoothing, keep, each, work.type(c)))
        return done(dx, input.dtype)

    return {"softmax": softmax_like("softmax"), "log_softmax": softmax_like("log_softmax"),
            "cross_entropy": cross_entropy, "cross_entropy_backward": cross_entropy_backward}
