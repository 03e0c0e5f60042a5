"""Rearranging ops: flip, roll, repeat/tile, movedim, split/chunk, pad, tril/triu.

All are compositions of the movement primitives (slices, reshape, permute,
broadcast, pad), so their gradients come from those ops' rules; ``flip`` and
``pad`` record their own (cheaper) adjoints, and ``split``/``chunk`` give their
pieces one node whose rule concatenates the pieces' gradients.
"""
from __future__ import annotations

import builtins

from .. import anomaly
from ..dispatch import edge
from ..dtypes import bool_, int64
from ..grad_mode import _state as _grad_state
from ..grad_mode import no_grad
from ..graph import Node, OutputNode
from ..optable import MODES, Done, op
from ..tensor import Tensor, _wrap_dim
from . import elementwise as ew
from ._args import shape_args
from ._jvp import linear
from .creation import arange, tensor, zeros, zeros_like
from .index import index_select
from .shape import cat, clone, permute

_EVERYWHERE = ("plugtorch", "Tensor")


def _dims(dims, ndim, op):
    dims = (dims,) if isinstance(dims, builtins.int) else tuple(dims)
    out = tuple(_wrap_dim(d, ndim) for d in dims)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{op}(): dims {list(dims)} has duplicate entries")
    return out


def _slice_along(x, dim, start, stop):
    return x[(slice(None),) * dim + (slice(start, stop),)]


# -- flip ------------------------------------------------------------------------------

def _flip_rule(ctx, g):
    return flip(g, ctx.attrs["dims"])


def _lower_flip(backend, x, *, dims):
    p = backend.primitives
    return p["copy"](p["getitem"](x, tuple(slice(None, None, -1) if i in dims else slice(None)
                                           for i in range(x.ndim))))


@op(lower=_lower_flip, bind=lambda input, dims: ((input,), {"dims": _dims(dims, input.ndim, "flip")}),
    derivative=_flip_rule, exposed=_EVERYWHERE, jvp=linear("flip"))
def flip(input, *, dims):
    """Reverse the order of elements along ``dims`` (a copy, as in torch)."""


@op(exposed=_EVERYWHERE)
def fliplr(input):
    """Flip the columns (dim 1) of an at least 2-D tensor."""
    if input.ndim < 2:
        raise RuntimeError("fliplr: input tensor must be at least 2-D")
    return flip(input, (1,))


@op(exposed=_EVERYWHERE)
def flipud(input):
    """Flip the rows (dim 0) of an at least 1-D tensor."""
    if input.ndim < 1:
        raise RuntimeError("flipud: input tensor must be at least 1-D")
    return flip(input, (0,))


# -- roll, repeat, tile, movedim --------------------------------------------------------

@op(exposed=_EVERYWHERE)
def roll(input, shifts, dims=None):
    """Shift elements cyclically along ``dims`` (the flattened tensor when dims is None)."""
    if dims is None:
        if not isinstance(shifts, builtins.int):
            shifts = tuple(shifts)
            if len(shifts) != 1:
                raise RuntimeError(f"roll(): shifts {list(shifts)} needs dims of the same length")
            shifts = shifts[0]
        return roll(input.reshape(-1), shifts, 0).reshape(input.shape)
    shifts = (shifts,) if isinstance(shifts, builtins.int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, builtins.int) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    out = input
    for s, d in zip(shifts, dims):
        d = _wrap_dim(d, input.ndim)
        n = input.shape[d]
        if n == 0 or s % n == 0:
            continue
        s %= n
        out = cat([_slice_along(out, d, n - s, None), _slice_along(out, d, 0, n - s)], d)
    return out if out is not input else clone(input)


def _repeat_args(input, *sizes):
    sizes = shape_args(sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of "
                           f"dimensions of tensor (got {len(sizes)} repeat dims for a {input.ndim}-D tensor)")
    if any(r < 0 for r in sizes):
        raise RuntimeError(f"Trying to create tensor with negative dimension: repeats {list(sizes)}")
    return (input,), {"sizes": sizes}


