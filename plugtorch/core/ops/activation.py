"""Activations and (log-)softmax: composite ops, most with a derivative of their own.

Each op's function is its decomposition, written with other plugtorch ops; its ``bind``
(where there is one) checks torch's arguments and gives the op a floating input. Where
one graph node beats autograd through the pieces, the op carries its derivative too:
then a backend's fused kernel stays differentiable without re-running anything, and
without one the decomposition runs as a single node. The rest (hardtanh, mish, ...) are
plain compositions that autograd differentiates.
"""
from __future__ import annotations

import math
import warnings

from ..dispatch import NO_ATTRS, call_op
from ..optable import Done, op, public
from ..tensor import Tensor, _wrap_dim
from . import elementwise as ew
from ._jvp import diagonal
from .elementwise import as_float
from .inplace import inplace as _inplace
from .reduce import amax

_EVERYWHERE = ("plugtorch", "Tensor")
_F = ("nn.functional",)


def _float_input(op_name, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op_name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op_name}(): expected a floating point input, got {x.dtype.name}; "
                           f"convert it first with .float()")
    return x


def _applied_in_place(fn, name, input, *args):
    """``fn(input, *args)`` written into ``input`` (the graph stays correct: see ops.inplace)."""
    return _inplace(fn, name)(input, *args)


# -- relu, sigmoid --------------------------------------------------------------------

def _relu_rule(ctx, g):
    return call_op("threshold_backward", (g, ctx.output), {"threshold": 0})


@op(derivative=_relu_rule, save="output", exposed=_EVERYWHERE, inplace=True, jvp=diagonal(_relu_rule))
def relu(input):
    """max(x, 0); the gradient at 0 is 0."""
    # 0 where x < 0, so nan stays nan (a test of x > 0 would turn it into 0) and -0 stays -0,
    # as torch's relu gives them
    return ew.where(ew.lt(input, 0), 0, input)


def _threshold_backward_rule(ctx, g):
    # linear in grad_output; piecewise constant in input, whose gradient is 0
    return call_op("threshold_backward", (g, ctx.saved[1]), ctx.attrs), None


def _check_gradient_pair(name, grad_output, other, what):
    """The checks of a gradient op's bind: grad_output and the ``what`` operand are tensors of one shape."""
    if not isinstance(grad_output, Tensor) or not isinstance(other, Tensor):
        raise TypeError(f"{name}(): grad_output and {what} must be Tensors, got "
                        f"{type(grad_output).__name__} and {type(other).__name__}")
    if grad_output.shape != other.shape:
        raise RuntimeError(f"{name}: grad_output {list(grad_output.shape)} and {what} "
                           f"{list(other.shape)} must have one shape")


def _threshold_backward_args(grad_output, input, threshold):
    _check_gradient_pair("threshold_backward", grad_output, input, "input")
    return (grad_output, input), {"threshold": threshold}


# the backward ops are elementwise too: hessian's forward-over-reverse passes run them on dual tensors
@op(bind=_threshold_backward_args, derivative=_threshold_backward_rule, save=(1,),
    jvp=diagonal(_threshold_backward_rule))
def threshold_backward(grad_output, input, *, threshold):
    """relu's (and threshold's) gradient: 0 where input <= threshold, else grad_output (a NaN
    input passes it on, as torch's does).

    One op, so a backend can compute it in one pass (the decomposition is a comparison and a
    select). A backend kernel receives (grad_output, input) and ``threshold`` by name, and gives
    torch's values bit for bit: +0 at or below the threshold (not grad * 0, which is -0 for a
    negative gradient and nan for an infinite one), grad_output unchanged elsewhere.
    """
    # a select, not a multiply by the mask: the multiply gives -0 and nan where torch gives 0
    return ew.where(ew.le(input, threshold), 0.0, grad_output)


def _float_output_pair(name, grad_output, output):
    """A gradient op's (grad_output, output): two tensors of one shape, promoted to one floating dtype."""
    _check_gradient_pair(name, grad_output, output, "output")
    if grad_output.dtype is not output.dtype:  # torch promotes, as for any binary op
        grad_output, output = ew._promote_pair(name, grad_output, output)
    if not output.dtype.is_floating_point:
        raise RuntimeError(f"{name}(): expected floating point operands, got {output.dtype.name} "
                           "(it is the gradient of a float op); convert them first with .float()")
    return grad_output, output


