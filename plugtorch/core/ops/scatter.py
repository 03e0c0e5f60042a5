"""scatter (replace) and index_add, composed from scatter_add, gather and where.

``scatter`` writes ``src`` at ``index`` along ``dim``: the written positions are found by
scattering ones, and the new values by scattering ``src``. With repeated indices torch's
result is unspecified; here the repeated values are summed.
"""
from __future__ import annotations

from ..registry import OpDef
from ..tensor import Tensor, _wrap_dim
from . import elementwise as ew
from ._composite import composite_op
from .creation import zeros_like
from .index import _check_gather, scatter_add

OPS: list[OpDef] = []


@composite_op(OPS)
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
    hit = scatter_add(zeros_like(input), d, index, _ones(index, input.dtype))
    written = ew.gt(hit, 0)
    if src is None:
        return ew.where(written, value, input).to(input.dtype)
    if src.dtype is not input.dtype:
        src = src.to(input.dtype)
    sl = tuple(slice(0, s) for s in index.shape)
    values = scatter_add(zeros_like(input), d, index, src[sl])
    return ew.where(written, values, input)


def _ones(index, dtype):
    from .creation import ones
    return ones(index.shape, dtype=dtype, device=index._backend.name)


def index_add(input, dim, index, source, *, alpha=1):
    """``input`` with ``alpha * source`` added at the 1-D ``index`` along ``dim``; repeats accumulate."""
    if not isinstance(index, Tensor) or index.dtype.is_floating_point or index.ndim > 1:
        raise RuntimeError("index_add(): index must be a 1-D integer tensor")
    d = _wrap_dim(dim, input.ndim) if input.ndim else 0
    x = input if input.ndim else input.reshape(1)
    src = source if source.ndim else source.reshape(1)
    if src.ndim != x.ndim or src.shape[d] != index.numel() or any(
            src.shape[k] != x.shape[k] for k in range(x.ndim) if k != d):
        raise RuntimeError(f"index_add(): source of shape {list(source.shape)} does not match input of shape "
                           f"{list(input.shape)} with {index.numel()} indices along dim {d}")
    view = [1] * x.ndim
    view[d] = index.numel()
    full = index.to(_int64()).reshape(view).expand(src.shape)
    out = scatter_add(x, d, full, src if alpha == 1 else src * alpha)
    return out if input.ndim else out.reshape(())


def _int64():
    from ..dtypes import int64
    return int64


# named like the index_add primitive (which takes a native index tuple), so called directly
OPS.append(OpDef("index_add", doc="input with alpha * source added at a 1-D index along dim; repeats accumulate."))
