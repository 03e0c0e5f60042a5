"""Argument normalisation shared by the op functions: dims, shapes and pairs.

Ops normalise their arguments before dispatch, so kernels and decompositions see one
form (non-negative axes, tuples of ints).
"""
from __future__ import annotations

import builtins

from ..tensor import _wrap_dim

wrap_dim = _wrap_dim


def shape_args(shape) -> tuple:
    """``f(2, 3)`` and ``f((2, 3))`` both as ``(2, 3)``."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return tuple(map(int, shape))


def normalize_dims(dim, ndim: int):
    """``dim`` (None, int or sequence) as a sorted tuple of non-negative axes, or None for all."""
    if dim is None:
        return None
    if isinstance(dim, (tuple, list)):
        if len(dim) == 0:
            return None  # torch: an empty dim list reduces over everything
        axes = tuple(sorted(_wrap_dim(d, ndim) for d in dim))
        if len(set(axes)) != len(axes):
            raise RuntimeError(f"dim {list(dim)} appears multiple times in the list of dims")
        return axes
    axis = _wrap_dim(dim, ndim)  # a 0-d tensor takes dim 0 or -1 (and nothing else), as in torch
    return (axis,) if ndim else None


def kept_shape(shape, axes) -> tuple:
    """``shape`` with the reduced ``axes`` (None: all) kept as size 1."""
    if axes is None:
        return (1,) * len(shape)
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def count(shape, axes) -> int:
    """How many elements a reduction over ``axes`` of ``shape`` combines."""
    n = 1
    for i, s in enumerate(shape):
        if axes is None or i in axes:
            n *= s
    return n


def pair(v, name: str) -> tuple:
    """An int or a 1- or 2-sequence of ints as a pair (conv and pooling arguments)."""
    if isinstance(v, builtins.int):
        return (v, v)
    v = tuple(v)
    if len(v) == 1:
        return (v[0], v[0])
    if len(v) != 2 or not all(isinstance(i, builtins.int) for i in v):
        raise ValueError(f"{name} must be an int or a pair of ints, got {v!r}")
    return v


def broadcast_shapes(*shapes) -> tuple:
    """The shape ``shapes`` broadcast to, or torch's error naming the clashing dimension."""
    ndim = builtins.max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, v in enumerate(s):
            j = ndim - len(s) + i
            if out[j] == 1:
                out[j] = v
            elif v != 1 and v != out[j]:
                raise RuntimeError(
                    f"shape mismatch: objects cannot be broadcast to a single shape; "
                    f"shapes {[list(s) for s in shapes]} are not broadcastable at dimension {j}"
                )
    return tuple(out)


_UNSET: object = object()  # "not passed", where None is a meaningful value


def alias(op: str, name: str, value, alias_name: str, alias_value, default=None):
    """torch's NumPy-style keyword aliases (``axis`` for ``dim``, ``keepdims`` for ``keepdim``):
    the value given under either name; both at once is an error, as in torch."""
    if alias_value is _UNSET or alias_value is None:
        return value
    if value is not _UNSET and value is not None and value != default and value != ():
        raise TypeError(f"{op}(): got both '{name}' and its alias '{alias_name}'; pass one")
    return alias_value
