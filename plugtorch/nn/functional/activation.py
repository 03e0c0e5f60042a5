"""Activation functions, in ``torch.nn.functional``'s names and signatures.

``inplace=True`` is honoured with the tensor's in-place machinery (so autograd
stays correct); it saves no memory here.
"""
from __future__ import annotations

import math

import plugtorch
from ...core.ops import activation as _act
from ...core.ops.inplace import inplace as _inplace


def _apply(fn, name, input, inplace, *args):
    """``fn(input, *args)``, or with ``inplace`` the same written into ``input``.

    The core's in-place wrapper computes from an alias of the old value, so the
    graph stays correct when ``input`` is part of it.
    """
    if inplace:
        return _inplace(fn, name)(input, *args)
    return fn(input, *args)


def relu(input, inplace: bool = False):
    return _apply(_act.relu, "relu_", input, inplace)


def relu_(input):
    return relu(input, inplace=True)


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    return _apply(_leaky_relu, "leaky_relu_", input, inplace, negative_slope)


def _leaky_relu(input, negative_slope):
    core = getattr(plugtorch, "leaky_relu", None)
    if core is not None:
        return core(input, negative_slope)
    return plugtorch.where(input > 0, input, input * negative_slope)


def gelu(input, approximate: str = "none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    core = getattr(plugtorch, "gelu", None)
    if core is not None:
        return core(input, approximate=approximate)
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (input + 0.044715 * input ** 3)
        return 0.5 * input * (1.0 + plugtorch.tanh(inner))
    return input * _normal_cdf(input)


def _normal_cdf(x):
    # Phi(x) = 0.5 * erfc(-x / sqrt(2)); erfc by W. J. Cody's rational fits is what libm
    # uses, but a public-op version needs only the Numerical Recipes erfc (|err| < 1.2e-7).
    z = plugtorch.abs(x) * (1.0 / math.sqrt(2.0))
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    erfc = t * plugtorch.exp(poly)
    return plugtorch.where(x >= 0, 1.0 - 0.5 * erfc, 0.5 * erfc)


def silu(input, inplace: bool = False):
    return _apply(_silu, "silu_", input, inplace)


def _silu(input):
    core = getattr(plugtorch, "silu", None)
    return core(input) if core is not None else input * _act.sigmoid(input)


def sigmoid(input):
    return _act.sigmoid(input)


def tanh(input):
    return plugtorch.tanh(input)


def softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    return _act.softmax(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    return _act.log_softmax(input, dim, dtype)
