"""conv2d, max_pool2d and the registered ops their derivatives use, as CUDA kernels and cuBLAS.

``make_kernels(xp, load)`` gives the registered-op kernels, with the ops' calling convention
(operands positionally, attrs by keyword; see ``plugtorch/core/ops/conv.py`` and
``pooling.py``):

* ``conv2d``: ``kernels/im2col.cu`` copies the patches as (N, C*kh*kw, OH*OW), and one
  batched ``xp.matmul`` of the (G, O/G, C/G*kh*kw) weight with them is the (N, O, OH, OW)
  output itself, no transpose around the GEMM (Chainer's convolution without cuDNN).
* ``conv2d_input_grad``: the weight's transpose times the output gradient gives the patches'
  gradient, which ``col2im`` gathers onto the input (one thread per input element, no atomics).
* ``conv2d_weight_grad``: ``im2row`` copies the patches as (G, N*OH*OW, C/G*kh*kw) rows, and the
  output gradient as (G, O/G, N*OH*OW) times them is the weight gradient.
* ``max_pool2d``/``max_pool2d_backward`` (``kernels/maxpool.cu``): the backward receives
  (grad_output, input, output), finds each window's first maximum (last NaN) again and gathers.

The patch matrices are built a few images at a time (about ``COL_BYTES`` each), as the
decomposition does, so a large batch never needs a whole-batch patch buffer.

float32 and float64 run as themselves, float16 in float32 (rounded back once: NVRTC has no
cuda_fp16.h without the toolkit's headers). Integer and bool tensors, which these ops accept
as the decomposition does, run exactly: the convolutions in int64 (sums and products wrap
alike in int64 and in the narrower type; a nonzero bool sum is True, as bool matmul's OR of
ANDs), max pooling in int32 or int64 (a maximum is exact in any wider type).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy

from plugtorch.backend_api import dtype_from_name, promote_types, window_count

from .modules import THREADS, as_operand, blocks, kernel_finder

COL_BYTES = 1 << 28  # patches per chunk of images: 256 MiB
_F32, _I32, _I64 = numpy.dtype(numpy.float32), numpy.dtype(numpy.int32), numpy.dtype(numpy.int64)


def _promoted(a, b) -> numpy.dtype:
    """The dtype plugtorch's ops give ``a`` with ``b`` (torch's promotion, not NumPy's)."""
    a, b = numpy.dtype(a), numpy.dtype(b)
    if a == b:
        return a
    return numpy.dtype(promote_types(dtype_from_name(a.name), dtype_from_name(b.name)).name)


def _gemm_dtype(dtype: numpy.dtype) -> numpy.dtype:
    """What a convolution of ``dtype`` computes in."""
    if dtype.kind == "f":
        return _F32 if dtype.itemsize < 4 else dtype
    return _I64


def _max_dtype(dtype: numpy.dtype) -> numpy.dtype:
    """What max pooling of ``dtype`` compares in."""
    if dtype.kind == "f":
        return _F32 if dtype.itemsize < 4 else dtype
    return _I64 if dtype.itemsize == 8 else _I32


def _lowest(dtype: numpy.dtype, work: numpy.dtype):
    """The decomposition's padding value for ``dtype`` (core/ops/pooling.py ``_lowest``), as ``work``."""
    if dtype.kind == "f":
        return work.type(-numpy.inf)
    return work.type(0 if dtype.kind == "b" else numpy.iinfo(dtype).min)


def _geometry(size, out, kernel_size, stride, padding, dilation) -> tuple:
    """The kernels' trailing arguments: h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw."""
    return tuple(numpy.int64(v) for pair in (size, out, kernel_size, stride, padding, dilation) for v in pair)


