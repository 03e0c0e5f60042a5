"""The few fused pointwise forms torch's optimizers are written with, in plugtorch ops.

Each one evaluates in the order PyTorch's CPU kernel does, so a float64 update agrees
with torch's to the last few bits and does not drift over many steps. They go through
public tensor ops only, so any backend runs them (DESIGN.md counts the optimizer updates
among the composites a backend may later fuse into one kernel).
"""
from __future__ import annotations

import struct

from ..core.dtypes import float64, get_default_dtype


def lerp_(start, end, weight: float):
    """``start.lerp_(end, weight)``: torch switches formula at 0.5 so that both ends are exact."""
    if abs(weight) < 0.5:
        return start.add_(end - start, alpha=weight)
    return start.sub_(end).mul_(1 - weight).add_(end)  # end - (end - start) * (1 - weight)


def lerp(start, end, weight: float):
    """``start.lerp(end, weight)`` (out of place)."""
    return lerp_(start.clone(), end, weight)


def addcmul_(t, a, b, value: float = 1.0):
    """``t.addcmul_(a, b, value=value)``: ``t + value * a * b``, multiplied left to right."""
    return t.add_((a * value).mul_(b))


def addcdiv_(t, a, b, value: float = 1.0):
    """``t.addcdiv_(a, b, value=value)``: ``t + value * a / b``."""
    return t.add_((a * value).div_(b))


def scalar_state(x: float) -> float:
    """A number as torch stores it in a 0-d state tensor of its scalar dtype (float32 unless
    the default dtype is float64), so bookkeeping such as NAdam's ``mu_product`` rounds as
    torch's does. Kept as a Python float: reading it costs no device sync."""
    if get_default_dtype() == float64:
        return float(x)
    return struct.unpack("f", struct.pack("f", x))[0]
