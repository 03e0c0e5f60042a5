"""Shared helpers for the built-in sample tables."""
from __future__ import annotations

import numpy as np

from ..sample import Sample, Waiver, is_torch

__all__ = ["Sample", "Waiver", "is_torch", "F", "np", "empty", "scalar", "with_nans"]


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


def with_nans(a, *flat_positions):
    """A float64 copy of ``a`` with NaN at the given flat positions (max-pool windows whose
    maximum is NaN: torch routes their gradient, and their index, to the last NaN)."""
    a = np.array(a, dtype=np.float64)
    a.reshape(-1)[list(flat_positions)] = np.nan
    return a
