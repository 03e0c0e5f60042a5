"""scatter (replace), scatter_reduce and index_add, composed from scatter_add, gather and where.

Writes that land on the same position come from one "fibre" (the entries of ``index``
that share every coordinate but ``dim``), so each fibre is sorted by target along ``dim``
(the stable ``argsort`` primitive) and the entries of one target form a run:

* ``scatter`` keeps the run's last entry, the last write in index order, as torch on CPU
  does (its CUDA result is unspecified); every backend gives that same answer here.
* ``scatter_reduce`` combines each run with a scan by doubling (as ``cumulative``), whose
  last entry holds the run's result.
"""
from __future__ import annotations

import warnings

from ..dispatch import call_op
from ..dtypes import int64
from ..optable import Done, op
from ..tensor import Tensor, _wrap_dim
from . import elementwise as ew
from .creation import arange, full, ones, zeros, zeros_like
from .index import _TORCH_NAMES, _check_gather, check_scatter_dtypes, gather, scatter_add
from .shape import cat

_EVERYWHERE = ("plugtorch", "Tensor")


def _fitted(src, index):
    """``src`` cut to ``index``'s shape (torch reads only that corner of a larger src)."""
    if tuple(src.shape) == tuple(index.shape):
        return src
    return src[tuple(slice(0, s) for s in index.shape)]


def _runs(index, dim):
    """(order, key, last): ``index`` sorted along ``dim`` (``key`` = its values in that order,
    ``order`` = where they came from) and, in sorted order, whether an entry ends its run."""
    n = index.shape[dim]
    order = call_op("argsort", (index,), {"axis": dim, "descending": False})
    key = gather(index, dim, order)
    if n == 0:
        return order, key, ew.ne(key, key)
    ends = ew.ne(key.narrow(dim, 1, n - 1), key.narrow(dim, 0, n - 1))
    last_shape = tuple(1 if d == dim else s for d, s in enumerate(index.shape))
    return order, key, cat([ends, ones(last_shape, dtype=ends.dtype, device=index._backend.name)], dim)


def _hits(input, dim, index):
    """Where any entry of ``index`` writes, and how many do."""
    counts = scatter_add(zeros(input.shape, dtype=int64, device=input._backend.name), dim, index,
                         ones(index.shape, dtype=int64, device=index._backend.name))
    return ew.gt(counts, 0), counts


# -- scatter -------------------------------------------------------------------------------

def _last_writes(index, dim):
    """True where an entry of ``index`` is the last (in index order) to write its target."""
    order, _, last = _runs(index, dim)
    inverse = call_op("argsort", (order,), {"axis": dim, "descending": False})
    return gather(last, dim, inverse)


def _scatter_rule(ctx, g):
    # torch's gradient: src gets grad at every index entry, duplicates included
    index = ctx.saved[1]
    dim = ctx.attrs["dim"]
    if ctx.attrs["reduce"] is not None:
        raise RuntimeError("the derivative of scatter with reduce= is not implemented (as in torch); "
                           "use scatter_reduce, which is differentiable")
    gx = scatter(g, dim, index, 0.0) if ctx.needs_input_grad[0] else None
    gsrc = gather(g, dim, index) if ctx.needs_input_grad[2] else None
    return gx, None, gsrc


def _scatter_args(input, dim, index, src=None, *, value=None, reduce=None):
    if src is not None and not isinstance(src, Tensor):
        src, value = None, src  # scatter(input, dim, index, 2.0): the number form
    if (src is None) == (value is None):
        raise TypeError("scatter(): pass exactly one of src (a tensor) and value (a number)")
    check_scatter_dtypes(input, index, src)
    if input.ndim == 0 and isinstance(index, Tensor) and index.ndim == 0:
        one = src.reshape(1) if src is not None else value
        return Done(scatter(input.reshape(1), 0, index.reshape(1), one, reduce=reduce).reshape(()))
    if reduce is not None:
        if reduce not in ("add", "multiply"):
            raise RuntimeError("reduce argument must be either add or multiply.")
        if src is not None:
            # stacklevel 3: past this bind and scatter's generated function, to the caller
            warnings.warn("The reduce argument of scatter with Tensor src is deprecated; use "
                          "scatter_reduce instead for more reduction options.", stacklevel=3)
        reduce = "sum" if reduce == "add" else "prod"
    d = _check_gather("scatter", input, dim, index, src)
    return (input, index, src if src is not None else value), {"dim": d, "reduce": reduce}