@op(bind=_repeat_args, exposed=("Tensor",))
def repeat(input, *, sizes):
    """Tile the tensor ``sizes[i]`` times along dim i (sizes may add leading dims)."""
    shape = (1,) * (len(sizes) - input.ndim) + tuple(input.shape)
    interleaved, expanded, final = [], [], []
    for r, s in zip(sizes, shape):
        interleaved += [1, s]
        expanded += [r, s]
        final.append(r * s)
    # clone: the result owns its memory even where the reshape could stay a broadcast view
    return clone(input.reshape(interleaved).expand(expanded).reshape(final))


@op(exposed=_EVERYWHERE)
def tile(input, dims):
    """Repeat the tensor along each dim; ``dims`` shorter than ndim is padded with leading 1s."""
    dims = tuple(dims) if not isinstance(dims, builtins.int) else (dims,)
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


@op(view=True, exposed=_EVERYWHERE, aliases=("moveaxis",), jvp=linear("movedim"))
def movedim(input, source, destination):
    """Move dims ``source`` to positions ``destination``; the others keep their order."""
    n = input.ndim
    src = (source,) if isinstance(source, builtins.int) else tuple(source)
    dst = (destination,) if isinstance(destination, builtins.int) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({list(src)} dims) should contain "
            f"the same number of dims as destination ({list(dst)} dims)")
    src, dst = _dims(src, n, "movedim"), _dims(dst, n, "movedim")
    if n == 0:
        return input
    order = [d for d in range(n) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, order)


moveaxis = movedim


# -- split, chunk -----------------------------------------------------------------------

@op(multi_output=True, exposed=_EVERYWHERE)
def split(tensor, split_size_or_sections, dim=0):
    """Views of consecutive pieces along ``dim``: equal pieces of a size, or a list of sizes."""
    d = _wrap_dim(dim, tensor.ndim)
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, builtins.int):
        size = split_size_or_sections
        if size < 0 or (size == 0 and n != 0):
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {n} (split_size={size})")
        if n == 0:
            return (_slice_along(tensor, d, 0, 0),)
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if builtins.sum(sizes) != n or any(s < 0 for s in sizes):
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
                f"dimension {d}), but got split_sizes={sizes}")
    if tensor.requires_grad and _grad_state.enabled and not MODES.on:
        with no_grad():
            pieces = _pieces(tensor, d, sizes)
        return _share_node(pieces, tensor, d, sizes, isinstance(split_size_or_sections, builtins.int))
    return _pieces(tensor, d, sizes)


def _pieces(tensor, d, sizes):
    out, start = [], 0
    for s in sizes:
        out.append(_slice_along(tensor, d, start, start + s))
        start += s
    return tuple(out)


class _SplitNode(Node):
    """The one node of a split's pieces (torch's SplitBackward0 / SplitWithSizesBackward0), reached
    through an OutputNode per piece: the engine hands its rule the pieces' gradients as a list."""

    __slots__ = ("n_outputs",)


_SPLIT_NODES = {even: type(name, (_SplitNode,), {"__slots__": (), "__module__": "plugtorch.core.graph"})
                for even, name in ((True, "SplitBackward0"), (False, "SplitWithSizesBackward0"))}


def _split_rule(ctx, grads):
    """The input's gradient as one ``cat`` of the pieces' (zeros only for a piece none reached):
    each piece's own gradient, as a slice's, is a zero tensor the size of the whole, and the
    engine summed one per piece (three full-size buffers for a transformer's q, k, v)."""
    d, sizes = ctx.attrs["dim"], ctx.attrs["sizes"]
    shape, dtype = ctx.meta[0]
    device = next(g for g in grads if g is not None).device
    parts = []
    for g, s in zip(grads, sizes):
        if g is None:
            g = zeros(tuple(shape[:d]) + (s,) + tuple(shape[d + 1:]), dtype=dtype, device=device)
        parts.append(g)
    return cat(parts, d)


