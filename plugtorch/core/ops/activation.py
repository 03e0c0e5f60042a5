"""Activations and (log-)softmax: composite ops.

Each is written with other plugtorch ops (``decompose``) and also carries its
derivative, so a backend may register a fused kernel for it and stay
differentiable. Dispatch prefers such a kernel when one is registered.
"""
from __future__ import annotations

import warnings

from ..dispatch import call_op
from ..registry import OpDef
from ..tensor import _wrap_dim
from . import elementwise as ew
from .reduce import amax

OPS: list[OpDef] = []


def _composite(name, decompose, derivative, save, doc):
    op = OpDef(name, decompose=decompose, derivative=derivative, save=save, doc=doc)
    OPS.append(op)
    return op


_RELU = _composite(
    "relu",
    lambda x: ew.where(ew.gt(x, 0), x, 0),
    lambda ctx, g: ew.where(ew.gt(ctx.output, 0), g, 0.0),
    ("output",), "max(x, 0); the gradient at 0 is 0.")


def relu(x):
    return call_op(_RELU, (x,), {})


def _sigmoid_decompose(x):
    # Never exponentiate a large positive number: exp(-|x|) is in (0, 1].
    e = ew.exp(-ew.abs(x))
    p = 1 / (1 + e)
    return ew.where(ew.ge(x, 0), p, e * p)


_SIGMOID = _composite(
    "sigmoid", _sigmoid_decompose,
    lambda ctx, g: g * ctx.output * (1 - ctx.output),
    ("output",), "1 / (1 + exp(-x)), computed without overflow.")


def sigmoid(x):
    return call_op(_SIGMOID, (ew._float(x),), {})


def _legacy_softmax_dim(name, ndim):
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
        "as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def _softmax_decompose(x, dim):
    e = ew.exp(x - amax(x, dim, keepdim=True).detach())  # shift-invariant: the max needs no gradient
    return e / e.sum(dim, keepdim=True)


def _softmax_rule(ctx, g):
    y = ctx.output
    return y * (g - (g * y).sum(ctx.attrs["dim"], keepdim=True))


_SOFTMAX = _composite("softmax", _softmax_decompose, _softmax_rule, ("output",),
                      "exp(x) / sum(exp(x)) along dim, computed after subtracting the max.")


def _log_softmax_decompose(x, dim):
    z = x - amax(x, dim, keepdim=True).detach()
    return z - ew.exp(z).sum(dim, keepdim=True).log()


def _log_softmax_rule(ctx, g):
    return g - ew.exp(ctx.output) * g.sum(ctx.attrs["dim"], keepdim=True)


_LOG_SOFTMAX = _composite("log_softmax", _log_softmax_decompose, _log_softmax_rule, ("output",),
                          "log(softmax(x)) along dim, computed stably (never log of softmax).")


def _softmax_like(op, name, x, dim, dtype):
    if dtype is not None:
        x = x.to(dtype)
    x = ew._float(x)
    if dim is None:
        dim = _legacy_softmax_dim(name, x.ndim)
    d = _wrap_dim(dim, x.ndim) if x.ndim else 0
    if x.ndim == 0:
        x1 = x.reshape(1)
        return call_op(op, (x1,), {"dim": 0}).reshape(())
    return call_op(op, (x,), {"dim": d})


def softmax(x, dim=None, dtype=None):
    return _softmax_like(_SOFTMAX, "softmax", x, dim, dtype)


def log_softmax(x, dim=None, dtype=None):
    return _softmax_like(_LOG_SOFTMAX, "log_softmax", x, dim, dtype)