def _output_backward_args(name):
    # the bind of tanh_backward and sigmoid_backward
    def bind(grad_output, output):
        return _float_output_pair(name, grad_output, output), NO_ATTRS
    return bind


def _tanh_backward_rule(ctx, gg):
    g, y = ctx.saved
    need = ctx.needs_input_grad
    return ((call_op("tanh_backward", (gg, y)) if need[0] else None),
            (gg * g * y * -2 if need[1] else None))


@op(bind=_output_backward_args("tanh_backward"), derivative=_tanh_backward_rule, save="inputs",
    jvp=diagonal(_tanh_backward_rule))
def tanh_backward(grad_output, output):
    """tanh's gradient from its output y: grad_output * (1 - y * y), torch's aten::tanh_backward.

    One op, so that a backend computes it in one pass (the decomposition is three ops, and a
    chain of small tanh layers pays for each dispatch).
    """
    return grad_output * (1 - output * output)


def _sigmoid_backward_rule(ctx, gg):
    g, y = ctx.saved
    need = ctx.needs_input_grad
    return ((call_op("sigmoid_backward", (gg, y)) if need[0] else None),
            (gg * g * (1 - y * 2) if need[1] else None))


@op(bind=_output_backward_args("sigmoid_backward"), derivative=_sigmoid_backward_rule, save="inputs",
    jvp=diagonal(_sigmoid_backward_rule))
def sigmoid_backward(grad_output, output):
    """sigmoid's gradient from its output y: grad_output * (1 - y) * y, torch's
    aten::sigmoid_backward (one op, as tanh_backward)."""
    return grad_output * (1 - output) * output


def _sigmoid_rule(ctx, g):
    return call_op("sigmoid_backward", (g, ctx.output))


def _sigmoid_args(input):
    if isinstance(input, Tensor) and input.dtype.is_complex:
        # the kernels (and the decomposition below, through abs) are real-only; written with
        # complex-correct ops, the gradient comes with it
        return Done(1 / (1 + ew.exp(-input)))
    return (as_float(input),), NO_ATTRS


@op(bind=_sigmoid_args, derivative=_sigmoid_rule, save="output",
    jvp=diagonal(_sigmoid_rule), exposed=_EVERYWHERE + _F, inplace=True, dtypes="integers -> default float")
def sigmoid(input):
    """1 / (1 + exp(-x)), computed without overflow."""
    # Never exponentiate a large positive number: exp(-|x|) is in (0, 1].
    e = ew.exp(-ew.abs(input))
    p = 1 / (1 + e)
    return ew.where(ew.ge(input, 0), p, e * p)


# -- softmax, log_softmax ------------------------------------------------------------

def _legacy_softmax_dim(name, ndim, stacklevel):
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
        "as an argument.", stacklevel=stacklevel + 1)
    return 0 if ndim in (0, 1, 3) else 1


def _softmax_operands(name, x, dim, dtype, stacklevel):
    # what softmax, log_softmax and softmin receive; ``stacklevel`` (torch's) counts from here
    if dtype is not None:
        x = x.to(dtype)
    x = as_float(x)
    if dim is None:
        dim = _legacy_softmax_dim(name, x.ndim, stacklevel)
    d = _wrap_dim(dim, x.ndim) if x.ndim else 0
    if x.ndim == 0:
        return Done(call_op(name, (x.reshape(1),), {"dim": 0}).reshape(()))
    if x.numel() == 0:
        return Done(x * 1)  # nothing to normalise (kernels may not reduce an empty dim)
    return (x,), {"dim": d}


def _softmax_args(name):
    def bind(input, dim=None, dtype=None):
        # the implicit-dim warning points past this bind and the generated front, at the caller
        return _softmax_operands(name, input, dim, dtype, 4)
    return bind


def _softmax_rule(ctx, g):
    return call_op("softmax_backward", (g, ctx.output), ctx.attrs)


def _gradient_pair_args(name):
    """The bind of softmax_backward and log_softmax_backward: (grad_output, output, dim)."""
    def bind(grad_output, output, dim):
        grad_output, output = _float_output_pair(name, grad_output, output)
        return (grad_output, output), {"dim": _wrap_dim(dim, output.ndim) if output.ndim else 0}
    return bind


