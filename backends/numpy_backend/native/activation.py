"""relu, gelu, erf, and the activations' gradients in one C pass each: threshold_backward (relu's;
the decomposition is a comparison and a select, two passes and a temporary over every
activation), tanh_backward and sigmoid_backward (three passes each in fused.py); erf, the
primitive NumPy has no ufunc for, is libm's.

relu is torch's ``x < 0 ? 0 : x`` (fused.py's, the same values: -0 for -0, nan for nan), with
its loop split over the pool's threads: on 2 threads a CNN's first activation (3.2 MB) takes
about half as long as NumPy's one-thread pass."""
from __future__ import annotations

import numpy as np

from .. import fused
from ..bfloat16 import through_float32
from ..layout import dense_alike, flat_views
from ..xp_table import numpy_erf
from . import FLOATS
from . import _kernels as _loaded

assert _loaded is not None, "imported by native.kernels() only once the extension has loaded"
_kernels = _loaded  # the package's name is None where the extension is off; here it is loaded


# kernels that take bfloat16 as torch does themselves: bfloat16 is never one of FLOATS, so it
# takes their NumPy path, which computes it in float32 (through_float32) or exactly (relu's
# maximum, threshold_backward's bit mask); the backend registers them without a wrapper testing
# every call's dtype
BFLOAT16_INSIDE = frozenset({"relu", "threshold_backward", "tanh_backward", "sigmoid_backward"})


def _flat_kernel(c_kernel, numpy_kernel):
    """A kernel of (grad_output, x) and the op's attrs that runs ``c_kernel`` on floats of one
    dtype laid out alike and densely (C order, what the engine mostly hands over, checked
    first and cheaply; or a convolution's channel-major layout) and ``numpy_kernel``, the same
    values, elsewhere (bfloat16 in float32, rounded once). The result is laid out as ``x``."""
    numpy_kernel = through_float32(c_kernel.__name__, numpy_kernel)

    def kernel(grad_output, x, **attrs):
        if x.dtype in FLOATS and grad_output.dtype == x.dtype:
            if x.flags.c_contiguous and grad_output.flags.c_contiguous:
                out = np.empty_like(x)
                c_kernel(grad_output, x, *attrs.values(), out)
                return out
            if dense_alike(grad_output, x):
                out = np.empty_like(x)  # x's layout (order 'K')
                g, v, o = flat_views(grad_output, x, out)
                c_kernel(g, v, *attrs.values(), o)
                return out
        return numpy_kernel(grad_output, x, **attrs)
    kernel.__name__ = kernel.__qualname__ = c_kernel.__name__
    return kernel


def relu(x):
    """max(x, 0) for floats laid out densely (C order or a convolution's channel-major layout),
    in x's layout; NumPy's maximum elsewhere."""
    if x.dtype in FLOATS:
        if x.flags.c_contiguous:
            out = np.empty_like(x)
            _kernels.relu(x, out)
            return out
        if dense_alike(x, x):
            out = np.empty_like(x)  # x's layout (order 'K')
            _kernels.relu(*flat_views(x, out))
            return out
    return fused.relu(x)


def _dense(*arrays):
    """The arrays as they are where they are laid out alike and densely, else C-ordered copies: so
    the C serves every float input, and an element's value does not depend on where it sits (the
    vector functions the C calls and SciPy's or NumPy's erf may differ in the last bits)."""
    if all(a.shape == arrays[0].shape and dense_alike(a, arrays[0]) for a in arrays):
        return arrays
    return tuple(np.ascontiguousarray(a) for a in arrays)


def gelu(x, *, approximate):
    """torch's gelu (exact or tanh form) in one C pass for floats, in x's layout where it is dense;
    NumPy's passes (fused.gelu) for other dtypes."""
    if x.dtype not in FLOATS:
        return fused.gelu(x, approximate=approximate)
    (x,) = _dense(x)
    out = np.empty_like(x)  # x's layout (order 'K')
    xv, ov = flat_views(x, out)
    _kernels.gelu(xv, approximate == "tanh", ov)
    return out


