"""layer_norm, its input gradient and its weight gradient, one C pass over the rows each, and its
three gradients together in one pass (layer_norm_gradients); each row's mean and variance in
double, from the centred values. The decompositions make six to ten NumPy passes and as many
temporaries over the activation. Inputs are viewed as (rows, n), n the product of
normalized_shape, and copied C-contiguous where they are not; results are C-contiguous, as
torch's are."""
from __future__ import annotations

import math

import numpy as np

from . import FLOATS
from . import _kernels as _loaded

assert _loaded is not None, "imported by native.kernels() only once the extension has loaded"
_kernels = _loaded  # the package's name is None where the extension is off; here it is loaded


def _rows(a, n):
    return np.ascontiguousarray(a).reshape(-1, n)


def _param(p, n):
    return None if p is None else np.ascontiguousarray(p).reshape(n)


def layer_norm(input, weight, bias, *, normalized_shape, eps, fallback):
    if input.dtype not in FLOATS:
        return fallback(input, weight, bias, normalized_shape=normalized_shape, eps=eps)
    n = math.prod(normalized_shape)
    out = np.empty(input.shape, input.dtype)
    if input.size:
        _kernels.layer_norm(_rows(input, n), _param(weight, n), _param(bias, n), eps, out.reshape(-1, n))
    return out


def layer_norm_backward(grad_output, input, weight, *, normalized_shape, eps, fallback):
    if input.dtype not in FLOATS or grad_output.dtype != input.dtype:
        return fallback(grad_output, input, weight, normalized_shape=normalized_shape, eps=eps)
    n = math.prod(normalized_shape)
    out = np.empty(input.shape, input.dtype)
    if input.size:
        _kernels.layer_norm_backward(_rows(grad_output, n), _rows(input, n), _param(weight, n), eps,
                                     out.reshape(-1, n))
    return out


def layer_norm_weight_grad(grad_output, input, *, normalized_shape, eps, fallback):
    if input.dtype not in FLOATS or grad_output.dtype != input.dtype:
        return fallback(grad_output, input, normalized_shape=normalized_shape, eps=eps)
    n = math.prod(normalized_shape)
    out = np.zeros(normalized_shape, input.dtype)
    if input.size:
        _kernels.layer_norm_weight_grad(_rows(grad_output, n), _rows(input, n), eps, out.reshape(n))
    return out


def layer_norm_gradients(grad_output, input, weight, *, normalized_shape, eps, fallback):
    """The three gradients from one C pass (typed.h's ln_bwd_all): the input's rows as
    layer_norm_backward's kernel gives them, the weight's and bias's summed in double over chunks
    of rows, the chunks' sums added in order (the same bits on any number of threads)."""
    if input.dtype not in FLOATS or grad_output.dtype != input.dtype or weight.dtype != input.dtype:
        return fallback(grad_output, input, weight, normalized_shape=normalized_shape, eps=eps)
    n = math.prod(normalized_shape)
    out = np.empty(input.size + 2 * n, input.dtype)
    gx, gw, gb = out[:input.size], out[input.size:input.size + n], out[input.size + n:]
    if input.size:
        _kernels.layer_norm_gradients(_rows(grad_output, n), _rows(input, n), _param(weight, n), eps,
                                      gx.reshape(-1, n), gw, gb)
    else:
        out[input.size:] = 0
    return out


def _planes(a):
    """(N, C, *) as a C-contiguous (N, C, HW) array."""
    a = np.ascontiguousarray(a)
    return a.reshape(a.shape[0], a.shape[1], -1)


def _vector(t):
    return None if t is None else np.ascontiguousarray(t)


def batch_norm(input, running_mean, running_var, weight, bias, *, training, momentum, eps, fallback):
    """batch_norm in one C pass per channel (one more for a float32 batch's statistics, two for
    float64's: typed.h's bn_moments and bn_stats), channels split over
    the pool; the running statistics move in place from those statistics, as the op says."""
    dtypes = {t.dtype for t in (running_mean, running_var, weight, bias) if t is not None} | {input.dtype}
    if input.dtype not in FLOATS or len(dtypes) > 1:
        return fallback(input, running_mean, running_var, weight, bias, training=training, momentum=momentum,
                        eps=eps)
    c = input.shape[1]
    out = np.empty(input.shape, input.dtype)
    mean = np.empty(c) if training else None
    var = np.empty(c) if training else None
    if input.size:
        _kernels.batch_norm(_planes(input), _vector(running_mean), _vector(running_var), _vector(weight),
                            _vector(bias), training, eps, out.reshape(input.shape[0], c, -1), mean, var)
    if training and input.size:
        n = input.size // c
        # torch's running estimate: the unbiased variance; rounded to the statistics' dtype once
        if running_mean is not None:
            running_mean *= running_mean.dtype.type(1 - momentum)
            running_mean += (mean * momentum).astype(running_mean.dtype)
        if running_var is not None:
            running_var *= running_var.dtype.type(1 - momentum)
            running_var += (var * (momentum * n / (n - 1))).astype(running_var.dtype)
    return out


def batch_norm_backward(grad_output, input, weight, running_mean, running_var, *, training, eps, fallback):
    dtypes = {t.dtype for t in (grad_output, weight, running_var) if t is not None} | {input.dtype}
    if input.dtype not in FLOATS or len(dtypes) > 1:
        return fallback(grad_output, input, weight, running_mean, running_var, training=training, eps=eps)
    out = np.empty(input.shape, input.dtype)
    if input.size:
        _kernels.batch_norm_backward(_planes(grad_output), _planes(input), _vector(weight), _vector(running_var),
                                     training, eps, out.reshape(input.shape[0], input.shape[1], -1))
    return out


def batch_norm_weight_grad(grad_output, input, running_mean, running_var, *, training, eps, fallback):
    dtypes = {t.dtype for t in (grad_output, running_mean, running_var) if t is not None} | {input.dtype}
    if input.dtype not in FLOATS or len(dtypes) > 1:
        return fallback(grad_output, input, running_mean, running_var, training=training, eps=eps)
    out = np.zeros(input.shape[1], input.dtype)
    if input.size:
        _kernels.batch_norm_weight_grad(_planes(grad_output), _planes(input), _vector(running_mean),
                                        _vector(running_var), training, eps, out)
    return out
