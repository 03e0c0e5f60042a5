"""torch's shape helpers that real scripts call, built on the movement and indexing ops:
broadcast_tensors, hsplit/vsplit/dsplit, split_with_sizes, sum_to_size, tril_indices and
triu_indices, diag_embed, take, cartesian_prod, combinations, msort, logspace, narrow_copy,
the in-place view methods (t_, transpose_, swapaxes_, squeeze_, unsqueeze_, fill_diagonal_),
and asarray and frombuffer (frombuffer reads host memory through NumPy, as from_numpy does).

Gradients come from the ops each is written with.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..dtypes import float64, get_default_dtype, int64
from ..optable import op, public
from ..tensor import Tensor, _wrap_dim
from ._args import broadcast_shapes
from .creation import arange, as_tensor, from_numpy, linspace, ones, tensor, zeros
from .inplace import _check_leaf
from .movement import meshgrid
from .shape import stack, sum_to

_EVERYWHERE = ("plugtorch", "Tensor")


@public("plugtorch")
def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape (views, as torch's)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape: tuple = ()
    for t in tensors:  # pairwise, to name the first pair that clashes as torch does
        a, b = shape, tuple(t.shape)
        for k in range(1, min(len(a), len(b)) + 1):
            if a[-k] != b[-k] and a[-k] != 1 and b[-k] != 1:
                raise RuntimeError(f"The size of tensor a ({a[-k]}) must match the size of tensor b ({b[-k]}) at "
                                   f"non-singleton dimension {max(len(a), len(b)) - k}")
        shape = broadcast_shapes(a, b)
    return tuple(t.expand(shape) for t in tensors)


def _directional_split(name, dim, min_ndim, input, indices_or_sections):
    if input.ndim < min_ndim:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {min_ndim} dimension, but got a tensor "
                           f"with {input.ndim} dimensions!")
    if isinstance(indices_or_sections, int):
        size = input.shape[dim]
        if indices_or_sections == 0 or size % indices_or_sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the dimension "
                               f"{size} is not divisible by the split_size {indices_or_sections}!")
    return input.tensor_split(indices_or_sections, dim)


@public(*_EVERYWHERE)
def hsplit(input, indices_or_sections):
    """Split along the columns (dim 1; dim 0 of a 1-D tensor)."""
    return _directional_split("hsplit", 0 if input.ndim == 1 else 1, 1, input, indices_or_sections)


@public(*_EVERYWHERE)
def vsplit(input, indices_or_sections):
    """Split along the rows (dim 0) of a tensor of 2 or more dims."""
    return _directional_split("vsplit", 0, 2, input, indices_or_sections)


@public(*_EVERYWHERE)
def dsplit(input, indices_or_sections):
    """Split along the depth (dim 2) of a tensor of 3 or more dims."""
    return _directional_split("dsplit", 2, 3, input, indices_or_sections)


@public("Tensor")
def split_with_sizes(input, split_sizes, dim=0):
    """Split into pieces of the given sizes along ``dim`` (they must sum to its size)."""
    d = _wrap_dim(dim, input.ndim)
    if sum(split_sizes) != input.shape[d]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {input.shape[d]} (input tensor's "
                           f"size at dimension {dim}), but got split_sizes={list(split_sizes)}")
    return input.split(list(split_sizes), d)


@public("Tensor")
def sum_to_size(input, *size):
    """Sum ``input`` down to ``size`` (which must broadcast to its shape)."""
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    size = tuple(size)
    try:
        expandable = broadcast_shapes(size, tuple(input.shape)) == tuple(input.shape)
    except RuntimeError:
        expandable = False
    if not expandable:
        raise RuntimeError(f"size {{{', '.join(map(str, size))}}} is not expandable to size "
                           f"{{{', '.join(map(str, input.shape))}}}.")
    return sum_to(input, size)


def _triangle_indices(row, col, offset, dtype, device, lower):
    mask = ones(row, col, dtype=int64, device=device)
    mask = mask.tril(offset) if lower else mask.triu(offset)
    return mask.nonzero().t().to(dtype).contiguous()


@public("plugtorch")
def tril_indices(row, col, offset=0, *, dtype=int64, device=None, layout=None):
    """The (row, column) indices of the lower triangle of a row x col matrix, as a 2 x N tensor."""
    return _triangle_indices(row, col, offset, dtype, device, True)


@public("plugtorch")
def triu_indices(row, col, offset=0, *, dtype=int64, device=None, layout=None):
    """The (row, column) indices of the upper triangle of a row x col matrix, as a 2 x N tensor."""
    return _triangle_indices(row, col, offset, dtype, device, False)


@op(exposed=_EVERYWHERE)
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices with the last dim of ``input`` on their ``offset`` diagonal, in dims dim1, dim2 of
    the result (one more dim than input)."""
    n = input.ndim + 1
    d1, d2 = _wrap_dim(dim1, n), _wrap_dim(dim2, n)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    k = input.shape[-1] if input.ndim else 1
    m = k + abs(offset)
    out = zeros(*input.shape[:-1], m, m, dtype=input.dtype, device=input._backend.name)
    idx = arange(k, device=input._backend.name)
    out[(Ellipsis, idx - min(offset, 0), idx + max(offset, 0))] = input  # index_put: differentiable
    rest = [d for d in range(n) if d not in (d1, d2)]
    order = [0] * n  # out's dims are (rest..., d1, d2): put them back where dim1 and dim2 say
    for src, dst in enumerate(rest + [d1, d2]):
        order[dst] = src
    return out.permute(order).contiguous()  # torch's result is contiguous


