"""conv2d's forward and weight gradient with a C im2col, its input gradient through the forward's
native GEMM, and fold (col2im) in C.

The ops' decompositions (``plugtorch/core/ops/conv.py``) pad the input, then copy the patches
out of a window view; the C loop writes the same patch matrix straight from the unpadded input.
Everything else is the decomposition's own computation (the same matmul calls on the same
layouts, the same batch chunks for the weight gradient; the products through ``gemm.matmul``, as
the backend's matmul primitive), so the values are its values, bit for bit. The forward's patches
are written image by image and multiplied per image, so its output is (N, C, H, W) in memory, as
torch's; where that product is the native GEMM's (``gemm.py``), the forward packs the patches
from the input panel by panel inside it instead (no patch matrix in memory: the same values).
Two paths sum in another order than the decomposition, so agree with it (and torch) to rounding
only, where the native GEMM takes their products (its size rule, on the shared pool): the input
gradient with stride 1, groups 1 and no more output than input channels, a convolution with the
flipped weight; and the weight gradient with groups 1: in ``gemm.c``'s direct kernel where
``gemm.conv2d_weight_grad``'s rule takes it, else with stride 1, 256 or more output positions and
no more output than input channels per image (see each function).
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


# the weight gradient's images per native product: their patches (2 MiB) stay in cache for it
_CACHED_PATCHES = 2 << 20


def conv2d_weight_grad(grad_output, input, *, weight_shape, stride, padding, dilation, groups):
    o, cg, kh, kw = weight_shape
    n, c = input.shape[:2]
    out = tuple(grad_output.shape[2:])
    per = out[0] * out[1]
    k = cg * kh * kw
    if groups == 1:
        direct = gemm.conv2d_weight_grad(grad_output, input, weight_shape, stride, padding, dilation)
        if direct is not None:
            return direct
    # per image only with 256+ positions and no more output than input channels: it gained 2-8 % there
    # (16->16 at 32x32, 32->32 and 64->64 at 16x16, one thread) and lost elsewhere (the MNIST CNN's
    # 16->32 at 14x14, batch 64: 1.75x the one product's time; 8->16 at 28x28 1.05x; 64->64 at 8x8 1.15x)
    if groups == 1 and tuple(stride) == (1, 1) and input.dtype in FLOATS and grad_output.dtype == input.dtype \
            and per >= 256 and c >= o and _batch_in_gemm(o, per, k):
        return _weight_grad_per_image(grad_output, input, weight_shape, out, stride, padding, dilation)
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


def _batch_in_gemm(m, k, n):
    """Whether ``gemm.matmul`` runs a batch of (m x k) @ (k x n) products in the native kernel: its size
    rule and the shared pool (a batch shares the kernel's fixed cost, so small products count too)."""
    return gemm.ON and gemm.wins(m, k, n) and gemm._pool_follows_blas()


def _weight_grad_per_image(grad_output, input, weight_shape, out, stride, padding, dilation):
    """grad (O x P) @ patches^T (P x C*kh*kw) per image in the native GEMM, summed over the batch:
    where the whole batch's product goes to BLAS (an inner dimension of N*P) and its patches, many
    MiB, go through memory, a few images' patches at a time stay in cache for the kernel. ResNet's
    16->16 3x3 at 32x32, batch 32: 3.15 -> 2.88 ms, 32->32 at 16x16 2.18 -> 2.03 ms (one thread,
    fastest of 30); with stride 2 (16->32, 3x3) it lost, 1.54 -> 1.65 ms, so strided convolutions keep
    the one product. The images' terms are summed per image, then over the batch, so the values
    differ from the decomposition's in the last bits."""
    o, cg, kh, kw = weight_shape
    n, per, k = input.shape[0], out[0] * out[1], cg * kh * kw
    step = max(1, _CACHED_PATCHES // (k * per * input.dtype.itemsize))
    gw = np.zeros((o, k), dtype=input.dtype)
    for a in range(0, n, step):
        b = min(n, a + step)
        cols = _im2col(input, a, b, out, (kh, kw), stride, padding, dilation, per_image=True)  # (images, K, P)
        gw += matmul(np.reshape(grad_output[a:b], (b - a, o, per)), cols.swapaxes(1, 2)).sum(0)
    return gw.reshape(o, cg, kh, kw)


def conv2d_input_grad(grad_output, weight, *, input_shape, stride, padding, dilation, groups):
    """The input gradient. With stride 1 and groups 1 it is a convolution of the output gradient with
    the weight flipped and its channel axes swapped, padded by ``d * (k - 1) - p``: that runs in the
    forward's native GEMM, which packs its patches from the gradient itself, with neither the
    decomposition's (C*kh*kw, OH*OW) patch gradient per image nor fold's scatter. Its sums run over
    (output channel, kernel offset) in one chain, so values differ from the decomposition's in the
    last bits. Elsewhere (strides, groups, other dtypes, padding past the kernel's reach, or where
    the GEMM rule sends the product to BLAS) the decomposition's products and fold, as it makes them."""
    n, c, h, w = input_shape
    o, cg, kh, kw = weight.shape
    oh, ow = grad_output.shape[2:]
    flipped = tuple(d * (k - 1) - p for d, k, p in zip(dilation, (kh, kw), padding))
    # c >= o: as a product it is (C x O*kh*kw) @ (O*kh*kw x P), few rows over a long inner dimension
    # where C < O, and there it lost to the products and fold at every size tried (one thread, batch
    # 32: 16<-32 channels 1.07-2.0x their time at 8x8 to 28x28, 3<-16 2.9-4.2x, the MNIST CNN's
    # 16<-32 at 14x14 +1.4 ms a step); with C >= O it took 0.13-1.01x their time
    if groups == 1 and tuple(stride) == (1, 1) and min(flipped) >= 0 and grad_output.dtype == weight.dtype \
            and c >= o \
            and (oh, ow) == (h + 2 * padding[0] - dilation[0] * (kh - 1), w + 2 * padding[1] - dilation[1] * (kw - 1)):
        # (C, O, kh, kw), the kernel turned half a circle: a small copy (the weight, not the activations)
        wt = np.ascontiguousarray(weight[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)).reshape(c, o * kh * kw)
        dx = np.empty((n, c, h * w), dtype=grad_output.dtype)
        if n * c == 0 or gemm.conv2d(grad_output, wt, dx, (kh, kw), (1, 1), flipped, dilation):
            return dx.reshape(n, c, h, w)
    return _input_grad_products(grad_output, weight, input_shape, stride, padding, dilation, groups)


def _input_grad_products(grad_output, weight, input_shape, stride, padding, dilation, groups):
    """The decomposition's input gradient: W^T @ grad per image and batch chunk, folded back."""
    n, c, h, w = input_shape
    o, cg, kh, kw = weight.shape
    oh, ow = grad_output.shape[2:]
    per = oh * ow
    wmat_t = weight.reshape(groups, o // groups, cg * kh * kw).swapaxes(1, 2)  # (G, K, O/G)
    padded = (h + 2 * padding[0], w + 2 * padding[1])
    parts = []
    for a, b in batch_chunks(n, c * kh * kw * per * grad_output.dtype.itemsize):
        g = np.reshape(grad_output[a:b], (b - a, groups, o // groups, per))
        dcols = matmul(wmat_t, g).reshape(b - a, c, kh, kw, oh, ow).transpose(0, 1, 4, 5, 2, 3)
        parts.append(fold(dcols, shape=(b - a, c) + padded, window=(kh, kw), strides=tuple(stride),
                          dilation=tuple(dilation)))
    dx = parts[0] if len(parts) == 1 else np.concatenate(parts, 0)
    if any(padding):  # the padding's share dropped, contiguous as torch's gradient
        dx = np.ascontiguousarray(dx[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + w])
    return dx


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