def _share_node(pieces, tensor, d, sizes, even):
    """``pieces`` (views made without a graph) given one node whose rule is ``_split_rule``."""
    node = _SPLIT_NODES[even]("split", _split_rule, (edge(tensor),), ((tensor._data.shape, tensor.dtype),),
                              None, None, {"dim": d, "sizes": tuple(sizes)})
    node.n_outputs = len(pieces)
    if anomaly._state.enabled:
        node.trace = anomaly.creation_trace()
    for i, piece in enumerate(pieces):
        piece.grad_fn = OutputNode(node, i)
        piece.requires_grad = True
    return pieces


@op(multi_output=True, exposed=_EVERYWHERE)
def tensor_split(input, indices_or_sections, dim=0):
    """Split into n nearly equal pieces (the first n % size one larger) or at the given indices."""
    d = _wrap_dim(dim, input.ndim)
    n = input.shape[d]
    if isinstance(indices_or_sections, builtins.int):
        k = indices_or_sections
        if k <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {k}")
        sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
        bounds = [builtins.sum(sizes[:i]) for i in range(1, k)]
    else:
        bounds = [int(i) for i in indices_or_sections]
    edges = [0] + bounds + [n]
    return tuple(_slice_along(input, d, min(a, n), min(max(a, b), n)) for a, b in zip(edges, edges[1:]))


