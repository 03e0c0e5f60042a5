"""Activation functions, in ``torch.nn.functional``'s names and signatures.

The math lives in the core's composite ops; this module adds the ``inplace``
flag, done with the core's in-place wrapper, which computes from an alias of the
old value so autograd stays correct (it saves no memory here).
"""
from __future__ import annotations

from ...core.ops import activation as _act
from ...core.ops import elementwise as _ew
from ...core.ops.inplace import inplace as _inplace


def _maybe_inplace(fn, name, input, inplace, *args):
    if inplace:
        return _inplace(fn, name)(input, *args)
    return fn(input, *args)


def relu(input, inplace: bool = False):
    return _maybe_inplace(_act.relu, "relu_", input, inplace)


def relu_(input):
    return relu(input, inplace=True)


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    return _maybe_inplace(_act.leaky_relu, "leaky_relu_", input, inplace, negative_slope)


def elu(input, alpha: float = 1.0, inplace: bool = False):
    return _maybe_inplace(_act.elu, "elu_", input, inplace, alpha)


def gelu(input, approximate: str = "none"):
    return _act.gelu(input, approximate=approximate)


def silu(input, inplace: bool = False):
    return _maybe_inplace(_act.silu, "silu_", input, inplace)


def softplus(input, beta: float = 1.0, threshold: float = 20.0):
    return _act.softplus(input, beta, threshold)


def sigmoid(input):
    return _act.sigmoid(input)


def tanh(input):
    return _ew.tanh(input)


def softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    return _act.softmax(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    return _act.log_softmax(input, dim, dtype)
