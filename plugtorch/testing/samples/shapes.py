"""Samples for shape and movement ops."""
from __future__ import annotations

from ._common import F, Sample, empty, is_torch, np, scalar

SAMPLES: dict = {}


def _reshape(g):
    return [
        Sample((g.randn(2, 6),), call=lambda m, x: x.reshape(3, 4), ref=lambda x: x.reshape(3, 4)),
        Sample((g.randn(2, 3, 2),), call=lambda m, x: m.reshape(x, (-1, 2)), ref=lambda x: x.reshape(-1, 2),
               desc="inferred -1"),
        Sample((g.randn(2, 3),), call=lambda m, x: x.t().reshape(6), ref=lambda x: x.T.reshape(6),
               desc="of a transpose: a copy"),
        Sample((scalar(2.0),), call=lambda m, x: x.reshape(1, 1), ref=lambda x: x.reshape(1, 1)),
        Sample((g.randn(1),), call=lambda m, x: x.reshape(()), ref=lambda x: x.reshape(()), desc="to 0d"),
        Sample((empty(0, 4),), call=lambda m, x: x.reshape(4, 0, 2), ref=lambda x: x.reshape(4, 0, 2)),
        Sample((g.randn(2, 3),), call=lambda m, x: x.reshape(4, -1), raises=RuntimeError, desc="bad size"),
    ]


def _permute(g):
    return [
        Sample((g.randn(2, 3, 4),), call=lambda m, x: x.permute(2, 0, 1), ref=lambda x: x.transpose(2, 0, 1)),
        Sample((g.randn(2, 3),), call=lambda m, x: m.permute(x, (-1, 0)), ref=lambda x: x.T),
        Sample((scalar(1.0),), call=lambda m, x: x.permute(()), ref=lambda x: x),
        Sample((empty(0, 3),), call=lambda m, x: x.permute(1, 0), ref=lambda x: x.T),
        Sample((g.randn(2, 3),), call=lambda m, x: x.permute(0, 0), raises=RuntimeError, desc="repeated dim"),
    ]


def _transpose(g):
    return [
        Sample((g.randn(2, 3, 4), 0, 2), ref=lambda x, a, b: np.swapaxes(x, a, b)),
        Sample((g.randn(2, 3), -1, -2), ref=lambda x, a, b: x.T),
        Sample((g.randn(2, 3),), call=lambda m, x: m.swapaxes(x, 0, 1), ref=lambda x: x.T, desc="swapaxes"),
        Sample((scalar(1.0), 0, -1), ref=lambda x, a, b: x),
        Sample((empty(0, 3), 0, 1), ref=lambda x, a, b: x.T),
        Sample((g.randn(2, 3), 0, 2), raises=IndexError, desc="dim out of range"),
    ]


def _t(g):
    return [
        Sample((g.randn(2, 3),), ref=lambda x: x.T),
        Sample((g.randn(3),), ref=lambda x: x),
        Sample((scalar(1.0),), ref=lambda x: x),
        Sample((empty(0, 3),), ref=lambda x: x.T),
        Sample((g.randn(2, 3, 4),), raises=RuntimeError, desc="3-D"),
    ]


def _squeeze(g):
    x = g.randn(1, 3, 1, 2)
    return [
        Sample((x,), ref=np.squeeze),
        Sample((x, 2), ref=lambda a, d: np.squeeze(a, d)),
        Sample((x, 1), ref=lambda a, d: a, desc="non-1 dim is kept"),
        Sample((x, (0, 2)), ref=lambda a, d: np.squeeze(a, d), desc="dim tuple"),
        Sample((scalar(1.0),), ref=lambda a: a),
        Sample((empty(0, 1),), ref=lambda a: a.reshape(0)),
    ]


def _unsqueeze(g):
    return [
        Sample((g.randn(2, 3), 0), ref=lambda a, d: np.expand_dims(a, d)),
        Sample((g.randn(2, 3), -1), ref=lambda a, d: np.expand_dims(a, d)),
        Sample((scalar(1.0), 0), ref=lambda a, d: a.reshape(1)),
        Sample((empty(0, 3), 1), ref=lambda a, d: a.reshape(0, 1, 3)),
        Sample((g.randn(2, 3), 4), raises=IndexError, desc="dim out of range"),
    ]


