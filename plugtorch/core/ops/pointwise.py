"""Pointwise functions composed from the elementwise ops: those with a rule of their own (lerp,
logaddexp, hypot) are differentiated by it, the others by autograd through their pieces."""
from __future__ import annotations

from ..dispatch import NO_ATTRS
from ..optable import op, public
from ..tensor import Tensor
from . import elementwise as ew

_EVERYWHERE = ("plugtorch", "Tensor")

_LN2 = 0.6931471805599453
_LN10 = 2.302585092994046


@op(exposed=_EVERYWHERE)
def log2(input):
    """Base-2 logarithm."""
    return ew.log(input) / _LN2


@op(exposed=_EVERYWHERE)
def log10(input):
    """Base-10 logarithm."""
    return ew.log(input) / _LN10


@op(exposed=_EVERYWHERE)
def exp2(input):
    """2 ** x."""
    return ew.exp(ew.as_float(input) * _LN2)


@op(exposed=_EVERYWHERE)
def sinh(input):
    """(e**x - e**-x) / 2, via expm1 so small x keep their precision."""
    x = ew.as_float(input)
    return (ew.expm1(x) - ew.expm1(-x)) / 2


@op(exposed=_EVERYWHERE)
def cosh(input):
    """(e**x + e**-x) / 2."""
    x = ew.as_float(input)
    return (ew.exp(x) + ew.exp(-x)) / 2


@op(exposed=_EVERYWHERE, aliases=("fix",))
def trunc(input):
    """Round toward zero (integers are returned unchanged); the gradient is 0."""
    if not input.dtype.is_floating_point:
        return input.clone()
    return ew.where(ew.lt(input, 0), ew.ceil(input), ew.floor(input))


fix = trunc


@op(exposed=_EVERYWHERE)
def frac(input):
    """x - trunc(x): the fractional part, with x's sign; the gradient is 1."""
    return input - trunc(input).detach()


def _lerp_rule(ctx, g):
    a, b, w = ctx.saved
    need = ctx.needs_input_grad
    return ((g * (1 - w) if need[0] else None), (g * w if need[1] else None),
            (g * (b - a) if need[2] else None))


@op(operands=3, exposed=_EVERYWHERE, derivative=_lerp_rule, save="inputs")
def lerp(input, end, weight):
    """input + weight * (end - input); weight a number or a tensor."""
    if not isinstance(end, Tensor):
        raise TypeError(f"lerp(): argument 'end' must be Tensor, not {type(end).__name__}")
    return input + (end - input) * weight


# -- two-operand functions with rules of their own ----------------------------------------

def _float_pair(op_name, a, b):
    """torch's logaddexp and hypot take floating tensors (a Python number as ``other`` too)."""
    for v in (a, b):
        if isinstance(v, Tensor) and not v.dtype.is_floating_point:
            raise NotImplementedError(f'"{op_name}" not implemented for {v.dtype.name}: it takes '
                                      "floating point tensors; convert with .float()")
    if not isinstance(a, Tensor):
        raise TypeError(f"{op_name}(): argument 'input' must be Tensor, not {type(a).__name__}")
    if not isinstance(b, Tensor):
        b = a._full_like_scalar(b)
    if a.dtype is not b.dtype:
        a, b = ew._promote_pair(op_name, a, b)
    return a, b


def _log_add_exp(input, other, base):
    a, b = (input, other) if base == "e" else (input * _LN2, other * _LN2)
    # equal infinities: inf - inf would be nan; the answer is that infinity (and no warning)
    same_inf = ew.logical_and(ew.isinf(a), ew.eq(a, b))
    sa, sb = ew.where(same_inf, 0.0, a), ew.where(same_inf, 0.0, b)
    out = ew.where(same_inf, a, ew.maximum(sa, sb) + ew.log1p(ew.exp(-ew.abs(sa - sb))))
    return out if base == "e" else out / _LN2


def _logaddexp_rule(ctx, g):
    a, b = ctx.saved
    scale = 1.0 if ctx.attrs["base"] == "e" else _LN2
    need = ctx.needs_input_grad
    # d/da log(e^a + e^b) = 1 / (1 + e^(b - a)), torch's form: at a = inf it is 1 (e^(a - out)
    # would be e^nan)
    return ((g / (ew.exp((b - a) * scale) + 1) if need[0] else None),
            (g / (ew.exp((a - b) * scale) + 1) if need[1] else None))