@op(operands=2, exposed=_EVERYWHERE)
def take(input, index):
    """The elements of ``input`` read as 1-D at ``index`` (an integer tensor; negative counts from
    the end), in the index's shape."""
    if index.dtype is not int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {_word(index.dtype)}")
    n = input.numel()
    if index.numel():
        lo, hi = int(index.min().item()), int(index.max().item())
        bad = hi if hi >= n else lo if lo < -n else None
        if bad is not None:
            raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")
    return input.reshape(-1)[index]


def _word(dt) -> str:
    return {"float32": "Float", "float64": "Double", "float16": "Half", "int32": "Int", "int16": "Short",
            "int8": "Char", "uint8": "Byte", "bool": "Bool"}.get(dt.name, dt.name)


def _vector(t):
    if t.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")


@public("plugtorch")
def cartesian_prod(*tensors):
    """Every combination of one element from each 1-D tensor, as rows (one tensor: itself)."""
    for t in tensors:
        _vector(t)
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)


@public("plugtorch")
def combinations(input, r=2, with_replacement=False):
    """The length-``r`` combinations of the elements of a 1-D tensor, as rows, in
    itertools.combinations' order (with_replacement: combinations_with_replacement's)."""
    _vector(input)
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return zeros(0, dtype=input.dtype, device=input._backend.name)  # outside the graph, as torch's
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(pick(range(input.shape[0]), r))  # positions only: the shape decides them
    if not rows:
        return input[:0].reshape(0, r)
    return input[tensor(rows, dtype=int64, device=input._backend.name)]


@public(*_EVERYWHERE)
def msort(input):
    """``input`` sorted along dim 0 (the values of ``sort(input, 0)``)."""
    return input.sort(0).values


@public("plugtorch")
def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False, out=None,
             layout=None):
    """``steps`` points from base**start to base**end, their exponents evenly spaced."""
    if out is not None:
        raise TypeError("logspace(): out= is not supported; assign the result instead")
    exps = linspace(start, end, steps, dtype=float64, device=device)
    values = float(base) ** exps
    target = dtype or get_default_dtype()
    if not target.is_floating_point:
        values = values.trunc()  # torch casts each power, which truncates
    return values.to(target).requires_grad_(requires_grad)


# -- the in-place view methods: x takes the view's shape and strides ------------------------------

def _becomes(x, view, name):
    _check_leaf(x, name)
    x._data = view._data
    if view.grad_fn is not None:
        x.grad_fn = view.grad_fn
    x._vc[0] += 1
    return x


@public("Tensor")
def t_(input):
    """In place: ``input`` becomes its transpose (``t``)."""
    return _becomes(input, input.t(), "t_")