def _flatten(g):
    x = g.randn(2, 3, 2)
    return [
        Sample((x,), ref=lambda a: a.reshape(-1)),
        Sample((x, 1), ref=lambda a, s: a.reshape(2, 6)),
        Sample((x, 0, 1), ref=lambda a, s, e: a.reshape(6, 2)),
        Sample((scalar(1.0),), ref=lambda a: a.reshape(1), desc="0d becomes 1-D"),
        Sample((empty(0, 3),), ref=lambda a: a.reshape(0)),
        Sample((x, 2, 1), raises=RuntimeError, desc="start after end"),
    ]


def _unflatten(g):
    return [
        Sample((g.randn(2, 6), 1, (2, 3)), ref=lambda a, d, s: a.reshape(2, 2, 3)),
        Sample((g.randn(6), 0, (-1, 2)), ref=lambda a, d, s: a.reshape(3, 2)),
        Sample((empty(0, 4), 1, (2, 2)), ref=lambda a, d, s: a.reshape(0, 2, 2)),
        Sample((scalar(1.0), 0, (1,)), raises=(RuntimeError, IndexError), desc="0d"),
    ]


def _expand(g):
    return [
        Sample((g.randn(3, 1),), call=lambda m, x: x.expand(3, 4), ref=lambda a: np.broadcast_to(a, (3, 4))),
        Sample((g.randn(3),), call=lambda m, x: x.expand(2, 3),
               ref=lambda a: np.broadcast_to(a, (2, 3)), desc="new leading dim"),
        Sample((g.randn(1, 3),), call=lambda m, x: m.broadcast_to(x, (2, 2, 3)),
               ref=lambda a: np.broadcast_to(a, (2, 2, 3)), desc="broadcast_to"),
        Sample((scalar(2.0),), call=lambda m, x: x.expand(2, 3), ref=lambda a: np.broadcast_to(a, (2, 3))),
        Sample((empty(0, 1),), call=lambda m, x: x.expand(0, 3), ref=lambda a: np.zeros((0, 3))),
        Sample((g.randn(2, 3),), call=lambda m, x: x.expand(4, 3), raises=RuntimeError, desc="non-singleton"),
    ]


def _cast(g):
    def to(dtype):
        return lambda m, x: x.to(getattr(m, dtype))
    return [
        Sample((g.randn(2, 3),), call=to("float32"), ref=lambda a: a.astype(np.float32), numerical=False,
               desc="to float32 (gradient against torch only)"),
        Sample((g.randn(2, 3) * 3,), call=to("int64"), grad=False, ref=lambda a: a.astype(np.int64),
               desc="to int64 truncates"),
        Sample((g.ints(2, 3),), call=to("float64"), grad=False, ref=lambda a: a.astype(np.float64)),
        Sample((g.bools(4),), call=lambda m, x: x.float(), grad=False, ref=lambda a: a.astype(np.float32)),
        Sample((scalar(1.5),), call=to("float32"), ref=lambda a: a.astype(np.float32), numerical=False),
        Sample((empty(0, 2),), call=to("int32"), grad=False, ref=lambda a: a.astype(np.int32)),
    ]


def _move(g):
    """A round trip through another available backend: values and gradients survive both moves."""
    def there_and_back(m, x):
        if is_torch(m):
            return x * 1.0 if x.dtype.is_floating_point else x.clone()
        from plugtorch.core.ops.conversion import move
        reg = m.get_registry()
        here = x._backend
        other = next((b for b in reg.backends.values() if b.available and b is not here
                      and not b.name.endswith("_bare")), None) or next(
            (b for b in reg.backends.values() if b.available and b is not here), here)
        return move(move(x, other), here)
    return [
        Sample((g.randn(2, 3),), call=there_and_back, ref=lambda a: a),
        Sample((scalar(1.5),), call=there_and_back, ref=lambda a: a),
        Sample((empty(0, 2),), call=there_and_back, ref=lambda a: a),
        Sample((g.ints(3),), call=there_and_back, grad=False, ref=lambda a: a),
    ]


