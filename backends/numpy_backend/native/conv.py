"""conv2d's forward and weight gradient with a C im2col, and fold (col2im) in C.

The ops' decompositions (``plugtorch/core/ops/conv.py``) pad the input, then copy the patches
out of a window view; the C loop writes the same patch matrix straight from the unpadded input.
Everything else is the decomposition's own computation (the same matmul calls on the same
layouts, the same batch chunks for the weight gradient; the products through ``gemm.matmul``, as
the backend's matmul primitive), so the values are its values, bit for bit. The forward's patches
are written image by image and multiplied per image, so its output is (N, C, H, W) in memory, as
torch's; where that product is the native GEMM's (``gemm.py``), the forward packs the patches
from the input panel by panel inside it instead (no patch matrix in memory: the same values).
"""
from __future__ import annotations

import itertools

import numpy as np

# the decomposition's batch chunks and product order, so the two sum alike; windows per dim
from plugtorch.backend_api import batch_chunks, weight_grad_product, window_count

from .. import fused
from . import FLOATS, gemm
from . import _kernels as _loaded
from .gemm import matmul

assert _loaded is not None, "imported by native.kernels() only once the extension has loaded"
_kernels = _loaded  # the package's name is None where the extension is off; here it is loaded
_PER_IMAGE = getattr(_kernels, "IM2COL_PER_IMAGE", 0)  # an extension built before it copies per image in NumPy


def _im2col(input, a, b, out, kernel, stride, padding, dilation, per_image=False):
    """(C * kh * kw, (b - a) * oh * ow) patches of images a..b, zero in the padding; per_image:
    (b - a, C * kh * kw, oh * ow), each image's block whole (the decomposition's ``_image_patches``)."""
    c = input.shape[1]
    rows, per = c * kernel[0] * kernel[1], out[0] * out[1]
    cols = np.empty((b - a, rows, per) if per_image else (rows, (b - a) * per), dtype=input.dtype)
    if cols.size == 0:
        return cols
    if input.dtype in FLOATS and (_PER_IMAGE or not per_image):
        _kernels.im2col(input, cols, a, *out, *kernel, *stride, *padding, *dilation)
        return cols
    # other dtypes: each kernel offset's strided view of the padded input, in the same layout
    (kh, kw), (sh, sw), (ph, pw), (dh, dw), (oh, ow) = kernel, stride, padding, dilation, out
    x = input[a:b]
    padded = np.zeros(x.shape[:2] + (x.shape[2] + 2 * ph, x.shape[3] + 2 * pw), dtype=x.dtype)
    padded[:, :, ph:ph + x.shape[2], pw:pw + x.shape[3]] = x
    view = cols.reshape(b - a, c, kh, kw, oh, ow) if per_image else cols.reshape(c, kh, kw, b - a, oh, ow)
    for i, j in itertools.product(range(kh), range(kw)):
        patch = padded[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
        if per_image:
            view[:, :, i, j] = patch
        else:
            view[:, i, j] = patch.transpose(1, 0, 2, 3)
    return cols


def conv2d(input, weight, bias=None, *, stride, padding, dilation, groups):
    n = input.shape[0]
    o, cg, kh, kw = weight.shape
    out = tuple(window_count(*t) for t in zip(input.shape[2:], (kh, kw), stride, padding, dilation))
    k = cg * kh * kw
    y = np.empty((n, o) + out, dtype=input.dtype)
    if groups != 1 or not gemm.conv2d(input, weight.reshape(o, k), y.reshape(n, o, out[0] * out[1]), (kh, kw), stride,
                                      padding, dilation):
        cols = _im2col(input, 0, n, out, (kh, kw), stride, padding, dilation, per_image=True)
        y = matmul(weight.reshape(groups, o // groups, k), cols.reshape(n, groups, k, out[0] * out[1]))
        y = y.reshape((n, o) + out)  # (N, G, O/G, OH*OW) per image: NCHW as it comes
    if bias is None:
        return y
    if bias.dtype == y.dtype:
        y += bias.reshape(1, o, 1, 1)  # y is this call's own array
        return y
    return y + bias.reshape(1, o, 1, 1)


def conv2d_weight_grad(grad_output, input, *, weight_shape, stride, padding, dilation, groups):
    o, cg, kh, kw = weight_shape
    n, c = input.shape[:2]
    out = tuple(grad_output.shape[2:])
    per = out[0] * out[1]
    product = weight_grad_product(o // groups, cg * kh * kw, n, per)
    gw = None
    for a, b in batch_chunks(n, c * kh * kw * per * input.dtype.itemsize):
        g = np.reshape(grad_output[a:b], (b - a, groups, o // groups, per))
        if product == "per_image":  # the decomposition's batch of per-image products, summed
            cols = _im2col(input, a, b, out, (kh, kw), stride, padding, dilation, per_image=True)
            part = matmul(cols.reshape(b - a, groups, cg * kh * kw, per), g.swapaxes(2, 3)).sum(0).swapaxes(1, 2)
        else:  # one product over the chunk, the gradient copied channel-major as the decomposition does
            cols = _im2col(input, a, b, out, (kh, kw), stride, padding, dilation).reshape(groups, cg * kh * kw,
                                                                                           (b - a) * per)
            g = g.transpose(1, 2, 0, 3).reshape(groups, o // groups, (b - a) * per)
            if product == "rows_first":
                part = matmul(cols, g.swapaxes(1, 2)).swapaxes(1, 2)
            else:
                part = matmul(g, cols.swapaxes(1, 2))
        gw = part if gw is None else gw + part
    assert gw is not None, "batch_chunks gives at least one chunk"
    return np.ascontiguousarray(gw.reshape(o, cg, kh, kw))


def fold(cols, *, shape, window, strides, dilation):
    """col2im for two window dims, summing in fused.fold's order; other ranks and dtypes go
    to the NumPy kernel."""
    lead = cols.shape[:cols.ndim - 4]
    if len(window) != 2 or cols.dtype not in FLOATS or len(shape) != len(lead) + 2 or len(lead) > 2:
        return fused.fold(cols, shape=shape, window=window, strides=strides, dilation=dilation)
    acc = np.empty(shape, dtype=cols.dtype)
    if len(lead) < 2:  # the C loop takes two leading dims (a convolution's channels and images)
        ones = (1,) * (2 - len(lead))
        cols, flat = cols.reshape(ones + cols.shape), acc.reshape(ones + acc.shape)
    else:
        flat = acc
    _kernels.fold2d(cols, flat, *strides, *dilation)
    return acc