def _softmax_backward_rule(ctx, gg):
    g, y = ctx.saved
    dim = ctx.attrs["dim"]
    need = ctx.needs_input_grad
    # out = y * (g - s), s = sum(g * y): linear in g (softmax_backward again); in y, gg * (g - s)
    # less g * sum(gg * y)
    return ((call_op("softmax_backward", (gg, y), ctx.attrs) if need[0] else None),
            (gg * (g - (g * y).sum(dim, keepdim=True)) - g * (gg * y).sum(dim, keepdim=True) if need[1] else None))


@op(bind=_gradient_pair_args("softmax_backward"), derivative=_softmax_backward_rule, save="inputs")
def softmax_backward(grad_output, output, *, dim):
    """softmax's input gradient from its output y: y * (grad_output - sum(grad_output * y, dim)),
    torch's aten::_softmax_backward_data. One op, so that a backend computes it in one pass (the
    decomposition is four ops over the attention weights in a transformer, a reduction among them).
    """
    return output * (grad_output - (grad_output * output).sum(dim, keepdim=True))


# softmax's Jacobian diag(y) - y y^T is symmetric: its JVP is its rule applied to the tangent
@op(bind=_softmax_args("softmax"), derivative=_softmax_rule, save="output", exposed=_EVERYWHERE,
    jvp=diagonal(_softmax_rule))
def softmax(input, *, dim):
    """exp(x) / sum(exp(x)) along dim, computed after subtracting the max."""
    e = ew.exp(input - amax(input, dim, keepdim=True).detach())  # shift-invariant: no gradient
    return e / e.sum(dim, keepdim=True)


def _log_softmax_rule(ctx, g):
    return call_op("log_softmax_backward", (g, ctx.output), ctx.attrs)


def _log_softmax_backward_rule(ctx, gg):
    g, y = ctx.saved
    dim = ctx.attrs["dim"]
    need = ctx.needs_input_grad
    # out = g - exp(y) * sum(g): in g, the transpose gg - sum(gg * exp(y)); in y, -gg * exp(y) * sum(g)
    e = ew.exp(y)
    return ((gg - (gg * e).sum(dim, keepdim=True) if need[0] else None),
            (-(gg * e) * g.sum(dim, keepdim=True) if need[1] else None))


@op(bind=_gradient_pair_args("log_softmax_backward"), derivative=_log_softmax_backward_rule, save="inputs")
def log_softmax_backward(grad_output, output, *, dim):
    """log_softmax's input gradient from its output y: grad_output - exp(y) * sum(grad_output, dim),
    torch's aten::_log_softmax_backward_data. One op, so that a backend computes it in one pass (the
    decomposition is four ops over, say, a language model's (tokens, vocabulary) log-probabilities).
    """
    return grad_output - ew.exp(output) * grad_output.sum(dim, keepdim=True)


def _log_softmax_jvp(primals, tangents, out, attrs):
    t = tangents[0]
    return t - (ew.exp(out) * t).sum(attrs["dim"], keepdim=True)


@op(bind=_softmax_args("log_softmax"), derivative=_log_softmax_rule, save="output", exposed=_EVERYWHERE,
    jvp=_log_softmax_jvp)
def log_softmax(input, *, dim):
    """log(softmax(x)) along dim, computed stably (never log of softmax)."""
    z = input - amax(input, dim, keepdim=True).detach()
    return z - ew.exp(z).sum(dim, keepdim=True).log()


def _softmin_args(input, dim=None, _stacklevel=3, dtype=None):
    return _softmax_operands("softmin", input, dim, dtype, _stacklevel + 1)  # + this bind's frame


@op(bind=_softmin_args, derivative=lambda ctx, g: -_softmax_rule(ctx, g), save="output", exposed=_F)
def softmin(input, *, dim):
    """softmax(-x) along dim: the smallest entries get the most weight."""
    return softmax(-input, dim)


def _glu_args(input, dim=-1):
    x = _float_input("glu", input)
    if x.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = _wrap_dim(dim, x.ndim)
    if x.shape[d] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {x.shape[d]}")
    return (x,), {"dim": d}


@op(bind=_glu_args, exposed=_F)
def glu(input, *, dim):
    """Gated linear unit: the first half of ``dim`` times the sigmoid of the second half."""
    a, b = input.chunk(2, dim)
    return a * sigmoid(b)