def _contiguous(g):
    return [
        Sample((g.randn(2, 3),), call=lambda m, x: x.t().contiguous(), ref=lambda a: a.T.copy(),
               desc="a transposed view"),
        Sample((g.randn(2, 3),), call=lambda m, x: x.contiguous(), ref=lambda a: a, desc="already contiguous"),
        Sample((scalar(1.0),), call=lambda m, x: x.contiguous(), ref=lambda a: a),
        Sample((empty(0, 2),), call=lambda m, x: x.t().contiguous(), ref=lambda a: a.T),
    ]


def _clone(g):
    return [
        Sample((g.randn(2, 3),), ref=lambda a: a.copy()),
        Sample((scalar(1.0),), ref=lambda a: a),
        Sample((empty(0, 2),), ref=lambda a: a),
        Sample((g.ints(3),), grad=False, ref=lambda a: a),
    ]


def _cat(g):
    return [
        Sample(([g.randn(2, 3), g.randn(1, 3)],), ref=lambda xs: np.concatenate(xs)),
        Sample(([g.randn(2, 1), g.randn(2, 3), g.randn(2, 2)], 1), ref=lambda xs, d: np.concatenate(xs, d)),
        Sample(([g.randn(2, 3), g.randn(2, 2)], -1), ref=lambda xs, d: np.concatenate(xs, d), desc="negative dim"),
        Sample(([g.randn(2, 3), empty(0, 3)],), ref=lambda xs: np.concatenate(xs), desc="with empty"),
        Sample(([g.randn(2, 3), empty(0)],), ref=lambda xs: xs[0], desc="legacy 1-D empty is skipped"),
        Sample(([g.randn(2, 3), g.ints(1, 3)],), grad=False, ref=lambda xs: np.concatenate(xs),
               desc="dtypes promote"),
        Sample(([scalar(1.0), scalar(2.0)],), raises=(RuntimeError, IndexError), desc="0d cannot be joined"),
        Sample(([g.randn(2, 3), g.randn(2, 2)],), raises=RuntimeError, desc="sizes differ"),
    ]


def _stack(g):
    return [
        Sample(([g.randn(2, 3), g.randn(2, 3)],), ref=lambda xs: np.stack(xs)),
        Sample(([g.randn(2, 3), g.randn(2, 3), g.randn(2, 3)], -1), ref=lambda xs, d: np.stack(xs, d)),
        Sample(([scalar(1.0), scalar(2.0)],), ref=lambda xs: np.stack(xs), desc="0d"),
        Sample(([empty(0, 2), empty(0, 2)], 1), ref=lambda xs, d: np.stack(xs, d)),
        Sample(([g.randn(2, 3), g.randn(3, 2)],), raises=RuntimeError, desc="shapes differ"),
    ]


def _flip(g):
    return [
        Sample((g.randn(2, 3, 2), (0, 2)), ref=lambda a, d: np.flip(a, d)),
        Sample((g.randn(3, 2), [-1]), ref=lambda a, d: np.flip(a, d)),
        Sample((scalar(1.0), ()), ref=lambda a, d: a),
        Sample((empty(0, 2), (0, 1)), ref=lambda a, d: a),
        Sample((g.randn(2, 2), (0, 0)), raises=RuntimeError, desc="repeated dim"),
    ]


def _flip_lr_ud(name, npfn, min_ndim):
    def samples(g):
        return [
            Sample((g.randn(3, 2),), ref=npfn),
            Sample((g.randn(2, 3, 2),), ref=npfn),
            Sample((empty(0, 2),), ref=npfn),
            Sample((scalar(1.0),), raises=RuntimeError, desc=f"0-d: fewer than {min_ndim} dims"),
        ]
    SAMPLES[name] = samples


def _roll(g):
    return [
        Sample((g.randn(3, 4), 1, 1), ref=lambda a, s, d: np.roll(a, s, d)),
        Sample((g.randn(3, 4), (1, -2), (0, 1)), ref=lambda a, s, d: np.roll(a, s, d), desc="two dims"),
        Sample((g.randn(3, 4), 5), ref=lambda a, s: np.roll(a, s), desc="flattened"),
        Sample((g.randn(3, 4), 7, 1), ref=lambda a, s, d: np.roll(a, s, d), desc="shift > size"),
        Sample((scalar(1.0), 1), ref=lambda a, s: a),
        Sample((empty(0, 3), 1, 0), ref=lambda a, s, d: a),
        Sample((g.randn(3, 4), (1, 2), (0,)), raises=RuntimeError, desc="shifts and dims differ in length"),
    ]


