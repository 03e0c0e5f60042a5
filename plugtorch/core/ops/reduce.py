"""Reductions: sum, mean, max/min (values, indices), argmax/argmin, and friends."""
from __future__ import annotations

import builtins
from collections import namedtuple

from ..dispatch import record, wrap
from ..dtypes import int64
from ..grad_mode import _state as _grad
from ..registry import OpDef
from ..tensor import Tensor, _wrap_dim
from ._composite import composite_op

OPS: list[OpDef] = []

values_indices = namedtuple("values_indices", ["values", "indices"])
max_result = namedtuple("max", ["values", "indices"])
min_result = namedtuple("min", ["values", "indices"])


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
    return (_wrap_dim(dim, ndim),) if ndim else None


def _kept_shape(shape, axes):
    if axes is None:
        return (1,) * len(shape)
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _expand_back(ctx, g):
    """Broadcast a reduced gradient back over the reduced axes."""
    shape, _ = ctx.meta[0]
    axes, keepdim = ctx.attrs[:2]
    if not keepdim:
        g = g.reshape(_kept_shape(shape, axes))
    return g.expand(shape)


def sum(x, dim=None, keepdim=False, *, dtype=None):
    axes = normalize_dims(dim, x.ndim)
    if dtype is None and not x.dtype.is_floating_point:
        dtype = int64  # torch sums bool and integers as int64
    out_dtype = dtype or x.dtype
    b = x._backend
    out = wrap(b.kernels["sum"](x._data, axes, keepdim, out_dtype), b)
    if x.requires_grad and _grad.enabled:
        record(out, "sum", _expand_back, (x,), attrs=(axes, keepdim))
    return out


OPS.append(OpDef("sum", derivative=_expand_back, doc="Sum over dims."))


def _count(x, axes):
    n = 1
    for i, s in enumerate(x._data.shape):
        if axes is None or i in axes:
            n *= s
    return n


@composite_op(OPS)
def mean(x, dim=None, keepdim=False, *, dtype=None):
    """Mean over dims (floating input, or pass dtype)."""
    if dtype is not None:
        x = x.to(dtype)
    if not x.dtype.is_floating_point:
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating point or "
            f"complex dtype. Got: {x.dtype.name.capitalize()}"
        )
    axes = normalize_dims(dim, x.ndim)
    return sum(x, axes, keepdim) / _count(x, axes)


def _extreme_rule(ctx, g):
    # amax/amin: the gradient is shared evenly between tied extremes (torch semantics).
    x = ctx.saved[0]
    axes, keepdim = ctx.attrs
    shape = ctx.meta[0][0]
    out = ctx.output if keepdim else ctx.output.reshape(_kept_shape(shape, axes))
    if not keepdim:
        g = g.reshape(_kept_shape(shape, axes))
    mask = (x == out).to(g.dtype)
    return mask * (g / sum(mask, axes, keepdim=True))


def _extreme(kind, x, dim, keepdim):
    axes = normalize_dims(dim, x.ndim)
    if x.numel() == 0 and (axes is None or builtins.any(x.shape[a] == 0 for a in axes)):
        raise IndexError(
            f"{kind}(): Expected reduction dim to be specified for input.numel() == 0. "
            "Specify the reduction dim with the 'dim' argument."
            if axes is None else
            f"{kind}(): Expected reduction dim {axes[0]} to have non-zero size."
        )
    b = x._backend
    if x.numel() == 0:
        # reducing non-empty dims of an empty tensor: an empty result (the primitive may not allow it)
        shape = _kept_shape(x.shape, axes) if keepdim else tuple(
            s for i, s in enumerate(x.shape) if i not in axes)
        out = wrap(b.kernels["zeros"](shape, x.dtype), b)
    else:
        out = wrap(b.kernels[kind[1:]](x._data, axes, keepdim), b)
    if x.requires_grad and _grad.enabled:
        record(out, kind, _extreme_rule, (x,), saved=(x,), save_output=True, attrs=(axes, keepdim))
    return out


def amax(x, dim=(), keepdim=False):
    return _extreme("amax", x, dim, keepdim)


def amin(x, dim=(), keepdim=False):
    return _extreme("amin", x, dim, keepdim)


