"""Indexing primitives the array API standard does not have, built from the ones it does.

The standard indexes with ints, in-range slices, ``None``, ``...`` and one boolean mask
as the sole index; it writes in place only at such indices; it has no scatter, no
padding and no strided views. plugtorch's contract wants NumPy semantics (integer
arrays mixed with slices, out-of-range slice bounds), writes at integer indices, sums
at repeated indices, constant padding and sliding windows. Each is emulated here:

* advanced indexing: the basic part of the index first, then one ``take`` on the
  advanced axes flattened together, then the result axes moved where NumPy puts them;
* writes and scatters: the flat positions an index selects are found by indexing an
  ``arange`` the same way; repeated positions are summed (or the last write kept)
  after a stable sort, and the results land through a boolean mask, the one
  data-dependent write the standard has;
* ``windows``: a copy made with ``take`` (the standard has no strides, so no views);
* ``pad``: a ``full`` array with the input written into its middle.
"""
from __future__ import annotations

import math


def _is_array(k) -> bool:
    return hasattr(k, "dtype") and hasattr(k, "shape")


class _NewAxisPick:
    """A 0-d bool mask: NumPy adds an axis of length 1 and keeps it (True) or empties it (False)."""

    def __init__(self, xp, keep: bool):
        self.array = xp.zeros((1 if keep else 0,), dtype=xp.int64)


def _normalise(xp, shape, index):
    """``index`` as a list with ``...`` expanded, every axis covered, bool masks as int arrays.

    Entries are in-range ints and slices, None, int64 arrays (negative values wrapped,
    bounds checked) and _NewAxisPick. Returns (entries, whether any is advanced).
    """
    if not isinstance(index, tuple):
        index = (index,)

    def span(k):
        return k.ndim if _is_array(k) and k.dtype == xp.bool else 1
    consumed = sum(span(k) for k in index if k is not None and k is not Ellipsis)
    if consumed > len(shape):
        raise IndexError(f"too many indices for array of dimension {len(shape)}")
    if not any(k is Ellipsis for k in index):  # `in` would compare arrays with ==
        index = index + (Ellipsis,)
    out, dim, advanced = [], 0, False
    for k in index:
        if k is Ellipsis:
            out.extend(slice(None) for _ in range(len(shape) - consumed))
            dim += len(shape) - consumed
            consumed = len(shape)  # a second ... expands to nothing
        elif k is None:
            out.append(None)
        elif isinstance(k, slice):  # the standard refuses a stop past the end; NumPy clips it
            start, stop, step = k.indices(shape[dim])
            if len(range(start, stop, step)) == 0:
                out.append(slice(0, 0, 1))
            else:
                out.append(slice(start, stop if stop >= 0 else None, step))
            dim += 1
        elif _is_array(k) and k.dtype == xp.bool and k.ndim == 0:
            out.append(_NewAxisPick(xp, bool(k)))
            advanced = True
        elif _is_array(k) and k.dtype == xp.bool:
            if tuple(k.shape) != tuple(shape[dim:dim + k.ndim]):
                raise IndexError(f"boolean index of shape {tuple(k.shape)} does not match the indexed "
                                 f"dims {tuple(shape[dim:dim + k.ndim])}")
            out.extend(xp.nonzero(k))  # a mask is the int arrays of its True positions
            dim += k.ndim
            advanced = True
        elif _is_array(k):
            size = shape[dim]
            k = xp.astype(k, xp.int64)
            if k.size and bool(xp.any((k < -size) | (k >= size))):
                raise IndexError(f"index out of range for dimension {dim} with size {size}")
            out.append(xp.where(k < 0, k + size, k))
            dim += 1
            advanced = True
        else:
            size = shape[dim]
            if not -size <= k < size:
                raise IndexError(f"index {k} is out of bounds for axis {dim} with size {size}")
            out.append(k)
            dim += 1
    return out, advanced


