"""Reductions beyond sum and max: prod, var/std, norm, cumsum.

prod and cumsum run their backend primitive; var, std and norm are compositions. Each
carries its own derivative (norm's picks PyTorch's subgradient at zero), and each binds
torch's ``dim`` (with the NumPy-style ``axis``/``keepdims``) and ``dtype`` to the
``axes``/``axis``, ``keepdims`` and accumulation dtype its kernels take.
"""
from __future__ import annotations

import math
import warnings

from ..dtypes import int64
from ..optable import Done, op, public
from ..tensor import Tensor, _wrap_dim
from . import elementwise as ew
from ._args import alias, count, kept_shape, normalize_dims
from .movement import flip
from .reduce import amax, amin
from .reduce import sum as _sum

_EVERYWHERE = ("plugtorch", "Tensor")


def _tensor_arg(op, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(x).__name__}")
    return x


def _accumulate_dtype(x, dtype):
    """torch's rule for sum-like reductions: integers and bool accumulate in int64."""
    if dtype is not None:
        return dtype
    return x.dtype if x.dtype.is_floating_point or x.dtype.is_complex else int64


# -- prod ------------------------------------------------------------------------------

def _prod_rule(ctx, g):
    x = ctx.saved[0]
    axes = ctx.attrs["axes"]
    if not ctx.attrs["keepdims"]:
        g = g.reshape(kept_shape(ctx.meta[0][0], axes))
    # d prod / d x_i is the product of the other entries. Dividing the product by x_i fails
    # at zeros, so the product of the non-zero entries is divided instead and times the
    # product of the *other zero* entries, written so that its own derivative is right too
    # (double backward): with one zero x_k that factor is x_k for i != k; with two (k, l)
    # it is x_l for i = k; with more it is 0 to second order.
    zero = ew.eq(x, 0)
    nonzero = ew.where(zero, 1.0, x)
    base = prod(nonzero, axes, keepdim=True) / nonzero
    n_zero = _sum(zero, axes, keepdim=True)
    zeros_sum = _sum(ew.where(zero, x, 0.0), axes, keepdim=True)  # the value is 0, its gradient is not
    other_zeros = ew.where(ew.eq(n_zero, 0), 1.0,
                           ew.where(ew.eq(n_zero, 1), ew.where(zero, 1.0, zeros_sum),
                                    ew.where(ew.eq(n_zero, 2), ew.where(zero, zeros_sum - x, 0.0), 0.0)))
    return g * base * other_zeros


