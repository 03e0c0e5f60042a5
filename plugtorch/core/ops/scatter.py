"""scatter (replace) and index_add, composed from scatter_add, gather and where.

``scatter`` writes ``src`` at ``index`` along ``dim``: the written positions are found by
scattering ones, and the new values by scattering ``src``. With repeated indices torch's
result is unspecified; here the repeated values are summed.
"""
from __future__ import annotations

from ..dispatch import call_op
from ..dtypes import int64
from ..optable import op
from ..tensor import Tensor, _wrap_dim
from . import elementwise as ew
from .creation import ones, zeros_like
from .index import _check_gather, scatter_add

_EVERYWHERE = ("plugtorch", "Tensor")


def _scatter(input, index, src, *, dim):
    hit = scatter_add(zeros_like(input), dim, index, ones(index.shape, dtype=input.dtype,
                                                          device=index._backend.name))
    written = ew.gt(hit, 0)
    if not isinstance(src, Tensor):
        return ew.where(written, src, input).to(input.dtype)
    sl = tuple(slice(0, s) for s in index.shape)
    values = scatter_add(zeros_like(input), dim, index, src[sl])
    return ew.where(written, values, input)


@op(decompose=_scatter, exposed=_EVERYWHERE, inplace=True)
def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """``input`` with ``src`` (a tensor, or ``value``, a number) written at ``index`` along ``dim``."""
    if reduce is not None:
        raise NotImplementedError(f"scatter(): reduce={reduce!r} is not supported; use scatter_add, or "
                                  "scatter_reduce semantics through scatter_add and amax")
    if src is not None and not isinstance(src, Tensor):
        src, value = None, src  # scatter(input, dim, index, 2.0): the number form
    if (src is None) == (value is None):
        raise TypeError("scatter(): pass exactly one of src (a tensor) and value (a number)")
    d = _check_gather("scatter", input, dim, index, src)
    if src is not None and src.dtype is not input.dtype:
        src = src.to(input.dtype)
    return call_op("scatter", (input, index, src if src is not None else value), {"dim": d})


def _index_add(input, index, source, *, dim, alpha):
    view = [1] * input.ndim
    view[dim] = index.numel()
    full = index.reshape(view).expand(source.shape)
    return scatter_add(input, dim, full, source if alpha == 1 else source * alpha)


@op(decompose=_index_add, exposed=_EVERYWHERE, inplace=True)
def index_add(input, dim, index, source, *, alpha=1):
    """``input`` with ``alpha * source`` added at the 1-D ``index`` along ``dim``; repeats accumulate."""
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
    out = call_op("index_add", (x, index.reshape(-1), src), {"dim": d, "alpha": alpha})
    return out if input.ndim else out.reshape(())