def _repeat(g):
    return [
        Sample((g.randn(2, 3),), call=lambda m, x: x.repeat(2, 1), ref=lambda a: np.tile(a, (2, 1))),
        Sample((g.randn(3),), call=lambda m, x: x.repeat(2, 2), ref=lambda a: np.tile(a, (2, 2)),
               desc="adds a leading dim"),
        Sample((g.randn(2, 1),), call=lambda m, x: x.repeat(1, 3), ref=lambda a: np.tile(a, (1, 3))),
        Sample((scalar(1.5),), call=lambda m, x: x.repeat(3), ref=lambda a: np.tile(a, 3)),
        Sample((empty(0, 2),), call=lambda m, x: x.repeat(2, 2), ref=lambda a: np.zeros((0, 4))),
        Sample((g.randn(2, 3),), call=lambda m, x: x.repeat(2), raises=RuntimeError, desc="too few dims"),
    ]


def _tile(g):
    return [
        Sample((g.randn(2, 3), (2, 1)), ref=lambda a, r: np.tile(a, r)),
        Sample((g.randn(2, 3), (2,)), ref=lambda a, r: np.tile(a, r), desc="fewer dims than the input"),
        Sample((g.randn(3), (2, 2)), ref=lambda a, r: np.tile(a, r)),
        Sample((scalar(1.0), (2,)), ref=lambda a, r: np.tile(a, r)),
        Sample((empty(0, 2), (3, 1)), ref=lambda a, r: np.zeros((0, 2))),
    ]


def _movedim(g):
    x = g.randn(2, 3, 4)
    return [
        Sample((x, 0, 2), ref=lambda a, s, d: np.moveaxis(a, s, d)),
        Sample((x, (0, 1), (2, 0)), ref=lambda a, s, d: np.moveaxis(a, s, d)),
        Sample((x, -1, 0), ref=lambda a, s, d: np.moveaxis(a, s, d)),
        Sample((scalar(1.0), 0, 0), ref=lambda a, s, d: a),
        Sample((empty(0, 3), 0, 1), ref=lambda a, s, d: a.T),
        Sample((x, (0, 1), (2,)), raises=RuntimeError, desc="lengths differ"),
    ]


def _split(g):
    x = g.randn(5, 3)
    return [
        Sample((x, 2), ref=lambda a, s: tuple(np.split(a, [2, 4]))),
        Sample((x, [1, 4]), ref=lambda a, s: tuple(np.split(a, [1]))),
        Sample((x, 2, 1), ref=lambda a, s, d: tuple(np.split(a, [2], axis=1))),
        Sample((empty(0, 3), 2), ref=lambda a, s: (a,)),
        Sample((scalar(1.0), 1), raises=(RuntimeError, IndexError), desc="0d"),
        Sample((x, [1, 1]), raises=RuntimeError, desc="sizes do not sum to the dim"),
    ]


def _tensor_split(g):
    x = g.randn(7, 2)
    return [
        Sample((x, 3), ref=lambda a, n: tuple(np.array_split(a, 3))),
        Sample((x, [1, 5]), ref=lambda a, i: tuple(np.split(a, [1, 5]))),
        Sample((x, 2, 1), ref=lambda a, n, d: tuple(np.array_split(a, 2, axis=1))),
        Sample((empty(0, 2), 2), ref=lambda a, n: (a, a)),
        Sample((scalar(1.0), 2), raises=(RuntimeError, IndexError), desc="0d"),
    ]


def _chunk(g):
    x = g.randn(5, 4)
    return [
        Sample((x, 2), ref=lambda a, n: tuple(np.split(a, [3]))),
        Sample((x, 3, 1), ref=lambda a, n, d: tuple(np.split(a, [2], axis=1)), desc="fewer chunks than asked"),
        Sample((x, 5), ref=lambda a, n: tuple(np.split(a, 5))),
        Sample((empty(0, 4), 2, 1), ref=lambda a, n, d: tuple(np.split(a, 2, axis=1))),
        Sample((scalar(1.0), 1), raises=(RuntimeError, IndexError), desc="0d"),
        Sample((x, 0), raises=RuntimeError, desc="zero chunks"),
    ]