def _prod_args(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    x = _tensor_arg("prod", input)
    dim, keepdim = _aliases("prod", dim, keepdim, axis, keepdims)
    out_dtype = _accumulate_dtype(x, dtype)
    if x.dtype is not out_dtype:
        x = x.to(out_dtype)
    return (x,), {"axes": normalize_dims(dim, x.ndim), "keepdims": keepdim, "dtype": out_dtype}


@op(primitive="prod", bind=_prod_args, derivative=_prod_rule, save="inputs", exposed=_EVERYWHERE,
    dtypes="bool and integers multiply as int64 unless dtype is given")
def prod(input, *, axes, keepdims, dtype):
    """Product over ``dim`` (an int, a tuple, or None for all); the gradient is exact at zeros."""


# -- cumsum ----------------------------------------------------------------------------

def _cumsum_rule(ctx, g):
    d = ctx.attrs["axis"]
    return flip(cumsum(flip(g, (d,)), d), (d,))


def _cumsum_args(input, dim=None, *, dtype=None, axis=None):
    x = _tensor_arg("cumsum", input)
    dim = _required_dim("cumsum", dim, axis)
    out_dtype = _accumulate_dtype(x, dtype)
    if x.dtype is not out_dtype:
        x = x.to(out_dtype)
    d = _wrap_dim(dim, x.ndim)
    if x.ndim == 0:  # the primitive scans an axis: a 0-d input runs as one of shape (1,)
        return Done(cumsum(x.reshape(1), 0, dtype=out_dtype).reshape(()))
    return (x,), {"axis": d, "dtype": out_dtype}


@op(primitive="cumsum", bind=_cumsum_args, derivative=_cumsum_rule, exposed=_EVERYWHERE,
    dtypes="bool and integers accumulate as int64 unless dtype is given")
def cumsum(input, *, axis, dtype):
    """Running sum along ``dim``."""


# -- var / std -------------------------------------------------------------------------

def _correction(op, dim, unbiased, correction):
    if isinstance(dim, bool):  # the legacy var(input, unbiased) form
        dim, unbiased = None, dim
    if correction is not None and unbiased is not None:
        raise RuntimeError(f"{op}: cannot specify both 'unbiased' and 'correction'; use correction")
    if correction is None:
        correction = 0 if unbiased is False else 1
    return dim, correction


def _var_args(op_name):
    def bind(input, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, keepdims=None):
        x = _floating(op_name, input)
        dim, keepdim = _aliases(op_name, dim, keepdim, axis, keepdims)
        dim, correction = _correction(op_name, dim, unbiased, correction)
        return (x,), {"axes": normalize_dims(dim, x.ndim), "correction": correction, "keepdims": keepdim}
    return bind


def _centred_grad(ctx, g):
    """g spread back over the reduced axes, times (x - mean) / (N - correction)."""
    x = ctx.saved[0]
    axes = ctx.attrs["axes"]
    if not ctx.attrs["keepdims"]:
        g = g.reshape(kept_shape(ctx.meta[0][0], axes))
    n = max(0, count(x.shape, axes) - ctx.attrs["correction"])
    return g * (x - x.mean(axes, keepdim=True)) / n, axes


def _var_rule(ctx, g):
    return _centred_grad(ctx, g)[0] * 2


@op(bind=_var_args("var"), derivative=_var_rule, save="inputs", exposed=_EVERYWHERE)
def var(input, *, axes, correction, keepdims):
    """Variance over dims with Bessel's correction (correction=1, or unbiased=False for 0)."""
    n = count(input.shape, axes)
    if n - correction <= 0 and input.numel():
        warnings.warn("var()/std(): degrees of freedom is <= 0. Correction should be strictly less than "
                      "the reduction factor (input numel divided by output numel).", stacklevel=4)
    d = input - input.mean(axes, keepdim=True)
    # torch divides by max(0, N - correction): inf or nan when that is 0, never negative.
    return _sum(d * d, axes, keepdims) / max(0, n - correction)


def _std_rule(ctx, g):
    # torch's: 0 where the deviation is 0 (a constant slice), not its 0/0; the safe denominator
    # keeps double backward finite there
    spread, axes = _centred_grad(ctx, g)
    out = ctx.output if ctx.attrs["keepdims"] else ctx.output.reshape(kept_shape(ctx.meta[0][0], axes))
    zero = ew.eq(out, 0)
    return ew.where(zero, 0.0, spread / ew.where(zero, 1.0, out))


@op(bind=_var_args("std"), derivative=_std_rule, save=("inputs", "output"), exposed=_EVERYWHERE)
def std(input, *, axes, correction, keepdims):
    """Standard deviation: sqrt(var) with the same arguments."""
    return ew.sqrt(var(input, axes, keepdim=keepdims, correction=correction))


@public("plugtorch")
def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None,
             keepdims=None):
    """(var, mean) over dims, with var's arguments."""
    x = _floating("var_mean", input)
    dim, keepdim = _aliases("var_mean", dim, keepdim, axis, keepdims)
    dim, correction = _correction("var_mean", dim, unbiased, correction)
    axes = normalize_dims(dim, x.ndim)
    return var(x, axes, keepdim=keepdim, correction=correction), x.mean(axes, keepdim)


