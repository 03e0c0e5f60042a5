"""Ops whose output size depends on the values: unique, bincount, histc.

Each reads something back to the host to size its result (the distinct values, the
largest index, the data's range), as torch's do; that is one device synchronisation
per call on a device backend. The counting itself is the stable ``argsort`` primitive
and ``scatter_add``.
"""
from __future__ import annotations

import builtins

from ..dispatch import call_op, record
from ..dtypes import bool_, float64, int64
from ..grad_mode import _state as _grad
from ..grad_mode import no_grad
from ..optable import TABLE, op, public
from ..tensor import Tensor, _wrap_dim
from . import elementwise as ew
from ._front import written_out
from .creation import linspace, ones, zeros
from .index import gather, scatter_add
from .reduce import any as reduce_any
from .shape import cat
from .sorting import argsort
from .statistics import cumsum

_EVERYWHERE = ("plugtorch", "Tensor")


# -- unique ----------------------------------------------------------------------------------

def _lexsort_rows(rows):
    """The stable order that sorts the rows of a 2-D tensor lexicographically."""
    n, m = rows.shape
    order = argsort(rows[:, m - 1], stable=True) if m else argsort(zeros(n, dtype=int64,
                                                                        device=rows._backend.name))
    for j in range(m - 2, -1, -1):  # least significant column first, each pass stable
        order = order[argsort(rows[order, j], stable=True)]
    return order


def _unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    if not isinstance(input, Tensor):
        raise TypeError(f"unique(): argument 'input' must be Tensor, not {type(input).__name__}")
    if dim is not None and input.ndim == 0:
        raise IndexError("unique(): a 0-d tensor has no dim to take unique slices along")
    with no_grad():
        out = call_op("unique", (input.detach(),), {"sorted": sorted, "return_inverse": return_inverse,
                                                     "return_counts": return_counts, "dim": dim})
    if input.requires_grad and _grad.enabled:  # in the graph, as torch's, but not differentiable
        record(out if isinstance(out, Tensor) else out[0], TABLE["unique"], (input,))
    return out


def _no_derivative(ctx, g):
    raise RuntimeError(f"the derivative for '{ctx.op}' is not implemented (as in torch)")


# unique's public function is written out: its node (torch's: in the graph, not differentiable)
# goes on the first of several outputs, where dispatch records one output's.
@op(front=written_out(_unique), derivative=_no_derivative, multi_output=True, exposed=_EVERYWHERE)
def unique(input, *, sorted, return_inverse, return_counts, dim):
    """The distinct values (or, with ``dim``, the distinct slices along it), sorted; optionally
    where each input entry went (``return_inverse``) and how often each occurs
    (``return_counts``). Always sorted, as torch's CPU result is for ``sorted=False`` too."""
    device = input._backend.name
    if dim is None:
        rows = input.reshape(-1, 1)
    else:
        d = _wrap_dim(dim, input.ndim)
        moved = input.movedim(d, 0)
        rows = moved.reshape(moved.shape[0], -1)
    n = rows.shape[0]
    order = _lexsort_rows(rows)
    ordered = rows[order]
    if n:
        changed = reduce_any(ew.ne(ordered[1:], ordered[:-1]), 1)
        first = cat([ones(1, dtype=changed.dtype, device=device), changed])
    else:
        first = zeros(0, dtype=bool_, device=device)
    picked = ordered[first]  # the one read-back: how many distinct rows there are
    if dim is None:
        values = picked.reshape(-1)
    else:
        values = picked.reshape((picked.shape[0],) + tuple(moved.shape[1:])).movedim(0, d)
    out = [values]
    group = cumsum(first, 0) - 1  # the distinct row each sorted row belongs to
    if return_inverse:
        inverse = zeros(n, dtype=int64, device=device)
        inverse[order] = group  # order is a permutation: one write per position
        out.append(inverse.reshape(input.shape) if dim is None else inverse)
    if return_counts:
        k = values.shape[0] if dim is None else picked.shape[0]
        out.append(scatter_add(zeros(k, dtype=int64, device=device), 0, group,
                               ones(n, dtype=int64, device=device)))
    return out[0] if len(out) == 1 else tuple(out)