def make_kernels(xp, load: Callable, *, col_bytes: int = COL_BYTES) -> dict[str, Callable]:
    """op name -> kernel over ``xp`` arrays (``cupy``, or NumPy with the CPU-built kernels)."""
    find = kernel_finder(load)
    contiguous = as_operand

    def launch(stem, name, dtype, n, *args):
        find(stem, name, dtype)((blocks(n),), (THREADS,), args)

    def done(out, dtype):
        return out if out.dtype == dtype else out.astype(dtype)

    def per_image(w, x):
        """``w @ x`` for the weights ``w`` (G, A, B) and every image's ``x`` (N, G, B, P, C-contiguous).
        CuPy's matmul spent 98 us of host time broadcasting ``w`` over N, and 22 us on the same
        GEMMs with ``w`` repeated in memory (gpu_host_overhead.py, H200), so ``w`` is repeated where
        the copy is no larger than ``x``; convolutions with large weights and few positions keep
        the broadcast."""
        n, g = x.shape[:2]
        if n * w.size > x.size:
            return xp.matmul(w, x)
        repeated = xp.ascontiguousarray(xp.broadcast_to(w, (n,) + w.shape)).reshape((n * g,) + w.shape[1:])
        return xp.matmul(repeated, x.reshape((n * g,) + x.shape[2:])).reshape((n, g, w.shape[1], x.shape[3]))

    def chunks(n, bytes_per_image):
        """(start, stop) ranges over a batch of ``n``, each about ``col_bytes`` of patches."""
        step = max(1, col_bytes // max(1, bytes_per_image))
        return [(a, min(n, a + step)) for a in range(0, n, step)] or [(0, 0)]

    def conv2d(input, weight, bias=None, *, stride, padding, dilation, groups):
        n, c, h, w = input.shape
        o, cg, kh, kw = weight.shape
        out = tuple(window_count(*t) for t in zip((h, w), (kh, kw), stride, padding, dilation))
        dtype = _promoted(input.dtype, weight.dtype)
        work = _gemm_dtype(dtype)
        k, p = cg * kh * kw, out[0] * out[1]
        x = contiguous(input, work)
        wmat = contiguous(weight, work).reshape(groups, o // groups, k)
        geometry = _geometry((h, w), out, (kh, kw), stride, padding, dilation)
        parts = []
        for a, b in chunks(n, c * kh * kw * p * work.itemsize):
            col = xp.empty((b - a, groups, k, p), dtype=work)
            if col.size:
                launch("im2col", "im2col", work, col.size, x[a:b], col, numpy.int64(b - a), numpy.int64(c),
                       *geometry)
            parts.append(per_image(wmat, col))  # (images, G, O/G, OH*OW): NCHW as it comes
        y = done((parts[0] if len(parts) == 1 else xp.concatenate(parts)).reshape((n, o) + out), dtype)
        if bias is None:
            return y
        y = done(y, _promoted(y.dtype, bias.dtype))
        y += bias.reshape((1, o, 1, 1))  # y is this call's own array
        return y

    def conv2d_input_grad(grad_output, weight, *, input_shape, stride, padding, dilation, groups):
        n, c, h, w = (int(s) for s in input_shape)
        o, cg, kh, kw = weight.shape
        out = tuple(grad_output.shape[2:])
        dtype = _promoted(grad_output.dtype, weight.dtype)
        work = _gemm_dtype(dtype)
        k, p = cg * kh * kw, out[0] * out[1]
        if n * c * h * w == 0 or p == 0:  # nothing to gather, or nothing to gather from
            return xp.zeros((n, c, h, w), dtype=dtype)
        wmat_t = xp.ascontiguousarray(contiguous(weight, work).reshape(groups, o // groups, k).transpose(0, 2, 1))
        gy = contiguous(grad_output, work).reshape(n, groups, o // groups, p)
        geometry = _geometry((h, w), out, (kh, kw), stride, padding, dilation)
        dx = xp.empty((n, c, h, w), dtype=work)
        for a, b in chunks(n, c * kh * kw * p * work.itemsize):
            dcol = xp.ascontiguousarray(per_image(wmat_t, gy[a:b]))  # (images, G, C/G*kh*kw, OH*OW)
            launch("im2col", "col2im", work, (b - a) * c * h * w, dcol, dx[a:b], numpy.int64(b - a),
                   numpy.int64(c), *geometry)
        return done(dx, dtype)

    def conv2d_weight_grad(grad_output, input, *, weight_shape, stride, padding, dilation, groups):
        o, cg, kh, kw = (int(s) for s in weight_shape)
        n, c, h, w = input.shape
        out = tuple(grad_output.shape[2:])
        dtype = _promoted(grad_output.dtype, input.dtype)
        work = _gemm_dtype(dtype)
        k, p, og = cg * kh * kw, out[0] * out[1], o // groups
        x = contiguous(input, work)
        gy = contiguous(grad_output, work).reshape(n, groups, og, p)
        geometry = _geometry((h, w), out, (kh, kw), stride, padding, dilation)
        gw = None
        for a, b in chunks(n, c * kh * kw * p * work.itemsize):
            rows = xp.empty((groups, (b - a) * p, k), dtype=work)
            if rows.size:
                launch("im2col", "im2row", work, rows.size, x[a:b], rows, numpy.int64(groups),
                       numpy.int64(b - a), numpy.int64(c), *geometry)
            g = xp.ascontiguousarray(gy[a:b].transpose(1, 2, 0, 3)).reshape(groups, og, (b - a) * p)
            part = xp.matmul(g, rows)  # (G, O/G, C/G*kh*kw)
            gw = part if gw is None else gw + part
        assert gw is not None, "chunks gives at least one chunk"
        return done(gw.reshape(o, cg, kh, kw), dtype)

    def max_pool2d(input, *, kernel_size, stride, padding, dilation, ceil_mode):
        n, c, h, w = input.shape
        out = tuple(window_count(*t, ceil_mode) for t in zip((h, w), kernel_size, stride, padding, dilation))
        work = _max_dtype(input.dtype)
        y = xp.empty((n, c) + out, dtype=work)
        if y.size:
            launch("maxpool", "max_pool2d_fwd", work, y.size, contiguous(input, work), y,
                   _lowest(input.dtype, work), numpy.int64(n * c),
                   *_geometry((h, w), out, kernel_size, stride, padding, dilation))
        return done(y, input.dtype)

    def max_pool2d_backward(grad_output, input, output, *, kernel_size, stride, padding, dilation, ceil_mode):
        n, c, h, w = input.shape
        out = tuple(output.shape[2:])
        dtype = grad_output.dtype  # the decomposition's: grad_output times a 0/1 mask, folded
        if input.size == 0 or output.size == 0:
            return xp.zeros((n, c, h, w), dtype=dtype)
        same = _max_dtype(_promoted(input.dtype, output.dtype))  # the decomposition's eq(windows, output)
        work = _gemm_dtype(dtype)
        geometry = _geometry((h, w), out, kernel_size, stride, padding, dilation)
        first = xp.empty((n, c) + out, dtype=_I32)
        launch("maxpool", "max_pool2d_first_max", same, first.size, contiguous(input, same),
               contiguous(output, same), first, _lowest(input.dtype, same), numpy.int64(n * c), *geometry)
        dx = xp.empty((n, c, h, w), dtype=work)
        launch("maxpool", "max_pool2d_bwd", work, dx.size, contiguous(grad_output, work), first, dx,
               numpy.int64(n * c), *geometry)
        return done(dx, dtype)

    return {"conv2d": conv2d, "conv2d_input_grad": conv2d_input_grad, "conv2d_weight_grad": conv2d_weight_grad,
            "max_pool2d": max_pool2d, "max_pool2d_backward": max_pool2d_backward}
