"""as_strided (and Tensor.as_strided_) and empty_strided: tensors of a given shape and strides.

torch reads ``as_strided``'s positions (``storage_offset + sum(i_k * stride_k)``) from the
input's storage. plugtorch has no storage apart from the tensor, so it reads them from the
input's own elements in row-major order, which is its storage where torch's input is
contiguous and starts its storage (any freshly made tensor). A non-contiguous input is
refused (torch would read the memory under it, in an order plugtorch does not keep), and
``storage_offset`` counts from the input's first element.

On a backend with views (NumPy, CuPy: the ``as_strided`` primitive) the result is a view, so
writes through it reach the input, as in torch; elsewhere it is a copy gathered from those
positions. The gradient is torch's ``as_strided_backward``: the output's gradient summed into
the positions it was read from.
"""
from __future__ import annotations

import math
import numbers

from ..dtypes import int64
from ..optable import op, public
from ..tensor import Tensor
from ._jvp import linear
from .arrangements import _becomes
from .creation import arange, empty, zeros
from .index import scatter_add


def _ints(name, what, values):
    if isinstance(values, numbers.Integral):
        values = (values,)
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values):
        raise TypeError(f"{name}(): argument '{what}' must be tuple of ints, but got {values!r}")
    return tuple(int(v) for v in values)


def _check_geometry(size, stride, storage_offset, storage_elements, itemsize):
    """torch's checks of a strided geometry over a storage of ``storage_elements`` elements."""
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(n < 0 for n in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(size)}: {list(size)}")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: "
                           f"{list(stride)}")
    if storage_offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {storage_offset}")
    needed = 0 if 0 in size else storage_offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))
    if needed > storage_elements:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {storage_offset}, "
                           f"and itemsize {itemsize} requiring a storage size of {needed * itemsize} are out of "
                           f"bounds for storage of size {storage_elements * itemsize}")


def _as_strided_args(input, size, stride, storage_offset: int | None = None):
    if not isinstance(input, Tensor):
        raise TypeError(f"as_strided(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    size, stride = _ints("as_strided", "size", size), _ints("as_strided", "stride", stride)
    offset = 0 if storage_offset is None else int(storage_offset)
    if not input.is_contiguous():
        raise RuntimeError(
            f"as_strided(): the input (shape {list(input.shape)}, strides {list(input.stride())}) is not contiguous; "
            "plugtorch reads as_strided's positions from the input's elements in row-major order, where torch "
            "reads the memory under a non-contiguous tensor. Call .contiguous() first, or apply as_strided to "
            "the contiguous tensor this one is a view of")
    _check_geometry(size, stride, offset, input.numel(), input.dtype.itemsize)
    return (input,), {"size": size, "stride": stride, "storage_offset": offset}


def _positions(input, size, stride, storage_offset):
    """The flat position in ``input`` each output entry is read from, in the output's shape."""
    device = input._backend.name
    flat = zeros(size, dtype=int64, device=device) + storage_offset
    for d, (n, s) in enumerate(zip(size, stride)):
        step = arange(n, dtype=int64, device=device) * s
        flat = flat + step.reshape([-1 if i == d else 1 for i in range(len(size))])
    return flat


def _lower_as_strided(backend, x, *, size, stride, storage_offset):
    view = backend.primitives.get("as_strided")
    if view is not None:
        return view(x, size, stride, storage_offset)
    # a backend without views: the entries gathered from their positions (a copy)
    from ..dispatch import wrap
    index = _positions(wrap(x, backend), size, stride, storage_offset)
    prims = backend.primitives
    return prims["getitem"](prims["reshape"](x, (math.prod(x.shape),)), (index._data,))


def _as_strided_rule(ctx, g):
    shape = tuple(ctx.meta[0][0])  # the input's shape is all the rule reads of it
    a = ctx.attrs
    index = _positions(g, a["size"], a["stride"], a["storage_offset"]).reshape(-1)
    total = scatter_add(zeros(math.prod(shape), dtype=g.dtype, device=g._backend.name), 0, index, g.reshape(-1))
    return total.reshape(shape)


@op(lower=_lower_as_strided, bind=_as_strided_args, view=True, derivative=_as_strided_rule,
    exposed=("plugtorch", "Tensor"), jvp=linear("as_strided"))
def as_strided(input, *, size, stride, storage_offset):
    """The tensor of shape ``size`` whose entry (i_0, i_1, ...) is the input's element at row-major
    position ``storage_offset + sum(i_k * stride_k)``: a view where the backend has views."""


@public("Tensor")
def as_strided_(input, size, stride, storage_offset: int | None = None):
    """In place: ``input`` becomes ``input.as_strided(size, stride, storage_offset)``."""
    return _becomes(input, as_strided(input, size, stride, storage_offset), "as_strided_")


@public("plugtorch")
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A tensor of shape ``size`` with strides ``stride`` (where the backend has views), over
    fresh memory (zero-filled, as plugtorch's ``empty``)."""
    size, stride = _ints("empty_strided", "size", size), _ints("empty_strided", "stride", stride)
    if len(size) != len(stride):
        raise RuntimeError(f"dimensionality of sizes ({len(size)}) must match dimensionality of strides "
                           f"({len(stride)})")
    needed = 0 if 0 in size else 1 + sum((n - 1) * abs(s) for n, s in zip(size, stride))
    memory = empty(needed, dtype=dtype, device=device)
    out = as_strided(memory, size, stride, 0)
    return out.requires_grad_(requires_grad) if requires_grad else out


__all__ = ["as_strided", "empty_strided"]