def _pad(g):
    def pad(p, value=0.0):
        return lambda m, x: F(m).pad(x, p, value=value)

    def ref(widths, value=0.0):
        return lambda a: np.pad(a, widths, constant_values=value)
    return [
        Sample((g.randn(2, 3),), call=pad((1, 2)), ref=ref(((0, 0), (1, 2)))),
        Sample((g.randn(2, 3),), call=pad((1, 0, 0, 2), 1.5), ref=ref(((0, 2), (1, 0)), 1.5), desc="two dims, value"),
        Sample((g.randn(2, 3, 4),), call=pad((-1, 1)), ref=lambda a: np.pad(a[..., 1:], ((0, 0), (0, 0), (0, 1))),
               desc="negative crops"),
        Sample((empty(0, 2),), call=pad((1, 1)), ref=ref(((0, 0), (1, 1)))),
        Sample((scalar(1.0),), call=pad((1, 1)), raises=RuntimeError, desc="0d has no dim to pad"),
        Sample((g.randn(2, 3),), call=pad((1,)), raises=RuntimeError, desc="odd length"),
    ]


def _band(name, npfn):
    def samples(g):
        return [
            Sample((g.randn(3, 4),), ref=npfn),
            Sample((g.randn(3, 4), 1), ref=lambda a, k: npfn(a, k)),
            Sample((g.randn(2, 3, 3), -1), ref=lambda a, k: npfn(a, k), desc="batched"),
            Sample((empty(0, 3),), ref=npfn),
            Sample((g.ints(3, 3),), grad=False, ref=npfn, desc="int64"),
            Sample((scalar(1.0),), raises=RuntimeError, desc="0d"),
        ]
    SAMPLES[name] = samples


def _unbind(g):
    x = g.randn(3, 2)
    return [
        Sample((x,), ref=lambda a: tuple(a)),
        Sample((x, 1), ref=lambda a, d: tuple(a.T)),
        Sample((empty(0, 2), 1), ref=lambda a, d: (a[:, 0], a[:, 1])),
        Sample((scalar(1.0),), raises=IndexError, desc="0-d"),
    ]


def _narrow(g):
    x = g.randn(3, 5)
    return [
        Sample((x, 1, 1, 3), ref=lambda a, d, s, n: a[:, 1:4]),
        Sample((x, 0, -2, 2), ref=lambda a, d, s, n: a[1:3], desc="negative start"),
        Sample((x, 1, 5, 0), ref=lambda a, d, s, n: a[:, 5:5], desc="empty at the end"),
        Sample((empty(0, 3), 1, 0, 2), ref=lambda a, d, s, n: a[:, :2]),
        Sample((scalar(1.0), 0, 0, 1), raises=RuntimeError, desc="0-d"),
        Sample((x, 1, 3, 3), raises=RuntimeError, desc="past the end"),
    ]


def _ravel(g):
    return [
        Sample((g.randn(2, 3),), ref=np.ravel),
        Sample((g.randn(2, 3).T,), ref=np.ravel, desc="transposed storage"),
        Sample((scalar(1.0),), ref=np.ravel),
        Sample((empty(0, 3),), ref=np.ravel),
    ]


def _repeat_interleave(g):
    x = g.randn(2, 3)
    return [
        Sample((x, 2), ref=lambda a, r: np.repeat(a, r)),
        Sample((x, 2, 1), ref=lambda a, r, d: np.repeat(a, r, d)),
        Sample((x, np.array([1, 0, 2]), 1), ref=lambda a, r, d: np.repeat(a, r, d), desc="per-element counts"),
        Sample((x, np.array([3, 1]), 0), ref=lambda a, r, d: np.repeat(a, r, d)),
        Sample((scalar(1.5), 3), ref=lambda a, r: np.repeat(a, r)),
        Sample((empty(0, 2), 2, 0), ref=lambda a, r, d: np.repeat(a, r, d)),
        Sample((x, np.array([1, 2]), 1), raises=RuntimeError, desc="counts do not match the dim"),
    ]


