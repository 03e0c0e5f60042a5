"""max_pool2d and its backward in one C pass per plane (NumPy needs a strided pass per window
offset, several for the backward). Float arrays only reach C; integer pools run NumPy."""
from __future__ import annotations

import numpy as np

from plugtorch.backend_api import window_count

from .. import fused
from . import FLOATS
from . import _kernels as _loaded

assert _loaded is not None, "imported by native.kernels() only once the extension has loaded"
_kernels = _loaded  # the package's name is None where the extension is off; here it is loaded


def _flat(kernel_size, stride, padding, dilation):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    return kh, kw, sh, sw, ph, pw, dh, dw


def max_pool2d(input, *, kernel_size, stride, padding, dilation, ceil_mode):
    """The decomposition's running np.maximum over each window (NaN propagates). On a tie of
    0.0 and -0.0 the C loop keeps the first, as torch does; NumPy's SIMD maximum may not."""
    shape = input.shape[:2] + tuple(window_count(*t, ceil_mode) for t in
                                    zip(input.shape[2:], kernel_size, stride, padding, dilation))
    if input.dtype not in FLOATS:
        return _max_pool2d_numpy(input, shape, kernel_size, stride, padding, dilation)
    out = np.empty(shape, dtype=input.dtype)  # contiguous whatever the input's layout, as torch's
    _kernels.max_pool2d(input, out, *_flat(kernel_size, stride, padding, dilation))
    return out


def _max_pool2d_numpy(input, shape, kernel_size, stride, padding, dilation):
    """Other dtypes: np.maximum over each offset's strided view of the input padded with the
    dtype's lowest value, as the op's decomposition does."""
    out = shape[2:]
    padded = fused.pool_padded(input, out, kernel_size, stride, padding, dilation)
    result = None
    for i in range(kernel_size[0]):
        for j in range(kernel_size[1]):
            view = padded[fused.offset_window(i, j, out, stride, dilation)]
            result = view.copy() if result is None else np.maximum(result, view, out=result)
    return result


def max_pool2d_backward(grad_output, input, output, *, kernel_size, stride, padding, dilation, ceil_mode):
    """Each window's gradient to its first maximum (its last NaN where the maximum is NaN), the
    other positions 0 (also where the gradient is inf or NaN, which the NumPy kernel's multiply
    by a mask turns into NaN)."""
    if input.dtype not in FLOATS or grad_output.dtype != input.dtype or output.dtype != input.dtype:
        return fused.max_pool2d_backward(grad_output, input, output, kernel_size=kernel_size, stride=stride,
                                         padding=padding, dilation=dilation, ceil_mode=ceil_mode)
    dx = np.empty(input.shape, dtype=input.dtype)
    _kernels.max_pool2d_backward(grad_output, input, output, dx, *_flat(kernel_size, stride, padding, dilation))
    return dx