# -- bincount, histc ----------------------------------------------------------------------------

def _bincount_args(input, weights=None, minlength=0):
    if (not isinstance(input, Tensor) or input.ndim != 1 or input.dtype.is_floating_point
            or input.dtype.name == "bool"):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError(f"bincount(): minlength should be >= 0, got {minlength}")
    if weights is not None and (not isinstance(weights, Tensor) or weights.shape != input.shape):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    if input.numel() and int(input.min().item()) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    x = input if input.dtype is int64 else input.to(int64)
    return (x, weights), {"minlength": int(minlength)}


@op(bind=_bincount_args, exposed=_EVERYWHERE,
    dtypes="int64 counts; floating weights keep their dtype, integer weights -> float64")
def bincount(input, weights, *, minlength):
    """How often each value 0, 1, ..., max(input) occurs in a 1-D non-negative integer tensor
    (with ``weights``: their sum per value); at least ``minlength`` bins."""
    size = minlength
    if input.numel():
        size = builtins.max(size, int(input.max().item()) + 1)  # sizes the result: read back
    if weights is None:
        counts = ones(input.shape, dtype=int64, device=input._backend.name)
        return scatter_add(zeros(size, dtype=int64, device=input._backend.name), 0, input, counts)
    w = weights if weights.dtype.is_floating_point else weights.to(float64)
    return scatter_add(zeros(size, dtype=w.dtype, device=input._backend.name), 0, input, w)


@public("plugtorch", "Tensor")
def histc(input, bins=100, min=0, max=0):
    """Counts of ``input``'s values in ``bins`` equal bins over [min, max] (the data's range when
    min == max); values outside are left out, the last bin includes max. Not differentiable."""
    if not isinstance(input, Tensor) or not input.dtype.is_floating_point:
        got = input.dtype.name if isinstance(input, Tensor) else type(input).__name__
        raise NotImplementedError(f'"histc" not implemented for {got}: it takes floating point '
                                  "tensors; convert with .float()")
    if bins <= 0:
        raise RuntimeError(f"torch.histc: bins must be > 0, but got {bins} for dimension 0")
    lo, hi = float(min), float(max)
    with no_grad():
        x = input.detach().reshape(-1)
        if lo == hi and x.numel():
            lo, hi = (float(v) for v in (x.min().item(), x.max().item()))  # read back, as torch
        if lo == hi:
            lo, hi = lo - 1, hi + 1
        if lo > hi:
            raise RuntimeError(f"torch.histc: max must be larger than min, got min={lo}, max={hi}")
        inside = ew.logical_and(ew.ge(x, lo), ew.le(x, hi))
        index = ew.where(inside, _bin_of(x, lo, hi, bins), 0)
        return scatter_add(zeros(bins, dtype=input.dtype, device=input._backend.name), 0, index,
                           inside.to(input.dtype))


def _bin_of(x, lo, hi, bins):
    """torch's bin for each value: interpolated, then corrected against the bin edges (an edge
    value belongs to the bin it starts; max to the last bin)."""
    guess = ew.clamp(ew.floor((x - lo) * bins / (hi - lo)), 0, bins).to(int64)
    edges = linspace(lo, hi, bins + 1, dtype=x.dtype, device=x._backend.name)
    start = ew.clamp(guess - 1, 0, bins)
    position = start - 1
    for k in range(3):  # the edges start, start + 1, start + 2 at or below x
        edge_index = ew.clamp(start + k, 0, bins)
        below = ew.logical_and(ew.lt(start + k, bins + 1), ew.le(gather(edges, 0, edge_index), x))
        position = position + below.to(int64)
    return ew.clamp(position, 0, bins - 1)


__all__ = ["unique", "bincount", "histc"]
