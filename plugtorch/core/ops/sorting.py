"""Sorting and order statistics: sort, argsort, topk, kthvalue, median.

One primitive, a stable ``argsort``, gives the order; the values are a ``gather`` of the
input at those indices, so gradients flow back to the selected entries through
gather's rule (ties go to the entry the order picked, as in torch).
"""
from __future__ import annotations

from ..dispatch import call_op, wrap
from ..dtypes import int64
from ..optable import Done, op
from ..return_types import return_type
from ..tensor import _wrap_dim
from .index import gather

_EVERYWHERE = ("plugtorch", "Tensor")

# torch.return_types names: the classes are called like the ops
sort_result = return_type("sort", ["values", "indices"])
topk_result = return_type("topk", ["values", "indices"])
kthvalue_result = return_type("kthvalue", ["values", "indices"])
median_result = return_type("median", ["values", "indices"])


def _zero_index(x):
    return wrap(x._backend.primitives["zeros"]((), int64), x._backend)


def _order(x, dim, descending):
    d = _wrap_dim(dim, x.ndim) if x.ndim else 0
    if x.ndim == 0:
        return _zero_index(x), d
    return call_op("argsort", (x,), {"axis": d, "descending": bool(descending)}), d


def _argsort_args(input, dim=-1, descending=False, stable=False):
    if input.ndim == 0:  # the one entry of a 0-d tensor is at index 0
        return Done(_zero_index(input))
    return (input,), {"axis": _wrap_dim(dim, input.ndim), "descending": bool(descending)}


@op(primitive="argsort", bind=_argsort_args, exposed=_EVERYWHERE, dtypes="-> int64")
def argsort(input, *, axis, descending):
    """Indices that sort ``input`` along ``dim`` (always stable: ties keep their order; nan sorts
    as the largest value)."""


@op(multi_output=True, exposed=_EVERYWHERE)
def sort(input, dim=-1, descending=False, stable=False):
    """(values, indices) sorted along ``dim``; ties keep their order, and the values' gradient
    flows back through the indices."""
    idx, d = _order(input, dim, descending)
    if input.ndim == 0:
        return sort_result(input.clone(), idx)
    return sort_result(gather(input, d, idx), idx)


@op(multi_output=True, exposed=_EVERYWHERE)
def topk(input, k, dim=-1, largest=True, sorted=True):
    """The k largest (largest=False: smallest) entries along dim, sorted, with their indices."""
    d = _wrap_dim(dim, input.ndim) if input.ndim else 0
    n = input.shape[d] if input.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError(f"selected index k out of range: k={k} for dimension {d} of size {n}")
    idx, d = _order(input, d, largest)
    if input.ndim == 0:
        return topk_result(input.clone(), idx)
    idx = idx[(slice(None),) * d + (slice(0, k),)].contiguous()   # a fresh tensor, as torch's
    return topk_result(gather(input, d, idx), idx)


def _select(input, position, dim, keepdim, result, op):
    """The entry at sorted position ``position`` along ``dim``, and its index."""
    d = _wrap_dim(dim, input.ndim) if input.ndim else 0
    if input.ndim == 0:
        return result(input.clone(), _zero_index(input))
    n = input.shape[d]
    if not 0 <= position < n:
        raise IndexError(f"{op}(): dimension {d} of size {n} has no entry at sorted position {position + 1}")
    idx, d = _order(input, d, False)
    idx = idx[(slice(None),) * d + (slice(position, position + 1),)].contiguous()   # as torch's
    values = gather(input, d, idx)
    if not keepdim:
        values, idx = values.squeeze(d), idx.squeeze(d)
    return result(values, idx)


@op(multi_output=True, exposed=_EVERYWHERE)
def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest entry (1-based) along ``dim``, and its index."""
    return _select(input, k - 1, dim, keepdim, kthvalue_result, "kthvalue")


@op(multi_output=True, exposed=_EVERYWHERE)
def median(input, dim=None, keepdim=False):
    """The lower median of all entries (dim=None), or (values, indices) along ``dim``."""
    if dim is None:
        flat = input.reshape(-1)
        if flat.numel() == 0:  # torch: nan, the median of nothing (still in the graph)
            return flat.sum() * float("nan")
        return _select(flat, (flat.numel() - 1) // 2, 0, False, median_result, "median").values
    d = _wrap_dim(dim, input.ndim) if input.ndim else 0
    n = input.shape[d] if input.ndim else 1
    return _select(input, (n - 1) // 2, d, keepdim, median_result, "median")
