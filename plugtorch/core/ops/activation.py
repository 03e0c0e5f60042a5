"""Activations and (log-)softmax: composite ops.

Each is written with other plugtorch ops (``decompose``) and also carries its
derivative, so a backend may register a fused kernel for it and stay
differentiable. Dispatch prefers such a kernel when one is registered.
"""
from __future__ import annotations

import warnings

from ..dispatch import call_op
from ..registry import OpDef
from ..tensor import Tensor, _wrap_dim
from . import elementwise as ew
from ._composite import call_fused, composite_op
from .reduce import amax

OPS: list[OpDef] = []


def _composite(name, decompose, derivative, save, doc):
    op = OpDef(name, decompose=decompose, derivative=derivative, save=save, doc=doc)
    OPS.append(op)
    return op


_RELU = _composite(
    "relu",
    lambda x: ew.where(ew.gt(x, 0), x, 0),
    # a multiply by the mask, not where(): NumPy's where branches per element and is ~20x slower
    lambda ctx, g: g * ew.gt(ctx.output, 0).to(g.dtype),
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
    if x.numel() == 0:
        return x * 1  # nothing to normalise (kernels may not reduce an empty dim)
    return call_op(op, (x,), {"dim": d})


def softmax(x, dim=None, dtype=None):
    return _softmax_like(_SOFTMAX, "softmax", x, dim, dtype)


def log_softmax(x, dim=None, dtype=None):
    return _softmax_like(_LOG_SOFTMAX, "log_softmax", x, dim, dtype)


# -- pointwise activations (one graph node each; see _composite.call_fused) ----------

def _leaky_relu_decompose(x, negative_slope):
    return ew.where(ew.gt(x, 0), x, x * negative_slope)


def _leaky_relu_rule(ctx, g):
    return ew.where(ew.gt(ctx.saved[0], 0), g, g * ctx.attrs["negative_slope"])


_LEAKY_RELU = _composite("leaky_relu", _leaky_relu_decompose, _leaky_relu_rule, ("inputs",),
                         "x where x > 0, else negative_slope * x.")


def leaky_relu(input, negative_slope=0.01, inplace=False):
    out = call_fused(_LEAKY_RELU, (_float_input("leaky_relu", input),),
                     {"negative_slope": negative_slope})
    return input.copy_(out) if inplace else out


_SQRT_HALF = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327
_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_C = 0.044715


def _gelu_decompose(x, approximate):
    if approximate == "tanh":
        inner = (x + x * x * x * _GELU_C) * _SQRT_2_OVER_PI
        return x * 0.5 * (ew.tanh(inner) + 1)
    return x * 0.5 * (ew.erf(x * _SQRT_HALF) + 1)


def _gelu_rule(ctx, g):
    x = ctx.saved[0]
    if ctx.attrs["approximate"] == "tanh":
        x2 = x * x
        t = ew.tanh((x + x2 * x * _GELU_C) * _SQRT_2_OVER_PI)
        dinner = (x2 * (3 * _GELU_C) + 1) * _SQRT_2_OVER_PI
        return g * ((t + 1) * 0.5 + x * 0.5 * (1 - t * t) * dinner)
    cdf = (ew.erf(x * _SQRT_HALF) + 1) * 0.5
    pdf = ew.exp(x * x * -0.5) * _INV_SQRT_2PI
    return g * (cdf + x * pdf)


_GELU = _composite("gelu", _gelu_decompose, _gelu_rule, ("inputs",),
                   "x * Phi(x) (approximate='none', via erf) or its tanh approximation "
                   "(approximate='tanh').")


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    return call_fused(_GELU, (_float_input("gelu", input),), {"approximate": approximate})


def _silu_rule(ctx, g):
    x = ctx.saved[0]
    s = sigmoid(x)
    return g * (s * (x * (1 - s) + 1))


_SILU = _composite("silu", lambda x: x * sigmoid(x), _silu_rule, ("inputs",),
                   "x * sigmoid(x) (swish).")


def silu(input, inplace=False):
    out = call_fused(_SILU, (_float_input("silu", input),), {})
    return input.copy_(out) if inplace else out


def _softplus_decompose(x, beta, threshold):
    z = x * beta
    # log(1 + e^z) = max(z, 0) + log1p(e^-|z|): no overflow for large |z|.
    soft = (ew.maximum(z, 0) + ew.log1p(ew.exp(-ew.abs(z)))) / beta
    return ew.where(ew.gt(z, threshold), x, soft)


def _softplus_rule(ctx, g):
    z = ctx.saved[0] * ctx.attrs["beta"]
    return ew.where(ew.gt(z, ctx.attrs["threshold"]), g, g * sigmoid(z))


_SOFTPLUS = _composite("softplus", _softplus_decompose, _softplus_rule, ("inputs",),
                       "log(1 + exp(beta * x)) / beta; x itself where beta * x > threshold.")


def softplus(input, beta=1.0, threshold=20.0):
    return call_fused(_SOFTPLUS, (_float_input("softplus", input),),
                      {"beta": beta, "threshold": threshold})


def _elu_decompose(x, alpha):
    return ew.where(ew.gt(x, 0), x, ew.expm1(x) * alpha)


def _elu_rule(ctx, g):
    x = ctx.saved[0]
    return ew.where(ew.gt(x, 0), g, g * ew.exp(x) * ctx.attrs["alpha"])


_ELU = _composite("elu", _elu_decompose, _elu_rule, ("inputs",),
                  "x where x > 0, else alpha * (exp(x) - 1).")


def elu(input, alpha=1.0, inplace=False):
    out = call_fused(_ELU, (_float_input("elu", input),), {"alpha": alpha})
    return input.copy_(out) if inplace else out


def _float_input(op, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}(): expected a floating point input, got {x.dtype.name}; "
                           f"convert it first with .float()")
    return x


