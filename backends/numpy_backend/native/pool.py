"""max_pool2d and its backward in one C pass per plane (NumPy needs a strided pass per window
offset, several for the backward). Float arrays only reach C; integer pools run NumPy."""
from __future__ import annotations

import numpy as np

from .. import fused
from . import _kernels

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _channel_major(x):
    """True for (N, C, ...) views of (C, N, ...) memory, which a convolution's output is."""
    return x.strides[1] > x.strides[0]


def empty_like_layout(shape, like):
    """An empty (N, C, ...) array of ``like``'s dtype, laid out as ``like`` (channel-major or not)."""
    if _channel_major(like):
        return np.empty((shape[1], shape[0]) + tuple(shape[2:]), dtype=like.dtype).swapaxes(0, 1)
    return np.empty(shape, dtype=like.dtype)


def _flat(kernel_size, stride, padding, dilation):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    return kh, kw, sh, sw, ph, pw, dh, dw


def _out_size(size, k, s, p, d, ceil_mode):
    span = size + 2 * p - d * (k - 1) - 1
    if not ceil_mode:
        return span // s + 1
    out = -(-span // s) + 1
    return out - 1 if (out - 1) * s >= size + p else out  # torch: the last window starts inside


def max_pool2d(input, *, kernel_size, stride, padding, dilation, ceil_mode):
    """The decomposition's running np.maximum over each window (NaN propagates). On a tie of
    0.0 and -0.0 the C loop keeps the first, as torch does; NumPy's SIMD maximum may not."""
    shape = input.shape[:2] + tuple(_out_size(*t, ceil_mode) for t in
                                    zip(input.shape[2:], kernel_size, stride, padding, dilation))
    if input.dtype not in FLOATS:
        return _max_pool2d_numpy(input, shape, kernel_size, stride, padding, dilation)
    out = empty_like_layout(shape, input)
    _kernels.max_pool2d(input, out, *_flat(kernel_size, stride, padding, dilation))
    return out


def _max_pool2d_numpy(input, shape, kernel_size, stride, padding, dilation):
    """Other dtypes: np.maximum over each offset's strided view of the input padded with the
    dtype's lowest value, as the op's decomposition does."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    n, c, h, w = input.shape
    oh, ow = shape[2:]
    height = max(h + 2 * ph, (oh - 1) * sh + dh * (kh - 1) + 1)
    width = max(w + 2 * pw, (ow - 1) * sw + dw * (kw - 1) + 1)
    lowest = -np.inf if input.dtype.kind == "f" else np.iinfo(input.dtype).min
    padded = np.full((n, c, height, width), lowest, dtype=input.dtype)
    padded[:, :, ph:ph + h, pw:pw + w] = input
    out = None
    for i in range(kh):
        for j in range(kw):
            view = padded[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
            out = view.copy() if out is None else np.maximum(out, view, out=out)
    return out


def max_pool2d_backward(grad_output, input, output, *, kernel_size, stride, padding, dilation, ceil_mode):
    """Each window's gradient to its first maximum, the other positions 0 (also where the
    gradient is inf or NaN, which the NumPy kernel's multiply by a mask turns into NaN)."""
    if input.dtype not in FLOATS or grad_output.dtype != input.dtype or output.dtype != input.dtype:
        return fused.max_pool2d_backward(grad_output, input, output, kernel_size=kernel_size, stride=stride,
                                         padding=padding, dilation=dilation, ceil_mode=ceil_mode)
    dx = empty_like_layout(input.shape, input)
    _kernels.max_pool2d_backward(grad_output, input, output, dx, *_flat(kernel_size, stride, padding, dilation))
    return dx