@public("Tensor")
def transpose_(input, dim0, dim1):
    """In place: ``input`` becomes ``input.transpose(dim0, dim1)``."""
    return _becomes(input, input.transpose(dim0, dim1), "transpose_")


@public("Tensor")
def swapaxes_(input, axis0, axis1):
    """In place: ``input`` becomes ``input.swapaxes(axis0, axis1)``."""
    return _becomes(input, input.transpose(axis0, axis1), "swapaxes_")


@public("Tensor")
def swapdims_(input, dim0, dim1):
    """In place: ``input`` becomes ``input.swapdims(dim0, dim1)``."""
    return _becomes(input, input.transpose(dim0, dim1), "swapdims_")


@public("Tensor")
def squeeze_(input, dim=None):
    """In place: ``input`` becomes ``input.squeeze(dim)``."""
    return _becomes(input, input.squeeze() if dim is None else input.squeeze(dim), "squeeze_")


@public("Tensor")
def unsqueeze_(input, dim):
    """In place: ``input`` becomes ``input.unsqueeze(dim)``."""
    return _becomes(input, input.unsqueeze(dim), "unsqueeze_")


@public("Tensor")
def fill_diagonal_(input, fill_value, wrap=False):
    """In place: ``fill_value`` on the main diagonal (all dims of one size beyond 2-D); with
    ``wrap``, a tall matrix's diagonal starts again every ``cols + 1`` rows, as NumPy's."""
    if input.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if input.ndim > 2 and len(set(input.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    n = min(input.shape)
    dev = input._backend.name
    idx = arange(n, device=dev)
    if input.ndim == 2 and wrap and input.shape[0] > input.shape[1] + 1:
        rows, cols = input.shape
        flat = arange(0, rows * cols, cols + 1, device=dev)
        input.view(-1)[flat] = fill_value
        return input
    input[(idx,) * input.ndim] = fill_value
    return input


# -- creation from other objects ------------------------------------------------------------------

@public("plugtorch")
def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """``obj`` as a tensor: the tensor itself (or an alias) where dtype and device already fit
    and ``copy`` is not True, else a converted copy; ``copy=False`` refuses to copy."""
    if isinstance(obj, Tensor):
        same = (dtype is None or dtype is obj.dtype) and (device is None or obj.device == device)
        if copy is False and not same:
            raise ValueError(f"can't alias tensor with dtype '{_word(obj.dtype)}' into dtype "
                             f"'{_word(dtype) if dtype is not None else _word(obj.dtype)}'.")
        if same and not copy:
            out = obj
        else:
            out = obj.to(device=device, dtype=dtype, copy=True) if copy else obj.to(device=device, dtype=dtype)
    elif copy:
        out = tensor(obj, dtype=dtype, device=device)
    else:
        out = as_tensor(obj, dtype=dtype, device=device)
    return out.requires_grad_(True) if requires_grad else out


@public("plugtorch")
def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor reading ``buffer`` (any object with the buffer protocol) as ``count``
    elements of ``dtype`` from byte ``offset``, sharing its memory on the host backend."""
    size = memoryview(buffer).nbytes
    if size == 0 or count == 0:
        raise ValueError(f"both buffer length ({size}) and count ({count}) must not be 0")
    if not 0 <= offset < size:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than buffer length "
                         f"({size} bytes) minus 1")
    item = dtype.itemsize
    if count < 0:
        if (size - offset) % item:
            raise ValueError(f"buffer length ({size - offset} bytes) after offset ({offset} bytes) must be a "
                             f"multiple of element size ({item})")
        count = (size - offset) // item
    elif offset + count * item > size:
        raise ValueError(f"requested buffer length ({count} * {item} bytes) after offset ({offset} bytes) must not "
                         f"be greater than actual buffer length ({size} bytes)")
    host = np.frombuffer(buffer, dtype=np.dtype(dtype.name if dtype.name != "bool" else "bool"), count=count,
                         offset=offset)
    out = from_numpy(host)
    return out.requires_grad_(True) if requires_grad else out


@public(*_EVERYWHERE)
def narrow_copy(input, dim, start, length):
    """A contiguous copy of ``input.narrow(dim, start, length)``."""
    return input.narrow(dim, start, length).clone()
