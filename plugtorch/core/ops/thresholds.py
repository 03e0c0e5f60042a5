"""Activations that threshold or gate by sign: hardshrink, softshrink and prelu (a learned
slope per channel), written with ``where`` so their derivatives are torch's (0 inside the
shrink band; prelu's weight gradient ``x * g`` where x <= 0)."""
from __future__ import annotations

from ..optable import op
from . import elementwise as ew
from .predicates import finfo

_WORDS = {"float64": "Double", "float32": "Float", "float16": "Half", "bfloat16": "BFloat16"}

_EVERYWHERE = ("plugtorch", "Tensor", "nn.functional")


@op(exposed=_EVERYWHERE)
def hardshrink(input, lambd=0.5):
    """``input`` where ``|input| > lambd``, else 0 (nan stays nan, as torch's)."""
    # nan is neither inside nor outside the band: it stays nan, with torch's zero gradient
    outside = (input > lambd) | (input < -lambd)
    return ew.where(outside, input, ew.where(ew.isnan(input), input.detach(), 0.0))


@op(exposed=("plugtorch", "nn.functional"))
def softshrink(input, lambd=0.5):
    """``input`` moved ``lambd`` towards 0, and 0 within ``lambd`` of it."""
    if lambd < 0:
        top = finfo(input.dtype).max if input.dtype.is_floating_point else float("inf")
        raise RuntimeError(f"lambda must be in range [0, {top:g}] for input dtype {_WORDS.get(input.dtype.name)}, "
                           f"but found {lambd:g}")
    # 0 inside the band (+0.0, as torch's vectorised loop gives it), and nan stays nan with
    # torch's zero gradient
    inside = ew.where(ew.isnan(input), input.detach(), 0.0)
    return ew.where(input > lambd, input - lambd, ew.where(input < -lambd, input + lambd, inside))


@op(operands=2, exposed=_EVERYWHERE)
def prelu(input, weight):
    """``input`` where positive, ``weight * input`` elsewhere; ``weight`` holds one slope or one
    per channel (dim 1)."""
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}")
    n = weight.numel()
    if n != 1:
        if input.ndim == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        channels = input.shape[1] if input.ndim >= 2 else 1
        if n != channels:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = {n} "
                               f"and channel size = {channels}.")
        weight = weight.reshape([n] + [1] * (input.ndim - 2))
    elif weight.ndim:
        weight = weight.reshape(())
    return ew.where(input > 0, input, weight * input)