def _logaddexp_args(op_name, base):
    attrs = {"base": base}  # the rule reads it: both ops share one

    def bind(input, other):
        return _float_pair(op_name, input, other), attrs
    return bind


@op(bind=_logaddexp_args("logaddexp", "e"), derivative=_logaddexp_rule, save="inputs",
    exposed=_EVERYWHERE)
def logaddexp(input, other, *, base):
    """log(e**input + e**other), without overflow (floating tensors)."""
    return _log_add_exp(input, other, base)


@op(bind=_logaddexp_args("logaddexp2", "2"), derivative=_logaddexp_rule, save="inputs",
    exposed=_EVERYWHERE)
def logaddexp2(input, other, *, base):
    """log2(2**input + 2**other), without overflow (floating tensors)."""
    return _log_add_exp(input, other, base)


def _hypot_rule(ctx, g):
    a, b = ctx.saved
    out = ctx.output
    need = ctx.needs_input_grad
    # x / hypot, as torch's: nan at the origin (0 / 0), where hypot has no gradient
    return (g * a / out if need[0] else None), (g * b / out if need[1] else None)


def _hypot_args(input, other):
    return _float_pair("hypot", input, other), NO_ATTRS


@op(bind=_hypot_args, derivative=_hypot_rule, save=("inputs", "output"), exposed=_EVERYWHERE)
def hypot(input, other):
    """sqrt(input**2 + other**2), without overflow (floating tensors)."""
    # scaled by the larger magnitude, so that squares neither overflow nor underflow
    m = ew.maximum(ew.abs(input), ew.abs(other))
    safe = ew.where(ew.logical_or(ew.eq(m, 0), ew.isinf(m)), 1.0, m)
    r = m * ew.sqrt(ew.square(input / safe) + ew.square(other / safe))
    return ew.where(ew.logical_or(ew.isinf(input), ew.isinf(other)), float("inf"), r)  # inf beats nan


# -- closeness ------------------------------------------------------------------------------

@op(operands=2, exposed=_EVERYWHERE)
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other| elementwise (bool); equal infinities are close,
    nan only with equal_nan. Both tensors need one dtype, as torch's."""
    if not isinstance(other, Tensor):
        other = input._full_like_scalar(other)
    if input.dtype is not other.dtype:
        raise RuntimeError(f"isclose(): {other.dtype.name} did not match {input.dtype.name}; "
                           "convert one with .to(other.dtype)")
    if rtol < 0 or atol < 0:
        raise RuntimeError(f"isclose(): rtol ({rtol}) and atol ({atol}) must be non-negative")
    same = ew.eq(input, other)
    if not input.dtype.is_floating_point:
        if input.dtype.name == "bool":
            return same
        a, b = input.to(ew.get_default_dtype()), other.to(ew.get_default_dtype())
    else:
        a, b = input, other
    # equal values (infinities among them) are close; the rest are compared by their distance,
    # with the equal ones zeroed first so that no inf - inf is computed
    da, db = ew.where(same, 0.0, a), ew.where(same, 0.0, b)
    error = ew.abs(da - db)  # an infinite error (unequal infinities) is never close, as torch's
    out = ew.logical_or(same, ew.logical_and(ew.isfinite(error), ew.le(error, atol + rtol * ew.abs(db))))
    if equal_nan and input.dtype.is_floating_point:
        out = ew.logical_or(out, ew.logical_and(ew.isnan(a), ew.isnan(b)))
    return out


@public("plugtorch", "Tensor")
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    """Whether every element of input is close to other's (isclose), as a Python bool."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


# -- fused multiply-adds (the optimizer updates' building blocks) --------------------------------

@op(operands=3, exposed=_EVERYWHERE, inplace=True)
def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2."""
    prod = tensor1 * tensor2
    return input + (prod if value == 1 else prod * value)


@op(operands=3, exposed=_EVERYWHERE, inplace=True)
def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2 (true division; integer tensor1 and tensor2 are refused)."""
    if not (tensor1.dtype.is_floating_point or tensor2.dtype.is_floating_point):
        raise RuntimeError("Integer division with addcdiv is no longer supported, and in a future "
                           "release addcdiv will perform a true division of tensor1 and tensor2. "
                           "Use true_divide or floor_divide for the division.")
    quot = tensor1 / tensor2
    return input + (quot if value == 1 else quot * value)