OPS.append(OpDef("amax", derivative=_extreme_rule, save=("inputs", "output"), doc="Max over dims."))
OPS.append(OpDef("amin", derivative=_extreme_rule, save=("inputs", "output"), doc="Min over dims."))


def _arg(kind, x, dim, keepdim):
    axis = None if dim is None else _wrap_dim(dim, x.ndim) if x.ndim else None
    b = x._backend
    if x.numel() == 0:
        if axis is None:
            raise IndexError(f"{kind}(): Expected reduction dim to be specified for input.numel() == 0.")
        if x.shape[axis] == 0:
            raise IndexError(f"{kind}(): Expected reduction dim {axis} to have non-zero size.")
        shape = tuple(1 if i == axis else s for i, s in enumerate(x.shape)) if keepdim else tuple(
            s for i, s in enumerate(x.shape) if i != axis)
        return wrap(b.kernels["zeros"](shape, int64), b)
    return wrap(b.kernels[kind](x._data, axis, keepdim if axis is not None else False), b)


def argmax(x, dim=None, keepdim=False):
    return _arg("argmax", x, dim, keepdim)


def argmin(x, dim=None, keepdim=False):
    return _arg("argmin", x, dim, keepdim)


def _max_min(kind, x, dim, keepdim, other):
    if isinstance(dim, Tensor) and other is None:
        other, dim = dim, None
    if other is not None:
        from .elementwise import maximum, minimum
        return (maximum if kind == "max" else minimum)(x, other)
    if dim is None:
        return _extreme("a" + kind, x, None, False)
    d = _wrap_dim(dim, x.ndim) if x.ndim else 0
    if x.ndim == 0:
        return (max_result if kind == "max" else min_result)(x, wrap(
            x._backend.kernels["zeros"]((), int64), x._backend))
    if x.shape[d] == 0:
        raise IndexError(f"{kind}(): Expected reduction dim {d} to have non-zero size.")
    idx = _arg("arg" + kind, x, d, True)
    from .index import gather
    values = gather(x, d, idx)
    if not keepdim:
        values, idx = values.squeeze(d), idx.squeeze(d)
    return (max_result if kind == "max" else min_result)(values, idx)


OPS.append(OpDef("argmax", doc="Index of the first maximum (over all elements, or along dim)."))
OPS.append(OpDef("argmin", doc="Index of the first minimum (over all elements, or along dim)."))
OPS.append(OpDef("max", doc="max(x): the largest value; max(x, dim): (values, indices); "
                        "max(x, other): maximum."))
OPS.append(OpDef("min", doc="min(x): the smallest value; min(x, dim): (values, indices); "
                        "min(x, other): minimum."))


def max(x, dim=None, keepdim=False, *, other=None):
    """``max(x)``: the largest value; ``max(x, dim)``: (values, indices); ``max(x, y)``: maximum."""
    return _max_min("max", x, dim, keepdim, other)


def min(x, dim=None, keepdim=False, *, other=None):
    return _max_min("min", x, dim, keepdim, other)


@composite_op(OPS)
def logsumexp(x, dim, keepdim=False):
    """log(sum(exp(x))) over dims, computed after subtracting the max."""
    axes = normalize_dims(dim, x.ndim)
    m = amax(x, axes, keepdim=True).detach()
    # A max of +-inf would give inf - inf = nan; shift by 0 there instead.
    from .elementwise import where, isinf
    m = where(isinf(m), 0.0, m)
    out = (x - m).exp().sum(axes, keepdim=True).log() + m
    return out if keepdim else out.reshape(tuple(s for i, s in enumerate(out.shape) if axes is not None and i not in axes))


def any(input, dim=None, keepdim=False):
    """True where some element along ``dim`` is non-zero (bool result)."""
    from .elementwise import gt, ne
    return gt(sum(ne(input, 0), normalize_dims(dim, input.ndim), keepdim), 0)


def all(input, dim=None, keepdim=False):
    """True where every element along ``dim`` is non-zero (bool result)."""
    from .elementwise import eq
    return eq(sum(eq(input, 0), normalize_dims(dim, input.ndim), keepdim), 0)


OPS.append(OpDef("any", decompose=any, doc="True where some element along dim is non-zero."))
OPS.append(OpDef("all", decompose=all, doc="True where every element along dim is non-zero."))