def make_getitem(xp):
    def getitem(x, index):
        entries, advanced = _normalise(xp, tuple(x.shape), index)
        if not advanced:
            return x[tuple(entries)]
        # NumPy counts ints beside arrays as advanced indices too: they broadcast with them.
        # Every entry now makes one axis of y (an advanced one keeps its axis whole), so
        # the advanced axes can be flattened together and read with one take.
        adv = [i for i, k in enumerate(entries) if not (k is None or isinstance(k, slice))]
        y = x[tuple(None if isinstance(k, _NewAxisPick) else slice(None) if i in adv else k
                    for i, k in enumerate(entries))]
        idx = xp.broadcast_arrays(*[entries[i].array if isinstance(entries[i], _NewAxisPick)
                                    else xp.asarray(entries[i], dtype=xp.int64) for i in adv])
        rest = [i for i in range(y.ndim) if i not in adv]
        sizes = [y.shape[i] for i in adv]
        y = xp.permute_dims(y, tuple(adv + rest))
        rest_shape = tuple(y.shape[len(adv):])
        y = xp.reshape(y, (math.prod(sizes),) + rest_shape)
        linear, stride = idx[-1], sizes[-1]
        for k, n in zip(reversed(idx[:-1]), reversed(sizes[:-1])):
            linear = linear + k * stride
            stride *= n
        bshape = tuple(linear.shape)
        out = xp.reshape(xp.take(y, xp.reshape(linear, (math.prod(bshape),)), axis=0), bshape + rest_shape)
        if adv == list(range(adv[0], adv[0] + len(adv))) and adv[0] > 0:
            # adjacent advanced indices keep their place, as in NumPy; apart, they lead
            nb, p = len(bshape), adv[0]
            out = xp.permute_dims(out, tuple(range(nb, nb + p)) + tuple(range(nb))
                                  + tuple(range(nb + p, out.ndim)))
        return out
    return getitem


def _positions(xp, getitem, shape, index):
    """The flat (row-major) positions ``x[index]`` selects, shaped as ``x[index]``."""
    n = math.prod(shape)
    return getitem(xp.reshape(xp.arange(n, dtype=xp.int64), tuple(shape)), index)


def _sorted_groups(xp, positions, values):
    """Positions sorted (stably) with their values, and where each run of equal positions starts."""
    order = xp.argsort(positions, stable=True)
    p, v = xp.take(positions, order), xp.take(values, order, axis=0)
    starts = xp.concat([xp.asarray([True]), p[1:] != p[:-1]]) if p.shape[0] else xp.zeros((0,), dtype=xp.bool)
    return p, v, starts


def _write_flat(xp, flat, targets, values):
    """``flat[targets] = values`` for sorted, distinct ``targets``, through a boolean mask."""
    mask = xp.isin(xp.arange(flat.shape[0], dtype=xp.int64), targets)
    flat[mask] = values
    return flat


def _accumulate(xp, x, positions, values):
    """x with ``values`` added at flat ``positions``; repeated positions sum, in their order."""
    n = math.prod(x.shape)
    positions = xp.reshape(positions, (math.prod(positions.shape),))
    values = xp.reshape(values, (positions.shape[0],))
    p, v, starts = _sorted_groups(xp, positions, values)
    flat = xp.reshape(xp.asarray(x, copy=True), (n,))
    if p.shape[0] == 0:
        return xp.reshape(flat, tuple(x.shape))
    group = xp.cumulative_sum(xp.astype(starts, xp.int64)) - 1
    first = xp.nonzero(starts)[0]
    rank = xp.arange(p.shape[0], dtype=xp.int64) - xp.take(first, group)
    # One pass per repeat count: pass r adds every position's r-th value, so the sum is
    # exact and in index order (no cumulative-sum differences); the cost grows with the
    # largest number of repeats of one position.
    sums = xp.take(v, first)
    ngroups = first.shape[0]
    for r in range(1, int(xp.max(rank)) + 1):
        sel = rank == r
        has = xp.isin(xp.arange(ngroups, dtype=xp.int64), group[sel])
        sums[has] = sums[has] + v[sel]
    targets = xp.take(p, first)
    current = xp.take(flat, targets)
    return xp.reshape(_write_flat(xp, flat, targets, current + sums), tuple(x.shape))