@op(multi_output=True, exposed=_EVERYWHERE)
def chunk(input, chunks, dim=0):
    """Split into ``chunks`` views of ceil(size / chunks) along ``dim`` (the last may be smaller)."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = _wrap_dim(dim, input.ndim)
    n = input.shape[d]
    return split(input, -(-n // chunks), d) if n else split(input, 0, d) * chunks


# -- pad --------------------------------------------------------------------------------

def _pad_rule(ctx, g):
    widths = ctx.attrs["widths"]
    return g[tuple(slice(lo, g.shape[i] - hi) for i, (lo, hi) in enumerate(widths))]


def _pad_args(input, pad, mode="constant", value=None):
    if mode != "constant":
        from .padding import mode_pad  # ops/padding.py is imported after this module
        return Done(mode_pad(input, pad, mode, value))
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise RuntimeError(f"Padding length must be divisible by 2, got {len(pad)} values {list(pad)}")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(f"Padding length too large: {len(pad)} values for a {input.ndim}-D input "
                           f"(at most 2 per dimension)")
    widths = [(0, 0)] * input.ndim
    for i in range(len(pad) // 2):
        widths[input.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    x = input
    if any(lo < 0 or hi < 0 for lo, hi in widths):
        crop = tuple(slice(-min(lo, 0), x.shape[i] + min(hi, 0)) for i, (lo, hi) in enumerate(widths))
        for i, (lo, hi) in enumerate(widths):
            if x.shape[i] - max(-lo, 0) - max(-hi, 0) < 0:
                raise RuntimeError(f"pad(): negative padding {list(pad)} removes more than the "
                                   f"{x.shape[i]} elements of dimension {i}")
        x = x[crop]
        widths = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
    if not any(lo or hi for lo, hi in widths):
        return Done(x if x is not input else clone(input))
    return (x,), {"widths": tuple(widths), "value": 0 if value is None else value}


@op(primitive="pad", bind=_pad_args, derivative=_pad_rule, exposed=("nn.functional",))
def pad(input, *, widths, value):
    """torch.nn.functional.pad: ``pad`` = (last_lo, last_hi, prev_lo, prev_hi, ...).

    Negative widths crop, as in torch. Modes 'reflect', 'replicate' and 'circular' are the
    op ``mode_pad`` (``ops/padding.py``).
    """


# -- tril, triu -------------------------------------------------------------------------

def _band(op, input, diagonal, lower):
    if input.ndim < 2:
        raise RuntimeError(f"{op}: input tensor must have at least 2 dimensions, got {input.ndim}")
    n, m = input.shape[-2], input.shape[-1]
    dev = input._backend.name
    offset = arange(m, device=dev).reshape(1, m) - arange(n, device=dev).reshape(n, 1)
    keep = ew.le(offset, diagonal) if lower else ew.ge(offset, diagonal)
    return ew.where(keep, input, zeros_like(input))


@op(exposed=_EVERYWHERE, inplace=True)
def tril(input, diagonal=0):
    """The lower triangle of the last two dims (j - i <= diagonal); the rest zero."""
    return _band("tril", input, diagonal, True)


@op(exposed=_EVERYWHERE, inplace=True)
def triu(input, diagonal=0):
    """The upper triangle of the last two dims (j - i >= diagonal); the rest zero."""
    return _band("triu", input, diagonal, False)


# -- unbind, narrow, ravel, repeat_interleave, meshgrid ------------------------------------

@op(multi_output=True, exposed=_EVERYWHERE)
def unbind(input, dim=0):
    """The slices along ``dim``, each without that dim (views)."""
    if input.ndim == 0:
        raise IndexError("unbind(): Dimension specified as 0 but tensor has no dimensions")
    d = _wrap_dim(dim, input.ndim)
    return tuple(input[(slice(None),) * d + (i,)] for i in range(input.shape[d]))


@op(view=True, exposed=_EVERYWHERE, jvp=linear("narrow"))
def narrow(input, dim, start, length):
    """The view of ``length`` entries from ``start`` along ``dim``."""
    if input.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, input.ndim)
    n = input.shape[d]
    start = int(start)
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got {start})")
    start %= n if n else 1
    if length < 0 or start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return _slice_along(input, d, start, start + length)


@op(view=True, exposed=_EVERYWHERE, jvp=linear("ravel"))
def ravel(input):
    """The tensor as 1-D (a view when possible)."""
    return input.reshape(-1)


@op(exposed=_EVERYWHERE)
def repeat_interleave(input, repeats, dim=None, *, output_size=None):
    """Repeat each element ``repeats`` times (an int, or a 1-D tensor of per-element counts)."""
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else _wrap_dim(dim, x.ndim)
    if isinstance(repeats, Tensor) and repeats.numel() != 1:
        counts = repeats.tolist()  # the output's size depends on them (torch also reads them)
        if len(counts) != x.shape[d]:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                               f"repeats.size(0) = {len(counts)} and input.size({d}) = {x.shape[d]}")
        if any(c < 0 for c in counts):
            raise RuntimeError("repeats can not be negative")
        index = tensor([i for i, c in enumerate(counts) for _ in range(c)], dtype=int64,
                       device=x._backend.name)
        return index_select(x, d, index)
    r = int(repeats)
    if r < 0:
        raise RuntimeError("repeats can not be negative")
    shape = tuple(x.shape)
    expanded = x.unsqueeze(d + 1).expand(shape[:d + 1] + (r,) + shape[d + 1:])
    return clone(expanded.reshape(shape[:d] + (shape[d] * r,) + shape[d + 1:]))


def _meshgrid_args(*tensors, indexing="ij"):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"meshgrid: indexing must be one of 'xy' or 'ij', but received: {indexing}")
    for t in tensors:
        if not isinstance(t, Tensor) or t.ndim > 1:
            raise RuntimeError(f"meshgrid expects all tensors to be 0- or 1-dimensional tensors, got "
                               f"{t.ndim if isinstance(t, Tensor) else type(t).__name__}-D")
    return tuple(tensors), {"indexing": indexing}


@op(bind=_meshgrid_args, multi_output=True, exposed=("plugtorch",))
def meshgrid(*tensors, indexing):
    """Coordinate grids from 1-D tensors; indexing='xy' swaps the first two dims, as NumPy's."""
    flat = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(flat) >= 2
    if swap:
        flat[0], flat[1] = flat[1], flat[0]
    shape = tuple(t.shape[0] for t in flat)
    grids = []
    for i, t in enumerate(flat):
        view = [1] * len(flat)
        view[i] = shape[i]
        grids.append(t.reshape(view).expand(shape))
    if swap:  # 'xy' is 'ij' on (y, x, ...) with the first two grids swapped back
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


