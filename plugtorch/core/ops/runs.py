"""Ops over runs of equal values: mode (the longest run in sorted order), unique_consecutive
(the runs as given), and nanmedian (median over the values that are not nan).

Like ``sorting``, each orders with the stable ``argsort`` primitive and picks entries with
``gather``, so the values' gradient flows back to the entries picked, as torch's does.
unique_consecutive reads its count of runs back to the host to size its result, as torch's.
"""
from __future__ import annotations

from ..dispatch import call_op, record
from ..dtypes import bool_, int64
from ..grad_mode import _state as _grad
from ..grad_mode import no_grad
from ..optable import TABLE, op
from ..return_types import return_type
from ..tensor import Tensor, _wrap_dim
from . import elementwise as ew
from ._front import written_out
from .counting import _no_derivative
from .creation import ones, ones_like, zeros
from .index import gather, scatter_add
from .reduce import any as reduce_any
from .shape import cat
from .sorting import _order, _zero_index
from .statistics import cumsum

_EVERYWHERE = ("plugtorch", "Tensor")

mode_result = return_type("mode", ["values", "indices"])
nanmedian_result = return_type("nanmedian", ["values", "indices"])


def _run_starts(rows):
    """True where a row (a 1-D tensor's entry, or a 2-D tensor's row) differs from the one before
    (nan differs from everything, itself included, as in torch)."""
    n = rows.shape[0]
    if n == 0:
        return zeros(0, dtype=bool_, device=rows._backend.name)
    changed = ew.ne(rows[1:], rows[:-1])
    if rows.ndim == 2:
        changed = reduce_any(changed, 1)
    return cat([ones(1, dtype=bool_, device=rows._backend.name), changed])


# -- mode ---------------------------------------------------------------------------------------

@op(multi_output=True, exposed=_EVERYWHERE)
def mode(input, dim=-1, keepdim=False):
    """The most frequent value along ``dim`` (the smallest of equally frequent ones) and the index
    of its last occurrence."""
    if input.ndim == 0:
        return mode_result(input.clone(), _zero_index(input))
    d = _wrap_dim(dim, input.ndim)
    if input.shape[d] == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    x = input.movedim(d, -1)
    order, _ = _order(x.detach(), -1, False)
    s = gather(x.detach(), -1, order)
    starts = cat([ones(s.shape[:-1] + (1,), dtype=bool_, device=s._backend.name),
                  ew.ne(s[..., 1:], s[..., :-1])], -1)
    run = cumsum(starts, -1) - 1
    lengths = scatter_add(zeros(s.shape, dtype=int64, device=s._backend.name), -1, run, ones_like(run))
    at = gather(lengths, -1, run)  # each sorted entry's run length
    longest = at.amax(-1, keepdim=True)
    # the smallest value's run comes first in sorted order; its last entry has the largest index
    last = ew.eq(at, longest).to(int64).argmax(-1, keepdim=True) + longest - 1
    index = gather(order, -1, last)
    values = gather(x, -1, index)
    values, index = values.squeeze(-1), index.squeeze(-1)
    if keepdim:  # unsqueezed, not moved back: contiguous, as torch's
        values, index = values.unsqueeze(d), index.unsqueeze(d)
    return mode_result(values, index)


# -- nanmedian ----------------------------------------------------------------------------------

def _nanmedian_at(input, d, keepdim):
    order, d = _order(input.detach(), d, False)  # nan sorts last
    if input.dtype.is_floating_point:
        count = ew.logical_not(ew.isnan(input.detach())).sum(d, keepdim=True)
    else:
        count = zeros(order.shape[:d] + (1,) + order.shape[d + 1:], dtype=int64,
                      device=order._backend.name) + input.shape[d]
    position = ew.clamp_min(ew.floor_divide(count - 1, 2), 0)  # all nan: position 0, a nan
    index = gather(order, d, position)
    values = gather(input, d, index)
    if not keepdim:
        values, index = values.squeeze(d), index.squeeze(d)
    return nanmedian_result(values, index)


@op(multi_output=True, exposed=_EVERYWHERE)
def nanmedian(input, dim=None, keepdim=False):
    """The lower median of the values that are not nan (nan where all are), over all entries
    (dim=None) or as (values, indices) along ``dim``."""
    if dim is None:
        flat = input.reshape(-1)
        if flat.numel() == 0:
            return flat.sum() * float("nan")
        return _nanmedian_at(flat, 0, False).values
    if input.ndim == 0:
        return nanmedian_result(input.clone(), _zero_index(input))
    d = _wrap_dim(dim, input.ndim)
    if input.shape[d] == 0:
        raise IndexError(f"nanmedian(): Expected reduction dim {d} to have non-zero size.")
    return _nanmedian_at(input, d, keepdim)


# -- unique_consecutive -------------------------------------------------------------------------

def _unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    if not isinstance(input, Tensor):
        raise TypeError(f"unique_consecutive(): argument 'input' must be Tensor, not {type(input).__name__}")
    if dim is not None:
        dim = _wrap_dim(dim, input.ndim)  # torch's IndexError, 0-d tensors included
    with no_grad():
        out = call_op("unique_consecutive", (input.detach(),),
                      {"return_inverse": bool(return_inverse), "return_counts": bool(return_counts), "dim": dim})
    if input.requires_grad and _grad.enabled:  # in the graph, as torch's, but not differentiable
        record(out if isinstance(out, Tensor) else out[0], TABLE["unique_consecutive"], (input,))
    return out


@op(front=written_out(_unique_consecutive), derivative=_no_derivative, multi_output=True, exposed=_EVERYWHERE)
def unique_consecutive(input, *, return_inverse, return_counts, dim):
    """Each run of equal consecutive values (with ``dim``: of equal slices along it) kept once;
    optionally which run each entry belongs to (``return_inverse``) and each run's length
    (``return_counts``)."""
    device = input._backend.name
    if dim is None:
        rows = input.reshape(-1)
    else:
        moved = input.movedim(dim, 0)
        rows = moved.reshape(moved.shape[0], -1)
    starts = _run_starts(rows)
    picked = rows[starts]  # the one read-back: how many runs there are
    if dim is None:
        values = picked
    else:
        # moved back, not copied: torch's result keeps the slices as rows in memory too
        values = picked.reshape((picked.shape[0],) + tuple(moved.shape[1:])).movedim(0, dim)
    out = [values]
    run = cumsum(starts, 0) - 1
    if return_inverse:
        out.append(run.reshape(input.shape) if dim is None else run)
    if return_counts:
        out.append(scatter_add(zeros(picked.shape[0], dtype=int64, device=device), 0, run,
                               ones(rows.shape[0], dtype=int64, device=device)))
    return out[0] if len(out) == 1 else tuple(out)


__all__ = ["mode", "nanmedian", "unique_consecutive"]
