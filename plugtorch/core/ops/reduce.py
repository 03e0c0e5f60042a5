"""Reductions: sum, mean, amax/amin, argmax/argmin, max/min (values and indices), logsumexp, any/all.

Each op binds torch's ``dim`` to ``axes`` (a sorted tuple of non-negative ints, or None for
all) before dispatch, so kernels and decompositions see one form.
"""
from __future__ import annotations

import builtins

from ..dispatch import wrap
from ..dtypes import float32, int64
from ..optable import op, public
from ..return_types import return_type
from ..tensor import Tensor, _wrap_dim
from ._args import alias, count, kept_shape, normalize_dims
from ._jvp import linear
from .elementwise import eq, gt, isinf, maximum, minimum, ne, where

_EVERYWHERE = ("plugtorch", "Tensor")

# torch.return_types names: the classes are called like the ops
max_result = return_type("max", ["values", "indices"])
min_result = return_type("min", ["values", "indices"])


def _expand_back(ctx, g):
    """Broadcast a reduced gradient back over the reduced axes."""
    shape = ctx.meta[0][0]
    attrs = ctx.attrs
    # a reduction over every axis gives a 0-d gradient, which expands as it is
    if not attrs["keepdims"] and attrs["axes"] is not None:
        g = g.reshape(kept_shape(shape, attrs["axes"]))
    return g.expand(shape)


