"""select, and writing one tensor into a part of another, out of place and in place: select_scatter,
slice_scatter, diagonal_scatter, index_copy, index_fill, masked_scatter, put.

Each clones ``input`` and assigns into the clone with indexing, whose gradient (the slot's
part of the gradient to ``src``, the rest to ``input``) is the index_put rule; the in-place
forms (``Tensor.index_copy_``...) apply the same function in place.
"""
from __future__ import annotations

from ..dtypes import bool_, int64
from ..optable import public
from ..tensor import Tensor, _wrap_dim
from .creation import arange

_EVERYWHERE = ("plugtorch", "Tensor")


def _check_src(src, expected):
    if tuple(src.shape) != tuple(expected):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(expected)}")


def _write(input, key, value):
    out = input.clone()
    out[key] = value
    return out


@public(*_EVERYWHERE)
def select(input, dim, index):
    """The slice at ``index`` of ``dim``, that dim removed (a view)."""
    if input.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(input.shape)} at "
                         f"dimension {d}")
    return input[(slice(None),) * d + (index,)]


@public(*_EVERYWHERE)
def select_scatter(input, src, dim, index):
    """``input`` with ``src`` written at ``index`` of ``dim`` (where ``select`` reads)."""
    d = _wrap_dim(dim, input.ndim)
    _check_src(src, select(input, d, index).shape)
    return _write(input, (slice(None),) * d + (index,), src)


@public(*_EVERYWHERE)
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """``input`` with ``src`` written where ``input[start:end:step]`` along ``dim`` reads."""
    d = _wrap_dim(dim, input.ndim)
    key = (slice(None),) * d + (slice(start, end, step),)
    _check_src(src, input[key].shape)
    return _write(input, key, src)


@public(*_EVERYWHERE)
def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """``input`` with ``src`` written on the diagonal that ``diagonal(offset, dim1, dim2)`` reads."""
    diag = input.diagonal(offset, dim1, dim2)
    _check_src(src, diag.shape)
    d1, d2 = _wrap_dim(dim1, input.ndim), _wrap_dim(dim2, input.ndim)
    k = diag.shape[-1]
    idx = arange(k, device=input._backend.name)
    # the diagonal's own layout: the other dims in order, then its positions along dim1 and dim2
    moved = input.movedim((d1, d2), (-2, -1)).clone()
    moved[(Ellipsis, idx - min(offset, 0), idx + max(offset, 0))] = src
    return moved.movedim((-2, -1), (d1, d2)).contiguous()


def _index_arg(op_name, input, dim, index):
    d = _wrap_dim(dim, input.ndim) if input.ndim else 0
    if index.ndim > 1:
        raise IndexError(f"{op_name}(): Index should have dimension 1 or 0 (got {index.ndim})")
    if index.dtype is not int64:
        raise IndexError(f"{op_name}(): Expected a long tensor for index, but got {index.dtype.name}")
    return d, index.reshape(-1)


@public(*_EVERYWHERE, inplace=True)
def index_copy(input, dim, index, source):
    """``input`` with ``source``'s slices along ``dim`` written at positions ``index``."""
    d, idx = _index_arg("index_copy_", input, dim, index)
    src_n = source.shape[d] if source.ndim else 1
    if idx.numel() != src_n:
        raise IndexError(f"index_copy_(): Number of indices ({idx.numel()}) should be equal to source.size(dim) "
                         f"({src_n})")
    return _write(input, (slice(None),) * d + (idx,), source)


@public(*_EVERYWHERE, inplace=True)
def index_fill(input, dim, index, value):
    """``input`` with ``value`` (a number or 0-d tensor) at positions ``index`` along ``dim``."""
    d, idx = _index_arg("index_fill_", input, dim, index)
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    return _write(input, (slice(None),) * d + (idx,), value)


@public("Tensor", inplace=True)
def masked_scatter(input, mask, source):
    """``input`` with ``source``'s first elements, in order, where ``mask`` (broadcast) is True."""
    if mask.dtype is not bool_:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{mask.dtype.name}")
    m = mask.expand(input.shape) if tuple(mask.shape) != tuple(input.shape) else mask
    n = int(m.sum().item())
    if source.numel() < n:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    return _write(input, m, source.reshape(-1)[:n])


@public("Tensor", inplace=True)
def put(input, index, source, accumulate=False):
    """``input`` read as 1-D with ``source`` written (``accumulate``: added) at ``index``."""
    if index.dtype is not int64:
        raise IndexError(f"put_(): Expected a long tensor for index, but got {index.dtype.name}")
    n = input.numel()
    idx = index.reshape(-1)
    if idx.numel():
        lo, hi = int(idx.min().item()), int(idx.max().item())
        bad = hi if hi >= n else lo if lo < -n else None
        if bad is not None:
            raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")
    if idx.numel() != source.numel():
        raise RuntimeError(f"put_(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {source.numel()}, index.numel() = {idx.numel()}")
    flat = input.reshape(-1)
    out = flat.index_put((idx,), source.reshape(-1), accumulate) if accumulate else _write(flat, idx,
                                                                                           source.reshape(-1))
    return out.reshape(input.shape)