# nn.functional's spellings take torch's ``_stacklevel`` third (for the implicit-dim warning),
# where plugtorch.softmax takes dtype: the same op, two signatures, as in torch. They pass the
# operands and attrs to call_op as two arguments: a star-call (*bound) costs a tenth of a
# microsecond more, on a path every classifier's step takes.

@public("nn.functional", name="softmax")
def functional_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along dim, computed after subtracting the max."""
    bound = _softmax_operands("softmax", input, dim, dtype, _stacklevel)
    if type(bound) is Done:
        return bound.value
    operands, attrs = bound
    return call_op("softmax", operands, attrs)


@public("nn.functional", name="log_softmax")
def functional_log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """log(softmax(x)) along dim, computed stably (never log of softmax)."""
    bound = _softmax_operands("log_softmax", input, dim, dtype, _stacklevel)
    if type(bound) is Done:
        return bound.value
    operands, attrs = bound
    return call_op("log_softmax", operands, attrs)


# -- pointwise activations with a rule (one graph node each) -------------------------

def _leaky_relu_rule(ctx, g):
    return ew.where(ew.gt(ctx.saved[0], 0), g, g * ctx.attrs["negative_slope"])


def _leaky_relu_args(input, negative_slope=0.01, inplace=False):
    if inplace:
        return Done(_applied_in_place(leaky_relu, "leaky_relu_", input, negative_slope))
    return (_float_input("leaky_relu", input),), {"negative_slope": negative_slope}


@op(bind=_leaky_relu_args, derivative=_leaky_relu_rule, save="inputs", exposed=_F, jvp=diagonal(_leaky_relu_rule))
def leaky_relu(input, *, negative_slope):
    """x where x > 0, else negative_slope * x."""
    return ew.where(ew.gt(input, 0), input, input * negative_slope)


def _threshold_rule(ctx, g):
    return call_op("threshold_backward", (g, ctx.saved[0]), {"threshold": ctx.attrs["threshold"]})


def _threshold_args(input, threshold, value, inplace=False):
    if not isinstance(input, Tensor):
        raise TypeError(f"threshold(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point and not input.dtype.is_complex:
        value = int(value)  # torch casts the number to the tensor's dtype
    if inplace:
        return Done(_applied_in_place(_threshold_op, "threshold_", input, threshold, value))
    return (input,), {"threshold": threshold, "value": value}


@op(bind=_threshold_args, derivative=_threshold_rule, save="inputs", exposed=("plugtorch", "nn.functional"),
    jvp=diagonal(_threshold_rule))
def threshold(input, *, threshold, value):
    """``value`` where x <= threshold, else x (torch's test: nan passes, and -0.0 is at or below a
    threshold of 0); the gradient is threshold_backward's."""
    return ew.where(ew.le(input, threshold), value, input)


_threshold_op = threshold


@public("plugtorch", "nn.functional")
def threshold_(input, threshold, value):
    """threshold written into ``input``."""
    return _threshold_op(input, threshold, value, True)


_SQRT_HALF = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327
_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_C = 0.044715


def _gelu_rule(ctx, g):
    return call_op("gelu_backward", (g, ctx.saved[0]), ctx.attrs)


def _gelu_second(x, approximate):
    """gelu''(x): phi(x) (2 - x^2), or the tanh form's (1 - t^2) (u' - x t u'^2 + 3 k c x^2) with
    u = k (x + c x^3), t = tanh(u)."""
    if approximate == "tanh":
        x2 = x * x
        t = ew.tanh((x + x2 * x * _GELU_C) * _SQRT_2_OVER_PI)
        du = (x2 * (3 * _GELU_C) + 1) * _SQRT_2_OVER_PI
        return (1 - t * t) * (du - x * t * du * du + x2 * (3 * _SQRT_2_OVER_PI * _GELU_C))
    return ew.exp(x * x * -0.5) * _INV_SQRT_2PI * (2 - x * x)


def _gelu_backward_rule(ctx, gg):
    # linear in grad_output; in input, grad_output * gelu''(input)
    g, x = ctx.saved
    need = ctx.needs_input_grad
    return ((call_op("gelu_backward", (gg, x), ctx.attrs) if need[0] else None),
            (gg * g * _gelu_second(x, ctx.attrs["approximate"]) if need[1] else None))