def _meshgrid(g):
    a, b, c = g.randn(2), g.randn(3), g.randn(2)
    return [
        Sample((a, b), call=lambda m, x, y: m.meshgrid(x, y, indexing="ij"),
               ref=lambda x, y: tuple(np.meshgrid(x, y, indexing="ij"))),
        Sample((a, b, c), call=lambda m, x, y, z: m.meshgrid(x, y, z, indexing="xy"),
               ref=lambda x, y, z: tuple(np.meshgrid(x, y, z, indexing="xy")), desc="xy, three inputs"),
        Sample((scalar(1.0), b), call=lambda m, x, y: m.meshgrid(x, y, indexing="ij"),
               ref=lambda x, y: tuple(np.meshgrid(x, y, indexing="ij")), desc="0-d counts as one element"),
        Sample((empty(0), b), call=lambda m, x, y: m.meshgrid(x, y, indexing="ij"),
               ref=lambda x, y: tuple(np.meshgrid(x, y, indexing="ij"))),
        Sample((g.randn(2, 2), b), call=lambda m, x, y: m.meshgrid(x, y, indexing="ij"), raises=RuntimeError,
               desc="2-D input"),
    ]


SAMPLES.update(unbind=_unbind, narrow=_narrow, ravel=_ravel, repeat_interleave=_repeat_interleave,
               meshgrid=_meshgrid)
SAMPLES.update(reshape=_reshape, permute=_permute, transpose=_transpose, t=_t, squeeze=_squeeze,
               unsqueeze=_unsqueeze, flatten=_flatten, unflatten=_unflatten, expand=_expand, cast=_cast,
               move=_move, contiguous=_contiguous,
               clone=_clone, cat=_cat, stack=_stack, flip=_flip, roll=_roll, repeat=_repeat, tile=_tile,
               movedim=_movedim, split=_split, tensor_split=_tensor_split, chunk=_chunk, pad=_pad)
_flip_lr_ud("fliplr", np.fliplr, 2)
_flip_lr_ud("flipud", np.flipud, 1)
_band("tril", np.tril)
_band("triu", np.triu)


# -- view, view_dtype -----------------------------------------------------------------------------
# (view's inputs of two or more dims keep its shape up to size-1 dims: the kit also runs every
# sample on transposed storage, where a view that merges dims is refused, as torch's)

def _view(g):
    return [
        Sample((g.randn(2, 3),), call=lambda m, x: x.view(2, 1, 3), ref=lambda x: x.reshape(2, 1, 3)),
        Sample((g.randn(2, 1, 3),), call=lambda m, x: x.view(2, 3, 1), ref=lambda x: x.reshape(2, 3, 1),
               desc="size-1 dims move"),
        Sample((g.randn(6),), call=lambda m, x: x.view(-1, 3), ref=lambda x: x.reshape(-1, 3), desc="-1"),
        Sample((g.randn(2, 3),), call=lambda m, x: x.view_as(m.zeros(1, 2, 3)),
               ref=lambda x: x.reshape(1, 2, 3), desc="view_as"),
        Sample((scalar(2.0),), call=lambda m, x: x.view(1, 1), ref=lambda x: x.reshape(1, 1)),
        Sample((empty(0, 4),), call=lambda m, x: x.view(4, 0, 2), ref=lambda x: x.reshape(4, 0, 2)),
        Sample((g.randn(2, 3),), call=lambda m, x: x.t().view(6), raises=RuntimeError,
               desc="a transpose's dims cannot merge: no copy is made"),
        Sample((g.randn(2, 3),), call=lambda m, x: x.view(4, -1), raises=RuntimeError, desc="bad size"),
    ]


