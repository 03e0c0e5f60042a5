"""torch's numeric helpers built on the elementwise primitives: nan_to_num, fmax/fmin (NaN
ignored), float_power, ldexp, rad2deg/deg2rad, heaviside, signbit, sgn, positive, isposinf,
isneginf, isreal; and the in-place comparison and logical methods (``x.eq_(y)`` writes
``x == y`` into ``x``, as 0/1 in ``x``'s dtype).

The differentiable ones are decompositions (``where`` routes fmax's gradient, torch's way:
ties to ``input``), so their derivatives come from the ops they are written with.
"""
from __future__ import annotations

import math

from ..dtypes import bool_, float64, get_default_dtype, result_type
from ..optable import API, INPLACE, op, public
from ..tensor import Tensor
from . import elementwise as ew
from .creation import zeros_like
from .predicates import finfo

_EVERYWHERE = ("plugtorch", "Tensor")


def _nan_to_num_args(input, nan=0.0, posinf=None, neginf=None, *, out=None):
    if out is not None:
        raise TypeError("nan_to_num(): out= is not supported; assign the result instead")
    if not input.dtype.is_floating_point:
        from ..optable import Done
        return Done(input.clone())  # integers have no nan or inf
    info = finfo(input.dtype)
    return (input,), {"nan": float(nan), "posinf": info.max if posinf is None else float(posinf),
                      "neginf": info.min if neginf is None else float(neginf)}


@op(bind=_nan_to_num_args, exposed=_EVERYWHERE, inplace=True)
def nan_to_num(input, *, nan, posinf, neginf):
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (the infinities by
    default the dtype's largest and smallest finite values); the gradient passes where the
    input is finite."""
    x = ew.where(ew.isnan(input), nan, input)
    x = ew.where(input == math.inf, posinf, x)
    return ew.where(input == -math.inf, neginf, x)


def _floating_pair(a, b):
    dt = result_type(a, b)
    return a.to(dt), b.to(dt)


@op(operands=2, exposed=_EVERYWHERE)
def fmax(input, other):
    """Elementwise maximum that ignores NaN (NaN only where both are); ties go to ``input``."""
    a, b = _floating_pair(input, other)
    if a.dtype is bool_:
        return a | b
    return ew.where((a >= b) | ew.isnan(b), a, b)


@op(operands=2, exposed=_EVERYWHERE)
def fmin(input, other):
    """Elementwise minimum that ignores NaN (NaN only where both are); ties go to ``input``."""
    a, b = _floating_pair(input, other)
    if a.dtype is bool_:
        return a & b
    return ew.where((a <= b) | ew.isnan(b), a, b)


def _float_power_args(input, exponent):
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError("float_power(): expected at least one Tensor argument")
    return (input, exponent), {}


@op(bind=_float_power_args, exposed=_EVERYWHERE)
def float_power(input, exponent):
    """``input ** exponent`` computed in float64."""
    a = input.to(float64) if isinstance(input, Tensor) else float(input)
    b = exponent.to(float64) if isinstance(exponent, Tensor) else float(exponent)
    return ew.pow(a, b)


def _float_power_in_place(input, exponent):
    """What ``Tensor.float_power_`` writes: ``input`` must be float64, the dtype float_power
    computes in."""
    if input.dtype is not float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {_WORDS.get(input.dtype.name, input.dtype.name)} "
                           "but the operation's result requires dtype Double")
    return float_power(input, exponent)


_WORDS = {"float32": "Float", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long", "int32": "Int"}
INPLACE["float_power_"] = _float_power_in_place


@op(operands=2, exposed=_EVERYWHERE, inplace=True)
def ldexp(input, other):
    """``input * 2 ** other``, in a floating dtype."""
    dt = result_type(input, other)
    if not dt.is_floating_point:
        dt = get_default_dtype()
    return input.to(dt) * ew.pow(2.0, other.to(dt))


@op(exposed=_EVERYWHERE, inplace=True)
def rad2deg(input):
    """Radians to degrees (integers become the default float dtype)."""
    x = input if input.dtype.is_floating_point else input.to(get_default_dtype())
    return x * (180.0 / math.pi)


@op(exposed=_EVERYWHERE, inplace=True)
def deg2rad(input):
    """Degrees to radians (integers become the default float dtype)."""
    x = input if input.dtype.is_floating_point else input.to(get_default_dtype())
    return x * (math.pi / 180.0)


# -- not differentiable: predicates and step functions ------------------------------------------

@public("plugtorch", "Tensor", inplace=True)
def heaviside(input, values):
    """0 where ``input < 0``, 1 where ``> 0``, ``values`` where it is 0 (of one dtype)."""
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    if input.requires_grad or values.requires_grad:
        raise RuntimeError("the derivative for 'heaviside' is not implemented.")
    return ew.where(input == 0, values, (input > 0).to(input.dtype))


@public("plugtorch", "Tensor")
def signbit(input):
    """Whether the sign bit is set (-0.0 and -nan included)."""
    if input.dtype is bool_:
        return zeros_like(input, dtype=bool_)
    if not input.dtype.is_floating_point:
        return input.detach() < 0
    return ew.copysign(1.0, input.detach()) < 0


@public("plugtorch", "Tensor", inplace=True)
def sgn(input):
    """The sign of each element (for real tensors, ``sign``; 0 at NaN, as torch's); ``z / |z|`` for
    complex ones."""
    if input.dtype.is_floating_point:
        return ew.where(ew.isnan(input), 0.0, ew.sign(input))
    if input.dtype.is_complex:  # z / |z|, 0 at 0 (sign refuses complex numbers, as torch's)
        a = ew.abs(input)
        zero = ew.eq(a, 0)
        return ew.where(zero, 0.0, input / ew.where(zero, 1.0, a))
    return ew.sign(input)


@public("plugtorch", "Tensor")
def positive(input):
    """``input`` itself (``+input``)."""
    if input.dtype is bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


@public("plugtorch", "Tensor")
def isposinf(input):
    """Where the element is +inf."""
    if not input.dtype.is_floating_point:
        return zeros_like(input, dtype=bool_)
    return input.detach() == math.inf


@public("plugtorch", "Tensor")
def isneginf(input):
    """Where the element is -inf."""
    if not input.dtype.is_floating_point:
        return zeros_like(input, dtype=bool_)
    return input.detach() == -math.inf


@public("plugtorch", "Tensor")
def isreal(input):
    """Where the element has no imaginary part: everywhere, for a real tensor."""
    if input.dtype.is_complex:
        return input.imag == 0
    return ew.logical_not(zeros_like(input, dtype=bool_))


# the in-place comparisons and logical ops (the result, bool, written as 0/1 into the tensor's
# dtype, as torch's Tensor.eq_ does) and cumsum_
for _name in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
              "greater", "greater_equal", "less", "less_equal", "not_equal", "cumsum"):
    INPLACE.setdefault(_name + "_", API["Tensor"][_name])