def make_setitem(xp):
    getitem = make_getitem(xp)

    def setitem(x, index, value):
        entries, advanced = _normalise(xp, tuple(x.shape), index)
        if not advanced:
            x[tuple(entries)] = value
            return None
        # Integer-array writes are not in the standard: find the positions, keep the last
        # value written to each (as NumPy does), and write the whole array back in place.
        pos = _positions(xp, getitem, x.shape, index)
        vals = xp.broadcast_to(xp.asarray(value, dtype=x.dtype), tuple(pos.shape))
        pos = xp.reshape(pos, (math.prod(pos.shape),))
        vals = xp.reshape(vals, (pos.shape[0],))
        p, v, starts = _sorted_groups(xp, pos, vals)
        if p.shape[0] == 0:
            return None
        last = xp.concat([starts[1:], xp.asarray([True])])
        flat = xp.reshape(xp.asarray(x, copy=True), (math.prod(x.shape),))
        _write_flat(xp, flat, p[last], v[last])
        x[...] = xp.reshape(flat, tuple(x.shape))
        return None
    return setitem


def make_index_add(xp):
    getitem = make_getitem(xp)

    def index_add(x, index, values):
        pos = _positions(xp, getitem, x.shape, index)
        values = xp.broadcast_to(xp.asarray(values, dtype=x.dtype), tuple(pos.shape))
        return _accumulate(xp, x, pos, values)
    return index_add


def make_scatter_add(xp):
    def scatter_add(x, axis, index, src):
        # position of index[i, j, ...] with the `axis` coordinate replaced by its value
        strides = [math.prod(x.shape[k + 1:]) for k in range(x.ndim)]
        pos = xp.zeros(tuple(index.shape), dtype=xp.int64)
        for k in range(x.ndim):
            if k == axis:
                coord = index
            else:
                shape = [1] * x.ndim
                shape[k] = index.shape[k]
                coord = xp.reshape(xp.arange(index.shape[k], dtype=xp.int64), tuple(shape))
            pos = pos + coord * strides[k]
        src = src[tuple(slice(0, n) for n in index.shape)]
        return _accumulate(xp, x, pos, src)
    return scatter_add


def make_pad(xp):
    def pad(x, widths, value):
        shape = tuple(n + before + after for n, (before, after) in zip(x.shape, widths))
        fill = int(value) if xp.isdtype(x.dtype, "integral") and isinstance(value, float) else value
        out = xp.full(shape, fill, dtype=x.dtype)
        if x.size:
            out[tuple(slice(before, before + n) for n, (before, _) in zip(x.shape, widths))] = x
        return out
    return pad


def make_windows(xp):
    def windows(x, window, strides, dilation):
        # A copy, not a view: the standard has no strides. Each windowed axis becomes two
        # (count, window) with one take of the window offsets, then the window axes go last.
        n = len(window)
        lead = x.ndim - n
        out = x
        for i, (w, s, d) in enumerate(zip(window, strides, dilation)):
            axis = lead + 2 * i
            count = (out.shape[axis] - d * (w - 1) - 1) // s + 1
            starts = xp.reshape(xp.arange(count, dtype=xp.int64) * s, (count, 1))
            offsets = xp.reshape(xp.arange(w, dtype=xp.int64) * d, (1, w))
            idx = xp.reshape(starts + offsets, (count * w,))
            out = xp.take(out, idx, axis=axis)
            out = xp.reshape(out, tuple(out.shape[:axis]) + (count, w) + tuple(out.shape[axis + 1:]))
        order = (tuple(range(lead)) + tuple(lead + 2 * i for i in range(n))
                 + tuple(lead + 2 * i + 1 for i in range(n)))
        return xp.permute_dims(out, order)
    return windows


def make_as_strided(xp):
    def as_strided(x, shape, strides, offset):
        # A copy, not a view: the standard has no strides. Entry (i_0, i_1, ...) is x's row-major
        # element offset + sum(i_k * strides_k), one take of those positions.
        shape = tuple(shape)
        index = xp.full(shape, offset, dtype=xp.int64)
        for k, (n, s) in enumerate(zip(shape, strides)):
            along = tuple(n if i == k else 1 for i in range(len(shape)))
            index = index + xp.reshape(xp.arange(n, dtype=xp.int64) * s, along)
        flat = xp.reshape(x, (-1,))
        return xp.reshape(xp.take(flat, xp.reshape(index, (-1,)), axis=0), shape)
    return as_strided