# -- more activations, plain compositions (autograd differentiates them) ------------------

def _clamped_grad(x, lo, hi):
    """clamp(x, lo, hi) whose gradient is 1 strictly inside (lo, hi) and 0 elsewhere, as torch's hardtanh."""
    inside = ew.logical_and(ew.gt(x, lo), ew.lt(x, hi))
    return ew.where(inside, x, ew.clamp(x.detach(), lo, hi))


@composite_op(OPS)
def hardtanh(input, min_val=-1.0, max_val=1.0):
    """clamp(x, min_val, max_val); the gradient is 1 strictly between them."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _clamped_grad(_float_input("hardtanh", input), min_val, max_val)


@composite_op(OPS)
def relu6(input):
    """min(max(x, 0), 6)."""
    return _clamped_grad(_float_input("relu6", input), 0.0, 6.0)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@composite_op(OPS)
def selu(input):
    """scale * elu(x, alpha) with the self-normalising constants."""
    return elu(input, _SELU_ALPHA) * _SELU_SCALE


@composite_op(OPS)
def celu(input, alpha=1.0):
    """x where x > 0, else alpha * (exp(x / alpha) - 1)."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: celu alpha must not be 0")
    x = _float_input("celu", input)
    return ew.where(ew.gt(x, 0), x, ew.expm1(x / alpha) * alpha)


@composite_op(OPS)
def mish(input):
    """x * tanh(softplus(x))."""
    return input * ew.tanh(softplus(input))


@composite_op(OPS)
def hardsigmoid(input):
    """0 for x <= -3, 1 for x >= 3, x / 6 + 1/2 between (gradient 1/6 strictly inside)."""
    return _clamped_grad(_float_input("hardsigmoid", input) / 6 + 0.5, 0.0, 1.0)


@composite_op(OPS)
def hardswish(input):
    """x * relu6(x + 3) / 6; at x = -3 and 3 the gradient is 0 and 1, as torch's."""
    x = _float_input("hardswish", input)
    return ew.where(ew.le(x, -3), 0.0, ew.where(ew.ge(x, 3), x, x * (x + 3) / 6))


@composite_op(OPS)
def softsign(input):
    """x / (1 + |x|)."""
    x = _float_input("softsign", input)
    return x / (ew.abs(x) + 1)


@composite_op(OPS)
def logsigmoid(input):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), without overflow."""
    x = _float_input("logsigmoid", input)
    return ew.minimum(x, ew.zeros_like(x)) - ew.log1p(ew.exp(-ew.abs(x)))


@composite_op(OPS)
def tanhshrink(input):
    """x - tanh(x)."""
    return input - ew.tanh(input)