def _gelu_backward_args(grad_output, input, approximate="none"):
    _check_gradient_pair("gelu_backward", grad_output, input, "input")
    if grad_output.dtype is not input.dtype:  # torch promotes, as for any binary op
        grad_output, input = ew._promote_pair("gelu_backward", grad_output, input)
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    return (grad_output, input), {"approximate": approximate}


@op(bind=_gelu_backward_args, derivative=_gelu_backward_rule, save="inputs",
    jvp=diagonal(_gelu_backward_rule))
def gelu_backward(grad_output, input, *, approximate):
    """gelu's gradient: grad_output * gelu'(input), torch's aten::gelu_backward — one op, so a
    backend computes it in one pass (the decomposition is a dozen elementwise ops)."""
    x = input
    if approximate == "tanh":
        x2 = x * x
        t = ew.tanh((x + x2 * x * _GELU_C) * _SQRT_2_OVER_PI)
        dinner = (x2 * (3 * _GELU_C) + 1) * _SQRT_2_OVER_PI
        return grad_output * ((t + 1) * 0.5 + x * 0.5 * (1 - t * t) * dinner)
    cdf = (ew.erf(x * _SQRT_HALF) + 1) * 0.5
    pdf = ew.exp(x * x * -0.5) * _INV_SQRT_2PI
    return grad_output * (cdf + x * pdf)