@op(bind=_scatter_args, derivative=_scatter_rule, save=(1,), exposed=_EVERYWHERE, inplace=True)
def scatter(input, index, src, *, dim, reduce):
    """``input`` with ``src`` (a tensor, or ``value``, a number) written at ``index`` along ``dim``.

    Where several entries of ``index`` name one position the last one in index order wins,
    as on torch's CPU (torch leaves it unspecified on CUDA); ``src``'s gradient is read at
    every entry, as torch's. ``reduce`` ("add" or "multiply") combines instead of writing.
    """
    if index.ndim == 0 or index.numel() == 0:
        return input.clone()
    if reduce is not None:
        # torch's older spelling of scatter_reduce with include_self (numbers broadcast)
        values = src if isinstance(src, Tensor) else full(index.shape, src, dtype=input.dtype,
                                                          device=input._backend.name)
        return _reduced(input, index, values, dim, reduce, True)
    hit, _ = _hits(input, dim, index)
    if not isinstance(src, Tensor):
        return ew.where(hit, src, input).to(input.dtype)
    src = _fitted(src, index)
    last = _last_writes(index, dim)
    values = scatter_add(zeros_like(input), dim, index, ew.where(last, src, zeros_like(src)))
    return ew.where(hit, values, input)


# -- scatter_reduce ------------------------------------------------------------------------

_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _run_totals(index, src, dim, combine):
    """Each run's combination of ``src``, placed at the run's last entry (0 elsewhere), with the
    sorted index; runs are combined by a scan by doubling along ``dim``."""
    order, key, last = _runs(index, dim)
    values = gather(src, dim, order)
    n = index.shape[dim]
    position = arange(n, device=index._backend.name).reshape((n,) + (1,) * (index.ndim - dim - 1))
    step = 1
    while step < n:
        earlier = cat([values.narrow(dim, 0, step), values.narrow(dim, 0, n - step)], dim)
        earlier_key = cat([key.narrow(dim, 0, step), key.narrow(dim, 0, n - step)], dim)
        same_run = ew.logical_and(ew.ge(position, step), ew.eq(earlier_key, key))
        values = ew.where(same_run, combine(values, earlier), values)
        step *= 2
    return key, ew.where(last, values, zeros_like(values))


def _scatter_reduce_args(input, dim, index, src, reduce, *, include_self=True):
    if reduce in ("max", "min"):
        reduce = "a" + reduce
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_reduce(): argument 'src' must be Tensor, not {type(src).__name__}")
    check_scatter_dtypes(input, index, src)
    if input.ndim == 0 and isinstance(index, Tensor) and index.ndim == 0:
        return Done(scatter_reduce(input.reshape(1), 0, index.reshape(1), src.reshape(1), reduce,
                                   include_self=include_self).reshape(()))
    d = _check_gather("scatter_reduce", input, dim, index, src)
    return (input, index, src), {"dim": d, "reduce": reduce, "include_self": bool(include_self)}


@op(bind=_scatter_reduce_args, exposed=_EVERYWHERE, inplace=True)
def scatter_reduce(input, index, src, *, dim, reduce, include_self):
    """``input`` with the ``src`` entries at ``index`` along ``dim`` combined into it by ``reduce``
    ("sum", "prod", "mean", "amax", "amin"), the old value included unless ``include_self``
    is False. amax/amin share the gradient among tied entries, as torch's."""
    if index.ndim == 0 or index.numel() == 0:
        return input.clone()
    return _reduced(input, index, src, dim, reduce, include_self)