def _sum_args(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:  # (checked here: sum runs in every loss)
        dim, keepdim = _aliases("sum", dim, keepdim, axis, keepdims)
    if dtype is None:
        dtype = input.dtype if input.dtype.is_floating_point or input.dtype.is_complex else int64
    return (input,), {"axes": normalize_dims(dim, input.ndim), "keepdims": keepdim, "dtype": dtype}


@op(primitive="sum", bind=_sum_args, derivative=_expand_back, exposed=_EVERYWHERE, jvp=linear("sum"),
    dtypes="bool and integers sum as int64 unless dtype is given")
def sum(input, *, axes, keepdims, dtype):
    """Sum over dims (all when dim is None); ``axis``/``keepdims`` are NumPy-style aliases."""


def _mean_args(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    if axis is not None or keepdims is not None:
        dim, keepdim = _aliases("mean", dim, keepdim, axis, keepdims)
    if dtype is not None:
        input = input.to(dtype)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating point or "
            f"complex dtype. Got: {input.dtype.name.capitalize()}"
        )
    return (input,), {"axes": normalize_dims(dim, input.ndim), "keepdims": keepdim}


def _mean_rule(ctx, g):
    return _expand_back(ctx, g) / count(ctx.meta[0][0], ctx.attrs["axes"])


@op(bind=_mean_args, derivative=_mean_rule, exposed=_EVERYWHERE, jvp=linear("mean"))
def mean(input, *, axes, keepdims):
    """Mean over dims (floating input, or pass dtype)."""
    if input.dtype.is_floating_point and input.dtype.itemsize == 2:
        # float16/bfloat16: summed and divided in float32, rounded once, as torch's
        return (sum(input, axes, keepdims, dtype=float32) / count(input.shape, axes)).to(input.dtype)
    return sum(input, axes, keepdims) / count(input.shape, axes)


def _extreme_rule(ctx, g):
    # amax/amin: the gradient is shared evenly between tied extremes (torch semantics).
    x = ctx.saved[0]
    axes, keepdims = ctx.attrs["axes"], ctx.attrs["keepdims"]
    shape = ctx.meta[0][0]
    out = ctx.output if keepdims else ctx.output.reshape(kept_shape(shape, axes))
    if not keepdims:
        g = g.reshape(kept_shape(shape, axes))
    mask = (x == out).to(g.dtype)
    return mask * (g / sum(mask, axes, keepdim=True))


def _extreme_args(kind):
    def bind(input, dim=(), keepdim=False, *, axis=None, keepdims=None):
        dim, keepdim = _aliases(kind, dim, keepdim, axis, keepdims)
        axes = normalize_dims(dim, input.ndim)
        if input.numel() == 0 and (axes is None or builtins.any(input.shape[a] == 0 for a in axes)):
            raise IndexError(
                f"{kind}(): Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument."
                if axes is None else
                f"{kind}(): Expected reduction dim {axes[0]} to have non-zero size."
            )
        return (input,), {"axes": axes, "keepdims": keepdim}
    return bind


@op(primitive="max", bind=_extreme_args("amax"), derivative=_extreme_rule, save=("inputs", "output"),
    exposed=_EVERYWHERE)
def amax(input, *, axes, keepdims):
    """Max over dims (all by default); tied maxima share the gradient."""


@op(primitive="min", bind=_extreme_args("amin"), derivative=_extreme_rule, save=("inputs", "output"),
    exposed=_EVERYWHERE)
def amin(input, *, axes, keepdims):
    """Min over dims (all by default); tied minima share the gradient."""


def _arg_args(kind):
    def bind(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
        dim, keepdim = _aliases(kind, dim, keepdim, axis, keepdims)
        axis = None if dim is None else _wrap_dim(dim, input.ndim)
        if input.ndim == 0:  # dim 0 or -1 of a 0-d tensor (checked above) reduces over everything
            axis = None
        if input.numel() == 0:
            if axis is None:
                raise IndexError(f"{kind}(): Expected reduction dim to be specified for input.numel() == 0.")
            if input.shape[axis] == 0:
                raise IndexError(f"{kind}(): Expected reduction dim {axis} to have non-zero size.")
        return (input,), {"axis": axis, "keepdims": keepdim if axis is not None else False}
    return bind


@op(primitive="argmax", bind=_arg_args("argmax"), exposed=_EVERYWHERE, dtypes="-> int64")
def argmax(input, *, axis, keepdims):
    """Index of the first maximum (over all elements, or along dim)."""


@op(primitive="argmin", bind=_arg_args("argmin"), exposed=_EVERYWHERE, dtypes="-> int64")
def argmin(input, *, axis, keepdims):
    """Index of the first minimum (over all elements, or along dim)."""


def _values_and_indices(kind):
    result = max_result if kind == "max" else min_result
    arg = argmax if kind == "max" else argmin

    def values_and_indices(input, *, dim, keepdim):
        from .index import gather  # index builds on this module
        if input.ndim == 0:
            return result(input, wrap(input._backend.primitives["zeros"]((), int64), input._backend))
        idx = arg(input, dim, True)
        values = gather(input, dim, idx)
        if not keepdim:
            values, idx = values.squeeze(dim), idx.squeeze(dim)
        return result(values, idx)
    values_and_indices.__doc__ = f"(values, indices) of the {kind}imum along ``dim``."
    return values_and_indices


# max and min as ops: the values and indices along a dim (their public functions, below, also
# serve torch's other overloads: max(x) is amax, max(x, other) is maximum)
max_along = op("max", multi_output=True)(_values_and_indices("max"))
min_along = op("min", multi_output=True)(_values_and_indices("min"))


def _max_min(kind, x, dim, keepdim, other):
    if isinstance(dim, Tensor) and other is None:
        other, dim = dim, None
    if other is not None:
        return (maximum if kind == "max" else minimum)(x, other)
    if dim is None:
        return (amax if kind == "max" else amin)(x)
    d = _wrap_dim(dim, x.ndim) if x.ndim else 0
    if x.ndim and x.shape[d] == 0:
        raise IndexError(f"{kind}(): Expected reduction dim {d} to have non-zero size.")
    return (max_along if kind == "max" else min_along)(x, dim=d, keepdim=keepdim)


@public("plugtorch", "Tensor")
def max(input, dim=None, keepdim=False, *, other=None, axis=None, keepdims=None):
    """``max(x)``: the largest value; ``max(x, dim)``: (values, indices); ``max(x, other)``: maximum."""
    dim, keepdim = _aliases("max", dim, keepdim, axis, keepdims)
    return _max_min("max", input, dim, keepdim, other)


@public("plugtorch", "Tensor")
def min(input, dim=None, keepdim=False, *, other=None, axis=None, keepdims=None):
    """``min(x)``: the smallest value; ``min(x, dim)``: (values, indices); ``min(x, other)``: minimum."""
    dim, keepdim = _aliases("min", dim, keepdim, axis, keepdims)
    return _max_min("min", input, dim, keepdim, other)


aminmax_result = return_type("aminmax", ["min", "max"])


def _aminmax_args(input, *, dim=None, keepdim=False):
    if input.numel() == 0 and (dim is None or input.shape[_wrap_dim(dim, input.ndim)] == 0):
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                           "operation has no identity.")
    return (input,), {"dim": None if dim is None else _wrap_dim(dim, input.ndim), "keepdim": keepdim}


@op(bind=_aminmax_args, multi_output=True, exposed=_EVERYWHERE)
def aminmax(input, *, dim, keepdim):
    """(min, max) over all elements, or along ``dim``, in one call."""
    dims = () if dim is None else dim
    return aminmax_result(amin(input, dims, keepdim), amax(input, dims, keepdim))


def _logsumexp_args(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    dim, keepdim = _aliases("logsumexp", dim, keepdim, axis, keepdims)
    if dim is None:
        raise TypeError("logsumexp() missing required argument 'dim' (pass dim=() to reduce over "
                        "every dim)")
    return (input,), {"axes": normalize_dims(dim, input.ndim), "keepdims": keepdim}


def _logsumexp_rule(ctx, g):
    x, out = ctx.saved[0], ctx.output
    if not ctx.attrs["keepdims"]:
        kept = kept_shape(ctx.meta[0][0], ctx.attrs["axes"])
        g, out = g.reshape(kept), out.reshape(kept)
    return g * (x - out).exp()


@op(bind=_logsumexp_args, derivative=_logsumexp_rule, save=("inputs", "output"), exposed=_EVERYWHERE)
def logsumexp(input, *, axes, keepdims):
    """log(sum(exp(x))) over dims, computed after subtracting the max."""
    m = amax(input, axes, keepdim=True).detach()
    m = where(isinf(m), 0.0, m)  # a max of +-inf would give inf - inf = nan; shift by 0 there
    out = (input - m).exp().sum(axes, keepdim=True).log() + m
    return out if keepdims else out.reshape(
        tuple(s for i, s in enumerate(out.shape) if axes is not None and i not in axes))


@op(exposed=_EVERYWHERE)
def any(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """True where some element along ``dim`` is non-zero (bool result)."""
    dim, keepdim = _aliases("any", dim, keepdim, axis, keepdims)
    return gt(sum(ne(input, 0), normalize_dims(dim, input.ndim), keepdim), 0)


@op(exposed=_EVERYWHERE)
def all(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """True where every element along ``dim`` is non-zero (bool result)."""
    dim, keepdim = _aliases("all", dim, keepdim, axis, keepdims)
    return eq(sum(eq(input, 0), normalize_dims(dim, input.ndim), keepdim), 0)


def _aliases(op, dim, keepdim, axis, keepdims):
    """``dim``/``keepdim`` from torch's NumPy-style aliases ``axis``/``keepdims``, when given."""
    if axis is None and keepdims is None:
        return dim, keepdim
    return (alias(op, "dim", dim, "axis", axis),
            alias(op, "keepdim", keepdim, "keepdims", keepdims, False))
