"""layer_norm, its input gradient and its weight gradient, one C pass over the rows each (each
row's mean and variance in double, from the centred values): the decompositions make six to
ten NumPy passes and as many temporaries over the activation. Inputs are viewed as (rows, n),
n the product of normalized_shape, and copied C-contiguous where they are not; results are
C-contiguous, as torch's are."""
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