def _view_dtype(g):
    def call(dtype):
        return lambda m, x: x.view(getattr(m, dtype))
    bits = g.randn(2, 4)
    return [
        Sample((bits,), call=call("int64"), grad=False, ref=lambda x: x.view(np.int64),
               desc="float64 as int64"),
        Sample((g.randn(4),), call=call("int32"), grad=False, ref=lambda x: x.view(np.int32),
               desc="float64 as int32: the last dim doubles"),
        Sample((np.arange(8, dtype=np.int16),), call=call("int32"), grad=False,
               ref=lambda x: x.view(np.int32), desc="int16 as int32: the last dim halves"),
        Sample((bits,), call=lambda m, x: x.t().view(m.int32), raises=RuntimeError,
               desc="another element size needs a contiguous last dim"),
        Sample((np.array([0, 1, 2], np.uint8),), call=call("bool"), grad=False, ref=lambda x: x.view(bool),
               desc="uint8 as bool"),
        Sample((np.asarray(7, np.int32),), call=call("float32"), grad=False,
               ref=lambda x: x.view(np.float32)),
        Sample((np.zeros((0, 2), np.int32),), call=call("float32"), grad=False,
               ref=lambda x: x.view(np.float32)),
        Sample((np.arange(6, dtype=np.int16).reshape(2, 3),), call=call("int32"), raises=RuntimeError,
               desc="last dim not divisible"),
        Sample((np.asarray(7, np.int32),), call=call("int16"), raises=RuntimeError,
               desc="0-d to another element size"),
    ]


# -- hstack, vstack, dstack, column_stack ---------------------------------------------------------

def _joins(name, npfn):
    def samples(g):
        return [
            Sample(({"hstack": [g.randn(2, 3), g.randn(2, 2)], "column_stack": [g.randn(2, 3), g.randn(2, 2)],
                     "vstack": [g.randn(2, 3), g.randn(1, 3)]}.get(name, [g.randn(2, 3), g.randn(2, 3)]),),
                   ref=npfn),
            Sample(([g.randn(3), g.randn(3)],), ref=npfn, desc="1-D"),
            Sample(([scalar(1.0), scalar(2.0)],), ref=npfn, desc="0d"),
            Sample(([g.randn(2, 3, 2), g.randn(2, 3, 2)],), ref=npfn, desc="3-D"),
            Sample(([empty(0, 2), empty(0, 2)],), ref=npfn),
            Sample(([g.ints(2, 2), g.randn(2, 2)],), grad=False, ref=npfn, desc="dtypes promote"),
            Sample(([],), raises=(RuntimeError, TypeError), desc="no tensors"),
        ]
    SAMPLES[name] = samples


for _name, _npfn in (("hstack", np.hstack), ("vstack", np.vstack), ("dstack", np.dstack),
                     ("column_stack", np.column_stack)):
    _joins(_name, _npfn)


# -- rot90, diff, unfold ------------------------------------------------------------------------

def _rot90(g):
    x = g.randn(2, 3)
    return [
        Sample((x,), ref=np.rot90),
        Sample((x, 2), ref=lambda a, k: np.rot90(a, k)),
        Sample((x, -1, [1, 0]), ref=lambda a, k, d: np.rot90(a, k, d), desc="dims reversed"),
        Sample((g.randn(2, 3, 2), 3, (0, 2)), ref=lambda a, k, d: np.rot90(a, k, d), desc="3-D"),
        Sample((x, 4), ref=lambda a, k: a, desc="a full turn"),
        Sample((empty(0, 3),), ref=np.rot90),
        Sample((scalar(1.0),), raises=RuntimeError, desc="0d"),
        Sample((x, 1, (0, 0)), raises=RuntimeError, desc="one dim twice"),
    ]


def _diff(g):
    x = g.randn(3, 5)
    return [
        Sample((x,), ref=np.diff),
        Sample((x, 2, 0), ref=lambda a, n, d: np.diff(a, n, d), desc="n=2 along dim 0"),
        Sample((x, 1, -1, g.randn(3, 2), g.randn(3, 1)), ref=lambda a, n, d, p, q: np.diff(a, n, d, p, q),
               desc="prepend, append"),
        Sample((g.randn(4), 1, 0, scalar(0.5)), raises=RuntimeError,
               desc="0-d prepend (torch wants input's number of dims)"),
        Sample((g.ints(6),), kwargs={"n": 3}, grad=False, ref=lambda a: np.diff(a, 3), desc="int64"),
        Sample((g.bools(5),), grad=False, ref=np.diff, desc="bool: not equal"),
        Sample((empty(0, 3), 1, 0), ref=lambda a, n, d: np.diff(a, n, d)),
        Sample((g.randn(3),), kwargs={"n": 5}, ref=lambda a: np.diff(a, 5), desc="n past the length"),
        Sample((scalar(1.0),), raises=RuntimeError, desc="0d"),
    ]


