"""Running (cumulative) ops along a dim: cumprod, cummax, cummin, logcumsumexp.

No primitive computes them (cumsum is the one running primitive), so each is a scan by
doubling: after the pass with step s every entry has combined the 2s entries ending at
it, so ceil(log2 n) passes of whole-tensor ops finish it. Each pass is written with
differentiable ops, so the gradients (exact at zeros for cumprod, routed to the selected
entry for cummax/cummin, as torch's) and higher derivatives come from autograd.
"""
from __future__ import annotations

from ..dtypes import int64
from ..optable import op
from ..return_types import return_type
from ..tensor import Tensor
from . import elementwise as ew
from ._args import alias
from .creation import arange
from .pointwise import logaddexp
from .shape import cat

_EVERYWHERE = ("plugtorch", "Tensor")

# torch.return_types names: the classes are called like the ops
cummax_result = return_type("cummax", ["values", "indices"])
cummin_result = return_type("cummin", ["values", "indices"])


def _scan(tensors, dim, combine):
    """Inclusive scan of ``combine(later, earlier) -> tensors`` along ``dim`` by doubling."""
    n = tensors[0].shape[dim]
    position = arange(n, device=tensors[0]._backend.name).reshape(
        (n,) + (1,) * (tensors[0].ndim - dim - 1))
    step = 1
    while step < n:
        # entry i meets entry i - step; the first ``step`` entries have none and keep their value
        earlier = [cat([t.narrow(dim, 0, step), t.narrow(dim, 0, n - step)], dim) for t in tensors]
        has_earlier = ew.ge(position, step)
        tensors = [ew.where(has_earlier, c, t) for c, t in zip(combine(tensors, earlier), tensors)]
        step *= 2
    return tensors


def _dim_arg(op_name, input, dim, axis):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op_name}(): argument 'input' must be Tensor, not {type(input).__name__}")
    dim = alias(op_name, "dim", dim, "axis", axis)
    if dim is None:
        raise TypeError(f"{op_name}() missing required argument 'dim'")
    from ..tensor import _wrap_dim
    return _wrap_dim(dim, input.ndim)


def _cumulative(input, dim, combine):
    """The scan of one tensor (a 0-d one is its own running value)."""
    if input.ndim == 0:
        return input.clone()
    return _scan([input], dim, combine)[0]


# -- cumprod, logcumsumexp ---------------------------------------------------------------

def _cumprod_args(input, dim=None, *, dtype=None, axis=None):
    d = _dim_arg("cumprod", input, dim, axis)
    if dtype is None and not (input.dtype.is_floating_point or input.dtype.is_complex):
        dtype = int64
    if dtype is not None and dtype is not input.dtype:
        input = input.to(dtype)
    return (input,), {"dim": d}


@op(bind=_cumprod_args, exposed=_EVERYWHERE, inplace=True,
    dtypes="bool and integers multiply as int64 unless dtype is given")
def cumprod(input, *, dim):
    """Running product along ``dim``; the gradient is exact where entries are zero."""
    return _cumulative(input, dim, lambda t, e: [t[0] * e[0]])


def _logcumsumexp_args(input, dim=None, *, axis=None):
    d = _dim_arg("logcumsumexp", input, dim, axis)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"logcumsumexp" not implemented for {input.dtype.name}: it takes '
                                  "floating point tensors; convert with .float()")
    return (input,), {"dim": d}


@op(bind=_logcumsumexp_args, exposed=_EVERYWHERE)
def logcumsumexp(input, *, dim):
    """log(cumsum(exp(input))) along ``dim``, without overflow (floating input)."""
    return _cumulative(input, dim, lambda t, e: [logaddexp(t[0], e[0])])


# -- cummax, cummin ---------------------------------------------------------------------------

def _running_extreme(input, dim, result, beats):
    """(values, indices) of the running extreme that ``beats`` picks (ge: max, le: min)."""
    def combine(later, earlier):
        (v, i), (ev, ei) = later, earlier
        # torch's test: the later entry wins ties (its index is the last one) and is taken
        # whenever it is nan, so a nan, once met, stays (with the last nan's index)
        later_wins = ew.logical_or(beats(v, ev), ew.isnan(v))
        return [ew.where(later_wins, v, ev), ew.where(later_wins, i, ei)]

    device = input._backend.name
    if input.ndim == 0:
        return result(input.clone(), arange(1, device=device).reshape(()))
    n = input.shape[dim]
    index = arange(n, device=device).reshape((n,) + (1,) * (input.ndim - dim - 1))
    values, indices = _scan([input, index.expand(input.shape)], dim, combine)
    return result(values, indices)


def _extreme_args(op_name):
    def bind(input, dim=None, *, axis=None):
        return (input,), {"dim": _dim_arg(op_name, input, dim, axis)}
    return bind


@op(bind=_extreme_args("cummax"), multi_output=True, exposed=_EVERYWHERE)
def cummax(input, *, dim):
    """(values, indices) of the running maximum along ``dim``; ties take the later index, and a
    nan, once met, stays (each later nan taking over the index), as torch's."""
    return _running_extreme(input, dim, cummax_result, ew.ge)


@op(bind=_extreme_args("cummin"), multi_output=True, exposed=_EVERYWHERE)
def cummin(input, *, dim):
    """(values, indices) of the running minimum along ``dim``; ties take the later index, and a
    nan, once met, stays (each later nan taking over the index), as torch's."""
    return _running_extreme(input, dim, cummin_result, ew.le)


__all__ = ["cumprod", "logcumsumexp", "cummax", "cummin"]
