"""Pointwise functions composed from the elementwise primitives (autograd differentiates them)."""
from __future__ import annotations

from ..optable import composite
from ..tensor import Tensor
from . import elementwise as ew

_EVERYWHERE = ("plugtorch", "Tensor")

_LN2 = 0.6931471805599453
_LN10 = 2.302585092994046


@composite(exposed=_EVERYWHERE)
def log2(input):
    """Base-2 logarithm."""
    return ew.log(input) / _LN2


@composite(exposed=_EVERYWHERE)
def log10(input):
    """Base-10 logarithm."""
    return ew.log(input) / _LN10


@composite(exposed=_EVERYWHERE)
def exp2(input):
    """2 ** x."""
    return ew.exp(ew.as_float(input) * _LN2)


@composite(exposed=_EVERYWHERE)
def sinh(input):
    """(e**x - e**-x) / 2, via expm1 so small x keep their precision."""
    x = ew.as_float(input)
    return (ew.expm1(x) - ew.expm1(-x)) / 2


@composite(exposed=_EVERYWHERE)
def cosh(input):
    """(e**x + e**-x) / 2."""
    x = ew.as_float(input)
    return (ew.exp(x) + ew.exp(-x)) / 2


@composite(exposed=_EVERYWHERE, aliases=("fix",))
def trunc(input):
    """Round toward zero (integers are returned unchanged); the gradient is 0."""
    if not input.dtype.is_floating_point:
        return input.clone()
    return ew.where(ew.lt(input, 0), ew.ceil(input), ew.floor(input))


fix = trunc


@composite(exposed=_EVERYWHERE)
def frac(input):
    """x - trunc(x): the fractional part, with x's sign; the gradient is 1."""
    return input - trunc(input).detach()


@composite(operands=3, exposed=_EVERYWHERE)
def lerp(input, end, weight):
    """input + weight * (end - input); weight a number or a tensor."""
    if not isinstance(end, Tensor):
        raise TypeError(f"lerp(): argument 'end' must be Tensor, not {type(end).__name__}")
    return input + (end - input) * weight
