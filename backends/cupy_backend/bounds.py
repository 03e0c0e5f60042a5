"""Index bounds checks for the CuPy primitives, in debug mode only.

CuPy does not raise for an out-of-range index: gathers wrap around and scatters write
somewhere, silently. NumPy raises, and the core turns that into torch's error. Checking
costs a device reduction and a host read (a synchronisation) per index array, so it runs
where the core runs its other value checks on device backends: in debug mode
(``plugtorch.set_debug(True)``, ``PLUGTORCH_DEBUG=1``). Each index array is checked by one
reduction (``any`` of the out-of-range mask) and one read of its 0-d result; only when that
says "bad" is more read, to name the offending index as NumPy's message does.
"""
from __future__ import annotations

from collections.abc import Callable

from plugtorch.backend_api import is_debug


def _check(xp, index, size: int, axis: int) -> None:
    bad = xp.logical_or(index < -size, index >= size)
    if bool(bad.any()):  # the one host read; only reached in debug mode
        first = int(index[bad].reshape(-1)[0])
        raise IndexError(f"index {first} is out of bounds for axis {axis} with size {size}")


def _array_dims(x_ndim: int, index: tuple):
    """(dim, array) for each integer index array in a NumPy-style index tuple."""
    def span(k):
        return k.ndim if getattr(k, "dtype", None) is not None and k.dtype.kind == "b" else 1
    consumed = sum(span(k) for k in index if k is not None and k is not Ellipsis)
    dim = 0
    for k in index:
        if k is Ellipsis:
            dim += x_ndim - consumed
            continue
        if k is None:
            continue
        if getattr(k, "dtype", None) is not None and k.dtype.kind in "iu":
            yield dim, k
        dim += span(k)


def checked(xp, table: dict[str, Callable]) -> dict[str, Callable]:
    """The indexing primitives of ``table`` with bounds checks in debug mode."""
    gather, scatter_add = table["gather"], table["scatter_add"]
    getitem, setitem, index_add = table["getitem"], table["setitem"], table["index_add"]

    def check_tuple(x, index):
        for dim, k in _array_dims(x.ndim, index if isinstance(index, tuple) else (index,)):
            if dim < x.ndim:
                _check(xp, k, x.shape[dim], dim)

    def gather_(x, axis, index):
        if is_debug() and index.size:
            _check(xp, index, x.shape[axis], axis)
        return gather(x, axis, index)

    def scatter_add_(x, axis, index, src):
        if is_debug() and index.size:
            _check(xp, index, x.shape[axis], axis)
        return scatter_add(x, axis, index, src)

    def getitem_(x, index):
        if is_debug():
            check_tuple(x, index)
        return getitem(x, index)

    def setitem_(x, index, value):
        if is_debug():
            check_tuple(x, index)
        return setitem(x, index, value)

    def index_add_(x, index, values):
        if is_debug():
            check_tuple(x, index)
        return index_add(x, index, values)

    return {"gather": gather_, "scatter_add": scatter_add_, "getitem": getitem_, "setitem": setitem_,
            "index_add": index_add_}