@public("plugtorch")
def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None,
             keepdims=None):
    """(std, mean) over dims, with std's arguments."""
    x = _floating("std_mean", input)
    dim, keepdim = _aliases("std_mean", dim, keepdim, axis, keepdims)
    dim, correction = _correction("std_mean", dim, unbiased, correction)
    axes = normalize_dims(dim, x.ndim)
    return std(x, axes, keepdim=keepdim, correction=correction), x.mean(axes, keepdim)


def _aliases(op, dim, keepdim, axis, keepdims):
    if axis is None and keepdims is None:
        return dim, keepdim
    return (alias(op, "dim", dim, "axis", axis),
            alias(op, "keepdim", keepdim, "keepdims", keepdims, False))


def _required_dim(op, dim, axis):
    dim = alias(op, "dim", dim, "axis", axis)
    if dim is None:
        raise TypeError(f"{op}() missing required argument 'dim'")
    return dim


def _floating(op, x):
    x = _tensor_arg(op, x)
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}(): std and var only support floating point and complex dtypes, "
                           f"got {x.dtype.name}; convert the input with .float()")
    return x


# -- norm ------------------------------------------------------------------------------

def _norm_args(input, p="fro", dim=None, keepdim=False, dtype=None):
    x = _tensor_arg("norm", input)
    if dtype is not None:
        x = x.to(dtype)
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"norm(): input dtype should be either floating point or complex. Got "
                           f"{x.dtype.name} instead; convert the input with .float()")
    if p is None or p == "fro":
        p = 2
    elif isinstance(p, str):
        raise RuntimeError(f"norm(): p={p!r} is not supported; use a number, inf, -inf or 'fro'")
    return (x,), {"p": float(p), "axes": normalize_dims(dim, x.ndim), "keepdims": keepdim}


def _norm_rule(ctx, g):
    x, out = ctx.saved[0], ctx.output
    p, axes = ctx.attrs["p"], ctx.attrs["axes"]
    if not ctx.attrs["keepdims"]:
        kept = kept_shape(ctx.meta[0][0], axes)
        g, out = g.reshape(kept), out.reshape(kept)
    if p == 0:
        return ew.mul(x, 0.0)
    if p == 1:
        return g * ew.sign(x)
    if p in (math.inf, -math.inf):
        # ties share the gradient evenly, as for amax
        mask = ew.eq(ew.abs(x), out).to(x.dtype)
        return g * ew.sign(x) * mask / _sum(mask, axes, keepdim=True)
    # torch's subgradient at a zero norm is 0; a safe denominator keeps double backward finite
    zero = ew.eq(out, 0)
    safe = ew.where(zero, 1.0, out)
    if p == 2:
        return ew.where(zero, 0.0, g * x / safe)
    a = ew.abs(x)
    if p < 1:  # |x|^(p - 1) is inf at x = 0, where torch's subgradient is 0 (not sign(0) * inf)
        zero = ew.logical_or(zero, ew.eq(x, 0))
        a = ew.where(zero, 1.0, a)
    return ew.where(zero, 0.0, g * ew.sign(x) * ew.pow(a / safe, p - 1))


@op(bind=_norm_args, derivative=_norm_rule, save=("inputs", "output"), exposed=_EVERYWHERE)
def norm(input, *, p, axes, keepdims):
    """Vector p-norm over dims: p = 2 ('fro'), 1, inf, -inf, 0 or any other number."""
    a = ew.abs(input)
    if p == math.inf:
        return amax(a, axes, keepdims)
    if p == -math.inf:
        return amin(a, axes, keepdims)
    if p == 0:
        return _sum(ew.ne(input, 0).to(input.dtype), axes, keepdims)
    if p == 1:
        return _sum(a, axes, keepdims)
    if p == 2:
        return ew.sqrt(_sum(input * input, axes, keepdims))
    return ew.pow(_sum(ew.pow(a, p), axes, keepdims), 1.0 / p)
