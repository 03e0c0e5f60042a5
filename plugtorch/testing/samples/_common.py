"""Shared helpers for the built-in sample tables."""
from __future__ import annotations

import types

import numpy as np

from ..sample import Sample, Waiver, is_torch

__all__ = ["Sample", "Waiver", "is_torch", "F", "np", "empty", "scalar"]


def _core_functional():
    from plugtorch.core.ops import activation, conv, index, movement
    names = {}
    for mod in (activation, conv):
        names.update({k: v for k, v in vars(mod).items() if callable(v) and not k.startswith("_")})
    names.update(pad=movement.pad, one_hot=index.one_hot)
    return types.SimpleNamespace(**names)


_PT_FUNCTIONAL = None


def F(m):
    """``torch.nn.functional`` for torch; the core's own implementations for plugtorch.

    The core versions are what is under test here (plugtorch.nn.functional re-exports them).
    """
    global _PT_FUNCTIONAL
    if is_torch(m):
        return m.nn.functional
    if _PT_FUNCTIONAL is None:
        _PT_FUNCTIONAL = _core_functional()
    return _PT_FUNCTIONAL


def empty(*shape):
    return np.zeros(shape, dtype=np.float64)


def scalar(v):
    return np.asarray(v, dtype=np.float64)