def _unfold(g):
    def ref(a, d, size, step):
        if a.ndim == 0:
            return a.reshape(size)
        d %= a.ndim
        moved = np.moveaxis(a, d, -1)
        n = (moved.shape[-1] - size) // step + 1
        windows = np.stack([moved[..., i * step:i * step + size] for i in range(n)], -2)
        return np.moveaxis(windows, -2, d)
    return [
        Sample((g.randn(2, 7), 1, 3, 2), call=lambda m, x, *a: x.unfold(*a), ref=ref),
        Sample((g.randn(5, 2, 3), 0, 2, 1), call=lambda m, x, *a: x.unfold(*a), ref=ref,
               desc="overlapping windows: gradients add"),
        Sample((g.randn(4, 6), -1, 6, 6), call=lambda m, x, *a: x.unfold(*a), ref=ref, desc="one window"),
        Sample((g.randn(10), 0, 2, 4), call=lambda m, x, *a: x.unfold(*a), ref=ref, desc="gaps"),
        Sample((scalar(2.0), 0, 1, 1), call=lambda m, x, *a: x.unfold(*a), ref=ref),
        Sample((empty(0, 4), 1, 2, 1), call=lambda m, x, *a: x.unfold(*a), ref=ref),
        Sample((g.randn(3, 4), 1, 5, 1), call=lambda m, x, *a: x.unfold(*a), raises=RuntimeError,
               desc="window longer than the dim"),
        Sample((g.randn(3, 4), 1, 2, 0), call=lambda m, x, *a: x.unfold(*a), raises=RuntimeError,
               desc="step 0"),
    ]


SAMPLES.update(view=_view, view_dtype=_view_dtype, rot90=_rot90, diff=_diff, unfold=_unfold)


# -- diag_embed, take ------------------------------------------------------------------------------

def _diag_embed_ref(x, offset=0, dim1=-2, dim2=-1):
    k = x.shape[-1]
    m = k + abs(offset)
    out = np.zeros(x.shape[:-1] + (m, m))
    idx = np.arange(k)
    out[..., idx - min(offset, 0), idx + max(offset, 0)] = x
    n = x.ndim + 1
    d1, d2 = dim1 % n, dim2 % n
    rest = [d for d in range(n) if d not in (d1, d2)]
    order = [0] * n
    for src, dst in enumerate(rest + [d1, d2]):
        order[dst] = src
    return out.transpose(order)


def _diag_embed(g):
    return [
        Sample((g.randn(3),), ref=_diag_embed_ref),
        Sample((g.randn(2, 3), 1), ref=_diag_embed_ref, desc="offset"),
        Sample((g.randn(2, 3), -1, 0, 2), ref=_diag_embed_ref, desc="below, dims 0 and 2"),
        Sample((g.randn(2, 3), 0, 2, 0), ref=_diag_embed_ref, desc="dims swapped"),
        Sample((empty(2, 0),), ref=_diag_embed_ref),
        Sample((g.randn(3), 0, 0, 0), raises=RuntimeError, desc="identical dims"),
        Sample((scalar(1.0),), raises=(RuntimeError, IndexError), desc="0-d"),
    ]


def _take(g):
    x = g.randn(3, 4)
    return [
        Sample((x, np.array([[0, 5], [11, 2]])), ref=lambda a, i: a.reshape(-1)[i]),
        Sample((x, np.array([-1, 0, 0])), ref=lambda a, i: a.reshape(-1)[i], desc="negative, repeated"),
        Sample((scalar(2.0), np.array(0)), ref=lambda a, i: a.reshape(-1)[i], desc="0-d"),
        Sample((x, np.zeros(0, dtype=np.int64)), ref=lambda a, i: np.zeros(0), desc="empty index"),
        Sample((x, np.array([12])), raises=IndexError, desc="out of range"),
    ]


SAMPLES.update(diag_embed=_diag_embed, take=_take)
