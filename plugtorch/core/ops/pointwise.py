"""Pointwise functions composed from the elementwise primitives (autograd differentiates them)."""
from __future__ import annotations

from ..registry import OpDef
from ..tensor import Tensor
from . import elementwise as ew
from ._composite import composite_op

OPS: list[OpDef] = []

_LN2 = 0.6931471805599453
_LN10 = 2.302585092994046


@composite_op(OPS)
def log2(input):
    """Base-2 logarithm."""
    return ew.log(input) / _LN2


@composite_op(OPS)
def log10(input):
    """Base-10 logarithm."""
    return ew.log(input) / _LN10


@composite_op(OPS)
def exp2(input):
    """2 ** x."""
    return ew.exp(ew._float(input) * _LN2)


@composite_op(OPS)
def sinh(input):
    """(e**x - e**-x) / 2, via expm1 so small x keep their precision."""
    x = ew._float(input)
    return (ew.expm1(x) - ew.expm1(-x)) / 2


@composite_op(OPS)
def cosh(input):
    """(e**x + e**-x) / 2."""
    x = ew._float(input)
    return (ew.exp(x) + ew.exp(-x)) / 2


@composite_op(OPS)
def trunc(input):
    """Round toward zero (integers are returned unchanged); the gradient is 0."""
    if not input.dtype.is_floating_point:
        return input.clone()
    return ew.where(ew.lt(input, 0), ew.ceil(input), ew.floor(input))


fix = trunc


@composite_op(OPS)
def frac(input):
    """x - trunc(x): the fractional part, with x's sign; the gradient is 1."""
    return input - trunc(input).detach()


@composite_op(OPS)
def lerp(input, end, weight):
    """input + weight * (end - input); weight a number or a tensor."""
    if not isinstance(end, Tensor):
        raise TypeError(f"lerp(): argument 'end' must be Tensor, not {type(end).__name__}")
    return input + (end - input) * weight
