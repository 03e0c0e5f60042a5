"""Reductions: sum, mean, amax/amin, argmax/argmin, max/min (values and indices), logsumexp, any/all.

Each op function normalises ``dim`` to ``axes`` (a sorted tuple of non-negative ints,
or None for all) before dispatch, so kernels and decompositions see one form.
"""
from __future__ import annotations

import builtins
from ..dispatch import call_op, call_op1, record, wrap
from ..dtypes import int64
from ..grad_mode import _state as _grad
from ..return_types import return_type
from ..optable import TABLE, composite, op
from ..tensor import Tensor, _wrap_dim
from ._args import alias, count, kept_shape, normalize_dims
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


@op(primitive="sum", derivative=_expand_back, exposed=_EVERYWHERE,
    dtypes="bool and integers sum as int64 unless dtype is given")
def sum(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    """Sum over dims (all when dim is None); ``axis``/``keepdims`` are NumPy-style aliases."""
    if axis is not None or keepdims is not None:
        dim, keepdim = alias("sum", "dim", dim, "axis", axis), alias("sum", "keepdim", keepdim,
                                                                      "keepdims", keepdims, False)
    axes = normalize_dims(dim, input.ndim)
    if dtype is None:
        dtype = input.dtype if input.dtype.is_floating_point else int64
    return call_op1("sum", input, {"axes": axes, "keepdims": keepdim, "dtype": dtype})


def _mean(input, *, axes, keepdims):
    return sum(input, axes, keepdims) / count(input.shape, axes)


def _mean_rule(ctx, g):
    return _expand_back(ctx, g) / count(ctx.meta[0][0], ctx.attrs["axes"])


@op(decompose=_mean, derivative=_mean_rule, exposed=_EVERYWHERE)
def mean(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    """Mean over dims (floating input, or pass dtype)."""
    dim, keepdim = _aliases("mean", dim, keepdim, axis, keepdims)
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating point or "
            f"complex dtype. Got: {input.dtype.name.capitalize()}"
        )
    return call_op("mean", (input,), {"axes": normalize_dims(dim, input.ndim), "keepdims": keepdim})


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


def _extreme(kind, x, dim, keepdim):
    axes = normalize_dims(dim, x.ndim)
    if x.numel() == 0:
        if axes is None or builtins.any(x.shape[a] == 0 for a in axes):
            raise IndexError(
                f"{kind}(): Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument."
                if axes is None else
                f"{kind}(): Expected reduction dim {axes[0]} to have non-zero size."
            )
        # reducing non-empty dims of an empty tensor: an empty result (kernels may not allow it)
        shape = kept_shape(x.shape, axes) if keepdim else tuple(
            s for i, s in enumerate(x.shape) if i not in axes)
        attrs = {"axes": axes, "keepdims": keepdim}
        out = wrap(x._backend.primitives["zeros"](shape, x.dtype), x._backend)
        if x.requires_grad and _grad.enabled:
            record(out, TABLE[kind], (x,), attrs)
        return out
    return call_op1(kind, x, {"axes": axes, "keepdims": keepdim})


@op(primitive="max", derivative=_extreme_rule, save=("inputs", "output"), exposed=_EVERYWHERE)
def amax(input, dim=(), keepdim=False, *, axis=None, keepdims=None):
    """Max over dims (all by default); tied maxima share the gradient."""
    dim, keepdim = _aliases("amax", dim, keepdim, axis, keepdims)
    return _extreme("amax", input, dim, keepdim)


@op(primitive="min", derivative=_extreme_rule, save=("inputs", "output"), exposed=_EVERYWHERE)
def amin(input, dim=(), keepdim=False, *, axis=None, keepdims=None):
    """Min over dims (all by default); tied minima share the gradient."""
    dim, keepdim = _aliases("amin", dim, keepdim, axis, keepdims)
    return _extreme("amin", input, dim, keepdim)


def _arg(kind, x, dim, keepdim):
    axis = None if dim is None else _wrap_dim(dim, x.ndim)
    if x.ndim == 0:  # dim 0 or -1 of a 0-d tensor (checked above) reduces over everything
        axis = None
    if x.numel() == 0:
        if axis is None:
            raise IndexError(f"{kind}(): Expected reduction dim to be specified for input.numel() == 0.")
        if x.shape[axis] == 0:
            raise IndexError(f"{kind}(): Expected reduction dim {axis} to have non-zero size.")
        shape = tuple(1 if i == axis else s for i, s in enumerate(x.shape)) if keepdim else tuple(
            s for i, s in enumerate(x.shape) if i != axis)
        return wrap(x._backend.primitives["zeros"](shape, int64), x._backend)
    return call_op(kind, (x,), {"axis": axis, "keepdims": keepdim if axis is not None else False})


@op(primitive="argmax", exposed=_EVERYWHERE, dtypes="-> int64")
def argmax(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """Index of the first maximum (over all elements, or along dim)."""
    dim, keepdim = _aliases("argmax", dim, keepdim, axis, keepdims)
    return _arg("argmax", input, dim, keepdim)


@op(primitive="argmin", exposed=_EVERYWHERE, dtypes="-> int64")
def argmin(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """Index of the first minimum (over all elements, or along dim)."""
    dim, keepdim = _aliases("argmin", dim, keepdim, axis, keepdims)
    return _arg("argmin", input, dim, keepdim)


def _values_and_indices(kind):
    result = max_result if kind == "max" else min_result

    def decompose(input, *, dim, keepdim):
        from .index import gather  # index builds on this module
        if input.ndim == 0:
            return result(input, wrap(input._backend.primitives["zeros"]((), int64), input._backend))
        idx = _arg("arg" + kind, input, dim, True)
        values = gather(input, dim, idx)
        if not keepdim:
            values, idx = values.squeeze(dim), idx.squeeze(dim)
        return result(values, idx)
    decompose.__name__ = f"_{kind}_dim"
    return decompose


def _max_min(kind, x, dim, keepdim, other):
    if isinstance(dim, Tensor) and other is None:
        other, dim = dim, None
    if other is not None:
        return (maximum if kind == "max" else minimum)(x, other)
    if dim is None:
        return _extreme("a" + kind, x, None, False)
    d = _wrap_dim(dim, x.ndim) if x.ndim else 0
    if x.ndim and x.shape[d] == 0:
        raise IndexError(f"{kind}(): Expected reduction dim {d} to have non-zero size.")
    return call_op(kind, (x,), {"dim": d, "keepdim": keepdim})


@op(decompose=_values_and_indices("max"), multi_output=True, exposed=_EVERYWHERE)
def max(input, dim=None, keepdim=False, *, other=None, axis=None, keepdims=None):
    """``max(x)``: the largest value; ``max(x, dim)``: (values, indices); ``max(x, other)``: maximum."""
    dim, keepdim = _aliases("max", dim, keepdim, axis, keepdims)
    return _max_min("max", input, dim, keepdim, other)


@op(decompose=_values_and_indices("min"), multi_output=True, exposed=_EVERYWHERE)
def min(input, dim=None, keepdim=False, *, other=None, axis=None, keepdims=None):
    """``min(x)``: the smallest value; ``min(x, dim)``: (values, indices); ``min(x, other)``: minimum."""
    dim, keepdim = _aliases("min", dim, keepdim, axis, keepdims)
    return _max_min("min", input, dim, keepdim, other)


aminmax_result = return_type("aminmax", ["min", "max"])


def _aminmax(input, *, dim, keepdim):
    dims = () if dim is None else dim
    return aminmax_result(amin(input, dims, keepdim), amax(input, dims, keepdim))


@op(decompose=_aminmax, multi_output=True, exposed=_EVERYWHERE)
def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) over all elements, or along ``dim``, in one call."""
    if input.numel() == 0 and (dim is None or input.shape[_wrap_dim(dim, input.ndim)] == 0):
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                           "operation has no identity.")
    if dim is not None:
        dim = _wrap_dim(dim, input.ndim)
    return call_op("aminmax", (input,), {"dim": dim, "keepdim": keepdim})


def _logsumexp(input, *, axes, keepdims):
    m = amax(input, axes, keepdim=True).detach()
    m = where(isinf(m), 0.0, m)  # a max of +-inf would give inf - inf = nan; shift by 0 there
    out = (input - m).exp().sum(axes, keepdim=True).log() + m
    return out if keepdims else out.reshape(
        tuple(s for i, s in enumerate(out.shape) if axes is not None and i not in axes))


def _logsumexp_rule(ctx, g):
    x, out = ctx.saved[0], ctx.output
    if not ctx.attrs["keepdims"]:
        kept = kept_shape(ctx.meta[0][0], ctx.attrs["axes"])
        g, out = g.reshape(kept), out.reshape(kept)
    return g * (x - out).exp()


@op(decompose=_logsumexp, derivative=_logsumexp_rule, save=("inputs", "output"), exposed=_EVERYWHERE)
def logsumexp(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """log(sum(exp(x))) over dims, computed after subtracting the max."""
    dim, keepdim = _aliases("logsumexp", dim, keepdim, axis, keepdims)
    if dim is None:
        raise TypeError("logsumexp() missing required argument 'dim' (pass dim=() to reduce over "
                        "every dim)")
    return call_op("logsumexp", (input,), {"axes": normalize_dims(dim, input.ndim), "keepdims": keepdim})


@composite(exposed=_EVERYWHERE)
def any(input, dim=None, keepdim=False, *, axis=None, keepdims=None):
    """True where some element along ``dim`` is non-zero (bool result)."""
    dim, keepdim = _aliases("any", dim, keepdim, axis, keepdims)
    return gt(sum(ne(input, 0), normalize_dims(dim, input.ndim), keepdim), 0)


@composite(exposed=_EVERYWHERE)
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