def _gelu_args(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    return (_float_input("gelu", input),), {"approximate": approximate}


@op(bind=_gelu_args, derivative=_gelu_rule, save="inputs", exposed=_F, jvp=diagonal(_gelu_rule))
def gelu(input, *, approximate):
    """x * Phi(x) (approximate='none', via erf) or its tanh approximation (approximate='tanh')."""
    if approximate == "tanh":
        inner = (input + input * input * input * _GELU_C) * _SQRT_2_OVER_PI
        return input * 0.5 * (ew.tanh(inner) + 1)
    return input * 0.5 * (ew.erf(input * _SQRT_HALF) + 1)


def _silu_rule(ctx, g):
    x = ctx.saved[0]
    s = sigmoid(x)
    return g * (s * (x * (1 - s) + 1))


def _silu_args(input, inplace=False):
    if inplace:
        return Done(_applied_in_place(silu, "silu_", input))
    return (_float_input("silu", input),), NO_ATTRS


@op(bind=_silu_args, derivative=_silu_rule, save="inputs", exposed=_F, jvp=diagonal(_silu_rule))
def silu(input):
    """x * sigmoid(x) (swish)."""
    return input * sigmoid(input)


def _softplus_rule(ctx, g):
    z = ctx.saved[0] * ctx.attrs["beta"]
    return ew.where(ew.gt(z, ctx.attrs["threshold"]), g, g * sigmoid(z))


def _softplus_args(input, beta=1.0, threshold=20.0):
    return (_float_input("softplus", input),), {"beta": beta, "threshold": threshold}


@op(bind=_softplus_args, derivative=_softplus_rule, save="inputs", exposed=_F, jvp=diagonal(_softplus_rule))
def softplus(input, *, beta, threshold):
    """log(1 + exp(beta * x)) / beta; x itself where beta * x > threshold."""
    z = input * beta
    # log(1 + e^z) = max(z, 0) + log1p(e^-|z|): no overflow for large |z|.
    soft = (ew.maximum(z, 0) + ew.log1p(ew.exp(-ew.abs(z)))) / beta
    return ew.where(ew.gt(z, threshold), input, soft)


def _elu_rule(ctx, g):
    x = ctx.saved[0]
    # x <= 0 tested, as torch's: at nan the gradient is the incoming one
    return ew.where(ew.le(x, 0), g * ew.exp(x) * ctx.attrs["alpha"], g)


def _elu_args(input, alpha=1.0, inplace=False):
    if inplace:
        return Done(_applied_in_place(elu, "elu_", input, alpha))
    return (_float_input("elu", input),), {"alpha": alpha}


@op(bind=_elu_args, derivative=_elu_rule, save="inputs", exposed=_F, jvp=diagonal(_elu_rule))
def elu(input, *, alpha):
    """x where x > 0, else alpha * (exp(x) - 1)."""
    return ew.where(ew.gt(input, 0), input, ew.expm1(input) * alpha)


# -- more activations: plain compositions (autograd differentiates them) -------------

def _clamped_grad(x, lo, hi):
    """clamp(x, lo, hi) whose gradient is 1 strictly inside (lo, hi) and 0 elsewhere, as torch's hardtanh."""
    inside = ew.logical_and(ew.gt(x, lo), ew.lt(x, hi))
    return ew.where(inside, x, ew.clamp(x.detach(), lo, hi))


@op(exposed=_F)
def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """clamp(x, min_val, max_val); the gradient is 1 strictly between them."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if inplace:
        return _applied_in_place(hardtanh, "hardtanh_", input, min_val, max_val)
    return _clamped_grad(_float_input("hardtanh", input), min_val, max_val)


@op(exposed=_F)
def relu6(input, inplace=False):
    """min(max(x, 0), 6)."""
    if inplace:
        return _applied_in_place(relu6, "relu6_", input)
    return _clamped_grad(_float_input("relu6", input), 0.0, 6.0)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@op(exposed=("plugtorch",) + _F)
def selu(input, inplace=False):
    """scale * elu(x, alpha) with the self-normalising constants."""
    if inplace:
        return _applied_in_place(selu, "selu_", input)
    return elu(input, _SELU_ALPHA) * _SELU_SCALE


@op(exposed=("plugtorch",) + _F)
def celu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha * (exp(x / alpha) - 1)."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: celu alpha must not be 0")
    if inplace:
        return _applied_in_place(celu, "celu_", input, alpha)
    x = _float_input("celu", input)
    # x <= 0 tested, as torch's: nan takes the identity branch, whose gradient is the incoming one
    below = ew.le(x, 0)
    if alpha > 0:  # elu's rule, g * exp(z): expm1's, g * (expm1(z) + 1), is 0 below z = -37
        return ew.where(below, elu(x / alpha, alpha=alpha), x)
    # the exp of the non-positive part only: exp(x / alpha) of a large x would be inf, and the
    # unused branch's gradient 0 * inf nan
    return ew.where(below, ew.expm1(ew.where(below, x, 0.0) / alpha) * alpha, x)


@op(exposed=_F)
def mish(input, inplace=False):
    """x * tanh(softplus(x))."""
    if inplace:
        return _applied_in_place(mish, "mish_", input)
    return input * ew.tanh(softplus(input))


@op(exposed=_F)
def hardsigmoid(input, inplace=False):
    """0 for x <= -3, 1 for x >= 3, x / 6 + 1/2 between (gradient 1/6 strictly inside)."""
    if inplace:
        return _applied_in_place(hardsigmoid, "hardsigmoid_", input)
    return _clamped_grad(_float_input("hardsigmoid", input) / 6 + 0.5, 0.0, 1.0)


@op(exposed=_F)
def hardswish(input, inplace=False):
    """x * relu6(x + 3) / 6; at x = -3 and 3 the gradient is 0 and 1, as torch's."""
    if inplace:
        return _applied_in_place(hardswish, "hardswish_", input)
    x = _float_input("hardswish", input)
    # torch's x * relu6(x + 3) / 6 is x * 0 at or below -3: -0.0, or nan at -inf; nan takes the
    # last branch, so its gradient is the incoming one, as torch's
    low = ew.where(ew.eq(x, -math.inf), math.nan, -0.0)
    # x inside (-3, 3) only, so that the unused branch's gradient is no nan * 0 at nan or +-inf
    s = ew.where(ew.gt(x, -3) & ew.lt(x, 3), x, 0.0)
    return ew.where(ew.le(x, -3), low, ew.where(ew.lt(x, 3), s * (s + 3) / 6, x))


@op(exposed=_F)
def softsign(input):
    """x / (1 + |x|)."""
    x = _float_input("softsign", input)
    return x / (ew.abs(x) + 1)


@op(exposed=_F)
def logsigmoid(input):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), without overflow."""
    x = _float_input("logsigmoid", input)
    return ew.minimum(x, 0.0) - ew.log1p(ew.exp(-ew.abs(x)))


@op(exposed=_F)
def tanhshrink(input):
    """x - tanh(x)."""
    return input - ew.tanh(input)
