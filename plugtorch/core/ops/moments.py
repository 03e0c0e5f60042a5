"""NaN-ignoring reductions, quantiles, covariance and integrals: nansum, nanmean, quantile,
nanquantile, cov, corrcoef, trapezoid, cumulative_trapezoid, and vander.

Each is written with ``where``, ``sort``, ``gather`` and sums, so gradients come from those:
0 at the NaNs a reduction ignores, and a quantile's split between the two sorted neighbours
it interpolates.
"""
from __future__ import annotations

import math

from ..dtypes import get_default_dtype, int64
from ..optable import public
from ..tensor import Tensor, _wrap_dim
from . import elementwise as ew
from ._args import normalize_dims
from .creation import tensor
from .shape import cat

_EVERYWHERE = ("plugtorch", "Tensor")


def _dims(input, dim):
    return None if dim is None else normalize_dims(dim, input.ndim)


@public(*_EVERYWHERE)
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """The sum with NaNs counted as 0."""
    x = ew.where(ew.isnan(input), 0.0, input) if input.dtype.is_floating_point else input
    d = _dims(input, dim)
    return x.sum(d, keepdim=keepdim, dtype=dtype) if d is not None else x.sum(dtype=dtype)


@public(*_EVERYWHERE)
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean of the elements that are not NaN (NaN where all are)."""
    if not input.dtype.is_floating_point and not (dtype is not None and dtype.is_floating_point):
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got "
                           f"{_WORDS.get(input.dtype.name, input.dtype.name)}")
    x = input if dtype is None else input.to(dtype)
    counted = ew.logical_not(ew.isnan(x))
    d = _dims(input, dim)
    if d is None:
        return nansum(x) / counted.sum()
    return nansum(x, d, keepdim) / counted.sum(d, keepdim=keepdim)


_WORDS = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
          "float16": "Half", "float32": "Float", "float64": "Double"}
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name, input, q, dim, keepdim, interpolation, ignore_nan):
    if not isinstance(input, Tensor) or input.dtype.name not in ("float32", "float64"):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if input.numel() == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest, but "
                           f"got {interpolation}")
    scalar_q = not isinstance(q, Tensor)
    qs: list[float] = [float(q)] if scalar_q else []
    if not scalar_q:
        if q.ndim > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if q.dtype is not input.dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
        qs = [float(v) for v in q.tolist()] if q.ndim else [float(q.item())]
    for v in qs:
        if not 0 <= v <= 1:
            raise RuntimeError(f"{name}() q values must be in the range [0, 1]" if not scalar_q else
                               f"{name}() q must be in the range [0, 1] but got {v:g}")
    if dim is None:
        x, d = input.reshape(-1), 0
    else:
        d = _wrap_dim(dim, input.ndim)
        x = input
    x = x.movedim(d, -1) if x.ndim else x.reshape(1)
    ordered = x.sort(-1).values  # NaN sorts last
    n = ordered.shape[-1]
    nan = ew.isnan(x)
    # torch's ranks: a slice with a NaN (quantile) or only NaNs (nanquantile) reads its last
    # sorted element, a NaN, which also takes the gradient
    if ignore_nan:
        count = ew.logical_not(nan).sum(-1, keepdim=True)
        last = count == 0
        top = (count - 1).clamp(min=0).to(input.dtype)
    else:
        last = nan.any(-1, keepdim=True)
        top = float(n - 1)
    qt = tensor(qs, dtype=input.dtype, device=input._backend.name)
    rank = qt.reshape([len(qs)] + [1] * ordered.ndim) * top
    rank = ew.where(last, float(n - 1), rank)
    if interpolation == "lower":
        rank = ew.floor(rank)
    elif interpolation == "higher":
        rank = ew.ceil(rank)
    elif interpolation == "nearest":
        rank = ew.round(rank)  # half to even, as torch's
    lo = ew.floor(rank).to(int64)
    hi = ew.ceil(rank).to(int64)
    values = ordered.unsqueeze(0).expand([len(qs)] + list(ordered.shape))
    v_lo = values.gather(-1, lo.expand(values.shape[:-1] + (1,)))
    v_hi = values.gather(-1, hi.expand(values.shape[:-1] + (1,)))
    if interpolation == "midpoint":
        out = v_lo + (v_hi - v_lo) * 0.5
    else:
        # torch's lerp: from the nearer end, so the result is exact at both
        weight = rank - lo.to(input.dtype)
        out = ew.where(weight < 0.5, v_lo + (v_hi - v_lo) * weight, v_hi - (v_hi - v_lo) * (1 - weight))
    out = out.squeeze(-1)  # (len(q), *other dims)
    if keepdim:
        if dim is None:
            out = out.reshape([len(qs)] + [1] * input.ndim)
        else:
            out = out.unsqueeze(d + 1)
    elif input.ndim == 0 and dim is not None:
        out = out.reshape(len(qs))
    return out[0] if scalar_q or q.ndim == 0 else out


@public(*_EVERYWHERE)
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles along ``dim`` (all elements when None), interpolated between sorted
    neighbours; a tensor ``q`` gives its quantiles in a new first dim. NaN where a slice has one."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


@public(*_EVERYWHERE)
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """``quantile`` of the elements that are not NaN (NaN where all are)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


