"""Fused NumPy kernels for composite ops (forward only; derivatives stay in the core).

Each computes in one or two passes what the decomposition does in several ops,
and is numerically at least as careful.
"""
from __future__ import annotations

import numpy as np


def relu(x):
    return np.maximum(x, 0, out=...)


def sigmoid(x):
    # exp(-|x|) never overflows; pick the algebraically matching form per sign.
    e = np.exp(-np.abs(x))
    p = 1.0 / (1.0 + e)
    return np.where(x >= 0, p, e * p).astype(x.dtype, copy=False)


def softmax(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    e /= e.sum(axis=dim, keepdims=True)
    return e


def log_softmax(x, dim):
    z = x - x.max(axis=dim, keepdims=True)
    with np.errstate(divide="ignore"):
        z -= np.log(np.exp(z).sum(axis=dim, keepdims=True))
    return z


FUSED_KERNELS = {"relu": relu, "sigmoid": sigmoid, "softmax": softmax, "log_softmax": log_softmax}