def _reduced(input, index, src, dim, reduce, include_self):
    """scatter_reduce's result for a non-empty ``index`` (scatter's ``reduce=`` computes it too)."""
    src = _fitted(src, index)
    hit, counts = _hits(input, dim, index)
    if reduce in ("sum", "mean"):
        base = input if include_self else ew.where(hit, zeros_like(input), input)
        total = scatter_add(base, dim, index, src)
        if reduce == "sum":
            return total
        n = counts + 1 if include_self else ew.maximum(counts, 1)
        mean = total / n if input.dtype.is_floating_point else ew.floor_divide(total, n)
        return ew.where(hit, mean.to(input.dtype), input)
    combine = {"prod": ew.mul, "amax": ew.maximum, "amin": ew.minimum}[reduce]
    key, totals = _run_totals(index, src, dim, combine)
    reduced = scatter_add(zeros_like(input), dim, key, totals)
    if include_self:
        reduced = combine(input, reduced)
    out = ew.where(hit, reduced, input)
    if reduce == "prod" or not input.dtype.is_floating_point:
        return out
    return _shared_among_ties(out, input, index, src, dim, hit, include_self)


def _shared_among_ties(out, input, index, src, dim, hit, include_self):
    """``out`` (amax/amin) with torch's gradient: shared evenly by every entry (of src, and of
    input when it takes part) equal to the result."""
    result = out.detach()
    self_wins = ew.eq(input, result)
    if not include_self:
        self_wins = ew.logical_and(self_wins, ew.logical_not(hit))
    src_wins = ew.eq(src, gather(result, dim, index))
    ties = scatter_add(self_wins.to(result.dtype), dim, index, src_wins.to(result.dtype))
    share = scatter_add(ew.where(self_wins, input, zeros_like(input)) / ties, dim, index,
                        ew.where(src_wins, src, zeros_like(src)) / gather(ties, dim, index))
    return result + (share - share.detach())  # the value is result, the gradient share's


# -- index_add ---------------------------------------------------------------------------------

def _index_add_args(input, dim, index, source, *, alpha=1):
    if isinstance(source, Tensor) and source.dtype is not input.dtype:
        raise RuntimeError(f"index_add_(): self ({_TORCH_NAMES[input.dtype.name]}) and source "
                           f"({_TORCH_NAMES[source.dtype.name]}) must have the same scalar type")
    if not isinstance(index, Tensor) or index.dtype.is_floating_point or index.ndim > 1:
        raise RuntimeError("index_add(): index must be a 1-D integer tensor")
    d = _wrap_dim(dim, input.ndim) if input.ndim else 0
    x = input if input.ndim else input.reshape(1)
    src = source if source.ndim else source.reshape(1)
    if src.ndim != x.ndim or src.shape[d] != index.numel() or any(
            src.shape[k] != x.shape[k] for k in range(x.ndim) if k != d):
        raise RuntimeError(f"index_add(): source of shape {list(source.shape)} does not match input of "
                           f"shape {list(input.shape)} with {index.numel()} indices along dim {d}")
    index = index if index.dtype is int64 else index.to(int64)
    operands, attrs = (x, index.reshape(-1), src), {"dim": d, "alpha": alpha}
    return (operands, attrs) if input.ndim else Done(call_op("index_add", operands, attrs).reshape(()))


@op(bind=_index_add_args, exposed=_EVERYWHERE, inplace=True)
def index_add(input, index, source, *, dim, alpha):
    """``input`` with ``alpha * source`` added at the 1-D ``index`` along ``dim``; repeats accumulate."""
    view = [1] * input.ndim
    view[dim] = index.numel()
    full = index.reshape(view).expand(source.shape)
    return scatter_add(input, dim, full, source if alpha == 1 else source * alpha)