@public(*_EVERYWHERE)
def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in the rows of ``input`` (a 1-D input: one
    variable), observations in the columns, with frequency and importance weights."""
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.dtype.is_floating_point:
        x = x.to(get_default_dtype())
    n = x.shape[1]
    w = None
    for name, wt in (("fweights", fweights), ("aweights", aweights)):
        if wt is None:
            continue
        if wt.ndim > 1:
            raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                               f"{wt.ndim} dimensions")
        if wt.numel() != n:
            raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the "
                               f"input but got {wt.numel()} != {n}")
        if name == "fweights" and wt.dtype.is_floating_point:
            raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with "
                               f"{_WORDS.get(wt.dtype.name)} dtype")
        if wt.numel() and bool((wt < 0).any().item()):
            raise RuntimeError(f"cov(): {name} cannot be negative")
        w = wt if w is None else w * wt
    if w is None:
        total = x.new_full((), float(n))
        avg = x.mean(1) if n else x.sum(1) * math.nan
        norm = total - correction
    else:
        w = w.to(x.dtype)
        total = w.sum()
        avg = (x * w).sum(1) / total
        if aweights is None or correction == 0:
            norm = total - correction
        else:
            norm = total - correction * (w * aweights.to(x.dtype)).sum() / total
    norm = ew.where(norm <= 0, 0.0, norm)  # torch warns and gives inf/nan: the same values
    xc = x - avg.unsqueeze(1)
    xw = xc if w is None else xc * w
    c = (xw @ xc.mT) / norm
    return c.reshape(()) if input.ndim < 2 else c


@public(*_EVERYWHERE)
def corrcoef(input):
    """Pearson correlation coefficients of the variables in the rows of ``input``, clipped to
    [-1, 1]."""
    if input.ndim > 2:
        raise RuntimeError(f"corrcoef(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = c.diagonal()
    std = ew.sqrt(d)
    return (c / std.unsqueeze(1) / std.unsqueeze(0)).clamp(-1, 1)


# -- integration by the trapezoid rule ----------------------------------------------------------

def _trapezoid_parts(name, y, x, dx, dim):
    d = _wrap_dim(dim, y.ndim)
    n = y.shape[d]
    lo = y.narrow(d, 0, max(n - 1, 0))
    hi = y.narrow(d, min(1, n), max(n - 1, 0))
    if x is None:
        step = 1.0 if dx is None else dx
    else:
        if x.ndim == 1:
            if x.shape[0] != n:
                raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
            step = x.diff().reshape([-1] + [1] * (y.ndim - 1 - d))
        else:
            if x.shape[_wrap_dim(dim, x.ndim)] != n:
                raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
            step = x.diff(dim=dim)
    if not y.dtype.is_floating_point:
        lo, hi = lo.to(get_default_dtype()), hi.to(get_default_dtype())
    return (lo + hi) * step / 2, d


@public("plugtorch")
def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoid rule's integral of ``y`` along ``dim``, at sample points ``x`` or spaced ``dx``."""
    areas, d = _trapezoid_parts("trapezoid", y, x, dx, dim)
    if y.shape[d] == 0:
        return areas.sum(d).detach()  # torch answers an empty y with constant zeros
    return areas.sum(d)


@public("plugtorch")
def trapz(y, x=None, *, dx=None, dim=-1):
    """``trapezoid``'s older name."""
    return trapezoid(y, x, dx=dx, dim=dim)


@public("plugtorch")
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoid-rule integral of ``y`` along ``dim`` (one fewer element there)."""
    areas, d = _trapezoid_parts("cumulative_trapezoid", y, x, dx, dim)
    return areas.cumsum(d)


@public("plugtorch")
def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of a 1-D ``x``: columns x**(N-1), ..., x**0 (``increasing``: the
    other way round); N defaults to len(x)."""
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    dt = x.dtype if x.dtype.is_floating_point else int64
    if n == 0:
        return x.new_zeros((x.shape[0], 0), dtype=dt)
    # torch's: a running product of columns [1, x, x, ...], exact for integers and 0 ** 0 = 1
    cols = [x.new_ones((x.shape[0], 1), dtype=dt)] + [x.to(dt).unsqueeze(1)] * (n - 1)
    out = cat(cols, 1).cumprod(1)
    return out if increasing else out.flip(1)
