"""Shared helpers for the built-in sample tables."""
from __future__ import annotations

import numpy as np

from ..sample import Sample, Waiver, is_torch

__all__ = ["Sample", "Waiver", "is_torch", "F", "np", "empty", "scalar"]


def _core_functional():
    import plugtorch.nn.functional
    return plugtorch.nn.functional


_PT_FUNCTIONAL = None


def F(m):
    """``torch.nn.functional`` for torch, ``plugtorch.nn.functional`` for plugtorch."""
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