# -- rot90, diff, unfold --------------------------------------------------------------------

@op(exposed=_EVERYWHERE)
def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``dims``, from the first dim toward the
    second."""
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = _dims(dims, input.ndim, "rot90")
    k %= 4
    if k == 1:
        return flip(input, (d1,)).transpose(d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return flip(input, (d0,)).transpose(d0, d1)
    return clone(input)


def _diff_args(input, n=1, dim=-1, prepend=None, append=None):
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = _wrap_dim(dim, input.ndim)
    for name, t in (("prepend", prepend), ("append", append)):
        if t is not None and t.ndim != input.ndim:
            raise RuntimeError(f"diff expects prepend or append to be the same dimension as input "
                               f"({name} has {t.ndim} dims, input {input.ndim})")
    return (input, prepend, append), {"n": int(n), "dim": d}


@op(bind=_diff_args, exposed=_EVERYWHERE)
def diff(input, prepend, append, *, n, dim):
    """The n-th forward difference along ``dim`` (``ne`` for bool), after joining ``prepend``
    and ``append`` to ``input`` there."""
    parts = [t for t in (prepend, input, append) if t is not None]
    x = cat(parts, dim) if len(parts) > 1 else input
    for _ in range(n):
        size = x.shape[dim]
        later, earlier = _slice_along(x, dim, 1, size), _slice_along(x, dim, 0, builtins.max(size - 1, 0))
        x = ew.ne(later, earlier) if x.dtype is bool_ else later - earlier
    return x


def _unfold_positions(backend, n, size, step):
    """int64 (n, size): the positions window i takes along the unfolded dim."""
    p = backend.primitives
    starts = p["reshape"](p["arange"](0, n * step, step, int64), (n, 1))
    return p["add"](starts, p["reshape"](p["arange"](0, size, 1, int64), (1, size)))


def _unfold_order(ndim, dim):
    """Axes that take (others..., windows, size) to input's order with the windows at ``dim``."""
    others = [i for i in range(ndim) if i != dim]
    order = [0] * (ndim + 1)
    for k, i in enumerate(others):
        order[i] = k
    order[dim], order[ndim] = ndim - 1, ndim
    return tuple(order)


def _lower_unfold(backend, x, *, dimension, size, step):
    p = backend.primitives
    ndim = len(x.shape)
    last = tuple(i for i in range(ndim) if i != dimension) + (dimension,)
    win = p["windows"](p["permute"](x, last), (size,), (step,), (1,))  # (others..., n, size)
    return p["permute"](win, _unfold_order(ndim, dimension))


def _unfold_rule(ctx, g):
    from .index import index_put_zeros  # index builds on this module
    shape, dtype = ctx.meta[0]
    a = ctx.attrs
    d, size, step = a["dimension"], a["size"], a["step"]
    n = g.shape[d]
    moved = g.movedim(d, -2)  # (others..., n, size)
    positions = _unfold_positions(g._backend, n, size, step)
    others = tuple(s for i, s in enumerate(shape) if i != d)
    acc = index_put_zeros(moved, others + (shape[d],), dtype, (Ellipsis, positions))
    return acc.movedim(-1, d)


def _unfold_args(input, dimension, size, step):
    d = _wrap_dim(dimension, input.ndim)
    length = input.shape[d] if input.ndim else 1
    if size > length or size < 0:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if input.ndim == 0:  # torch: a 0-d tensor unfolds as a 1-element vector, to shape (size,)
        return Done(unfold(input.reshape(1), 0, size, step).reshape(size))
    return (input,), {"dimension": d, "size": int(size), "step": int(step)}


@op(lower=_lower_unfold, bind=_unfold_args, derivative=_unfold_rule, view=True, exposed=("Tensor",),
    jvp=linear("unfold"))
def unfold(input, *, dimension, size, step):
    """A view of every ``size``-long slice along ``dimension`` taken each ``step``: that dim
    becomes the number of slices and a new last dim of ``size`` holds them. The view is
    read-only (its slices overlap)."""