def gelu_backward(grad_output, x, *, approximate):
    """grad_output * gelu'(x) in one C pass (as gelu), NumPy's passes for other dtypes."""
    if x.dtype not in FLOATS or grad_output.dtype != x.dtype:
        return fused.gelu_backward(grad_output, x, approximate=approximate)
    grad_output, x = _dense(grad_output, x)
    out = np.empty_like(x)
    g, v, o = flat_views(grad_output, x, out)
    _kernels.gelu_backward(g, v, approximate == "tanh", o)
    return out


def erf(x):
    """The error function, elementwise, in x's dtype (and layout, where it is dense): the C for
    floats (libm's erf; glibc's vector erff where it is linked); the NumPy backend's for others."""
    if x.dtype not in FLOATS:
        return numpy_erf(x)
    (x,) = _dense(x)
    out = np.empty_like(x)
    xv, ov = flat_views(x, out)
    _kernels.erf(xv, ov)
    return out


threshold_backward = _flat_kernel(_kernels.threshold_backward, fused.threshold_backward)
tanh_backward = _flat_kernel(_kernels.tanh_backward, fused.tanh_backward)
sigmoid_backward = _flat_kernel(_kernels.sigmoid_backward, fused.sigmoid_backward)


def softmax(x, *, dim):
    """softmax along the last dim of a C-contiguous float array, each row's max, exp, sum and scale
    in one C call (``softmax_rows``; a row of -inf gives NaN, as torch's): NumPy's passes
    (fused.softmax) took 1 ms on minGPT's (16, 4, 64, 64) weights, its max over 64-wide rows
    alone 0.43 ms. Other dims, layouts and dtypes run those passes."""
    if x.dtype in FLOATS and dim == x.ndim - 1 and x.flags.c_contiguous and x.size:
        n = x.shape[-1]
        out = np.empty(x.shape, x.dtype)
        _kernels.softmax_rows(x.reshape(-1, n), 1, False, 1.0, False, out.reshape(-1, n))
        return out
    return fused.softmax(x, dim)


def softmax_backward(grad_output, output, *, dim):
    """softmax's input gradient y * (g - sum(g * y)) along the last dim of C-contiguous float arrays,
    in one C call a row (``softmax_backward_rows``, the sum in double); NumPy's passes
    (fused.softmax_backward) elsewhere."""
    if (output.dtype in FLOATS and grad_output.dtype == output.dtype and dim == output.ndim - 1 and output.size
            and output.flags.c_contiguous and grad_output.flags.c_contiguous):
        n = output.shape[-1]
        out = np.empty(output.shape, output.dtype)
        _kernels.softmax_backward_rows(grad_output.reshape(-1, n), output.reshape(-1, n), 1, False, 1.0,
                                       out.reshape(-1, n))
        return out
    return fused.softmax_backward(grad_output, output, dim=dim)


def log_softmax(x, *, dim):
    """log_softmax along the last dim of a C-contiguous float array in one C call a row
    (``log_softmax_rows``: max, shift, exp, sum in double, log; a row holding NaN or +inf, or all
    -inf, gives NaN, as torch's); NumPy's passes (fused.log_softmax) elsewhere."""
    if x.dtype in FLOATS and dim == x.ndim - 1 and x.flags.c_contiguous and x.size:
        n = x.shape[-1]
        out = np.empty(x.shape, x.dtype)
        _kernels.log_softmax_rows(x.reshape(-1, n), out.reshape(-1, n))
        return out
    return fused.log_softmax(x, dim)


def log_softmax_backward(grad_output, output, *, dim):
    """log_softmax's input gradient g - exp(y) * sum(g) along the last dim of C-contiguous float
    arrays, in one C call a row (``log_softmax_backward_rows``, the sum in double); NumPy's passes
    (fused.log_softmax_backward) elsewhere."""
    if (output.dtype in FLOATS and grad_output.dtype == output.dtype and dim == output.ndim - 1 and output.size
            and output.flags.c_contiguous and grad_output.flags.c_contiguous):
        n = output.shape[-1]
        out = np.empty(output.shape, output.dtype)
        _kernels.log_softmax_backward_rows(grad_output.reshape(-1, n), output.reshape(-1, n), out.reshape(-1, n))
        return out
    return fused.log_softmax_backward(grad_output, output, dim=dim)
