"""Samples for indexing: x[...], gather/scatter_add, index_select, masked_fill, one_hot, x[...] = v."""
from __future__ import annotations

from ._common import F, Sample, empty, is_torch, np, scalar

SAMPLES: dict = {}


def _getitem(g):
    x = g.randn(4, 3, 2)
    return [
        Sample((x,), call=lambda m, a: a[1:3], ref=lambda a: a[1:3]),
        Sample((x,), call=lambda m, a: a[::2, -1], ref=lambda a: a[::2, -1], desc="step and negative index"),
        Sample((x,), call=lambda m, a: a[None, ..., 0], ref=lambda a: a[None, ..., 0], desc="None and Ellipsis"),
        Sample((x, np.array([0, 2, 0, 0])), call=lambda m, a, i: a[i], ref=lambda a, i: a[i],
               desc="int tensor with repeats (gradients accumulate)"),
        Sample((x, np.array([[1, 3], [3, 3]])), call=lambda m, a, i: a[:, 1][i], ref=lambda a, i: a[:, 1][i],
               desc="2-D int index"),
        Sample((x, np.array([0, 1, 1]), np.array([2, 0, 2])), call=lambda m, a, i, j: a[i, j],
               ref=lambda a, i, j: a[i, j], desc="two int tensors"),
        Sample((x,), call=lambda m, a: a[[1, 1, 0]], ref=lambda a: a[[1, 1, 0]], desc="Python list"),
        Sample((x, g.bools(4, 3)), call=lambda m, a, k: a[k], ref=lambda a, k: a[k], desc="bool mask"),
        Sample((scalar(2.5),), call=lambda m, a: a[...], ref=lambda a: a, desc="0d[...]"),
        Sample((scalar(2.5),), call=lambda m, a: a[None], ref=lambda a: a[None], desc="0d[None]"),
        Sample((empty(0, 3),), call=lambda m, a: a[:, 1], ref=lambda a: a[:, 1]),
        Sample((x, np.zeros(0, np.int64)), call=lambda m, a, i: a[i], ref=lambda a, i: a[i], desc="empty index"),
        Sample((x,), call=lambda m, a: a[4], raises=IndexError, desc="index out of range"),
        Sample((x,), call=lambda m, a: a[0, 0, 0, 0], raises=IndexError, desc="too many indices"),
    ]


def _index_put_zeros(g):
    # The adjoint of x[i] (what getitem's gradient runs): zeros with values added at an index.
    def call(m, v, i):
        if m is np:
            out = np.zeros((5, 2))
            np.add.at(out, i, v)
            return out
        if is_torch(m):
            return m.zeros(5, 2, dtype=v.dtype).index_put((i,), v, accumulate=True)
        from plugtorch.core.ops.index import index_put_zeros
        return index_put_zeros(v, (5, 2), v.dtype, (i._data,))

    def ref(v, i):
        return call(np, v, i)
    return [
        Sample((g.randn(4, 2), np.array([0, 3, 3, 1])), call=call, ref=ref, desc="repeats accumulate"),
        Sample((g.randn(1, 2), np.array([4])), call=call, ref=ref),
        Sample((empty(0, 2), np.zeros(0, np.int64)), call=call, ref=ref),
        Sample((g.randn(2), np.asarray(2)), call=call, ref=ref, desc="0d index"),
    ]


def _gather(g):
    x = g.randn(3, 4)
    return [
        Sample((x, 1, g.ints(3, 2, high=4)), ref=lambda a, d, i: np.take_along_axis(a, i, d)),
        Sample((x, 0, np.array([[0, 0, 2, 1]])), ref=lambda a, d, i: np.take_along_axis(a, i, d),
               desc="repeats accumulate"),
        Sample((scalar(1.5), 0, np.asarray(0)), ref=lambda a, d, i: a),
        Sample((x, 1, np.zeros((3, 0), np.int64)), ref=lambda a, d, i: np.zeros((3, 0))),
        Sample((x, 1, np.array([[0, 3], [1, 1]])),
               ref=lambda a, d, i: np.take_along_axis(a[:2], i, d), desc="index smaller than input"),
        Sample((x, 0, np.array([[2], [0]])),
               ref=lambda a, d, i: np.take_along_axis(a[:, :1], i, d), desc="index smaller, dim 0"),
        Sample((x, 1, g.ints(4, 2, high=4)), raises=RuntimeError, desc="index larger than input"),
        Sample((x, 1, g.ints(3, 2).astype(np.float64)), grad_inputs=(0,), raises=RuntimeError,
               desc="float index"),
    ]


def _scatter_add(g):
    def ref(a, d, i, s):
        if a.ndim == 0:
            return a + s
        out = a.copy()
        grids = list(np.indices(i.shape, sparse=True))
        grids[d] = i
        np.add.at(out, tuple(grids), s)
        return out
    return [
        Sample((g.randn(3, 4), 1, np.array([[0, 0], [3, 1], [2, 2]]), g.randn(3, 2)), ref=ref),
        Sample((g.randn(2, 3), 0, np.array([[1, 1, 0]]), g.randn(1, 3)), ref=ref),
        Sample((scalar(1.0), 0, np.asarray(0), scalar(2.0)), ref=ref),
        Sample((g.randn(2, 3), 1, np.zeros((2, 0), np.int64), empty(2, 0)), ref=ref),
        Sample((g.randn(2, 3), 1, np.zeros((2,), np.int64), g.randn(2)), raises=RuntimeError,
               desc="index ndim differs"),
    ]


def _index_select(g):
    x = g.randn(4, 3)
    return [
        Sample((x, 0, np.array([3, 0, 3])), ref=lambda a, d, i: np.take(a, i, d), desc="repeats accumulate"),
        Sample((x, 1, np.array([2, 1])), ref=lambda a, d, i: np.take(a, i, d)),
        Sample((x, -1, np.zeros(0, np.int64)), ref=lambda a, d, i: np.take(a, i, d), desc="empty index"),
        Sample((scalar(2.0), 0, np.array([0])), ref=lambda a, d, i: a),
        Sample((empty(0, 3), 1, np.array([1])), ref=lambda a, d, i: np.take(a, i, d)),
        Sample((x, 0, np.array([4])), raises=IndexError, desc="index out of range"),
        Sample((x, 0, np.array([0.0])), grad_inputs=(0,), raises=RuntimeError, desc="float index"),
    ]


def _masked_fill(g):
    x = g.randn(3, 4)
    return [
        Sample((x, g.bools(3, 4), -1.5), ref=lambda a, k, v: np.where(k, v, a)),
        Sample((x, g.bools(1, 4), 2.0), ref=lambda a, k, v: np.where(k, v, a), desc="mask broadcasts"),
        Sample((x, g.bools(3, 4), scalar(0.5)), ref=lambda a, k, v: np.where(k, v, a),
               desc="0d tensor value (differentiable)"),
        Sample((g.ints(2, 3), g.bools(2, 3), 7), grad=False, ref=lambda a, k, v: np.where(k, v, a),
               desc="int64 keeps its dtype"),
        Sample((scalar(1.0), np.asarray(True), 0.0), ref=lambda a, k, v: np.zeros(())),
        Sample((empty(0, 2), np.zeros((0, 2), bool), 1.0), ref=lambda a, k, v: a),
        Sample((x, g.ints(3, 4), 1.0), raises=RuntimeError, desc="non-bool mask"),
    ]


def _one_hot(g):
    def ref(a, n=None):
        n = int(a.max()) + 1 if n is None else n
        return (a[..., None] == np.arange(n)).astype(np.int64)
    call = (lambda m, x, *n: F(m).one_hot(x, *n))
    return [
        Sample((np.array([0, 2, 1, 2]),), call=call, grad=False, ref=ref),
        Sample((np.array([[0, 1], [3, 0]]), 5), call=call, grad=False, ref=ref),
        Sample((np.asarray(3), 4), call=call, grad=False, ref=ref),
        Sample((np.zeros((0, 2), np.int64), 3), call=call, grad=False, ref=ref),
        Sample((np.zeros((0,), np.int64),), call=call, raises=RuntimeError, desc="cannot infer classes"),
        Sample((np.array([0, 3]), 3), call=call, raises=RuntimeError, desc="class >= num_classes"),
        Sample((np.array([-1, 0]), 3), call=call, raises=RuntimeError, desc="negative class"),
        Sample((np.array([0.0, 1.0]), 3), call=call, grad=False, raises=RuntimeError, desc="float input"),
    ]


def _setitem_call(key, value_is_input):
    def call(m, x, *v):
        y = x.copy() if isinstance(x, np.ndarray) else x.clone()
        y[key] = v[0] if value_is_input else 2.5
        return y
    return call


def _with_ref(sample):
    """The same x[key] = v on NumPy arrays is the reference."""
    sample.ref = lambda *xs: sample.call(np, *xs)
    return sample


def _index_put(g):
    x = g.randn(4, 3)
    return [_with_ref(s) if s.raises is None else s for s in [
        Sample((x, g.randn(2, 3)), call=_setitem_call(slice(1, 3), True), desc="slice = tensor"),
        Sample((x, g.randn(3)), call=_setitem_call((np.array([0, 2]),), True), desc="int index = broadcast row"),
        Sample((x, scalar(1.5)), call=_setitem_call((slice(None), 1), True), desc="column = 0d tensor"),
        Sample((x, g.randn(4)), call=_setitem_call((slice(None), 0), True)),
        Sample((empty(0, 3), empty(0, 3)), call=_setitem_call(slice(None), True)),
        Sample((x, g.randn(3, 3)), call=_setitem_call(slice(0, 2), True), raises=RuntimeError,
               desc="value does not broadcast"),
    ]]


def _index_fill(g):
    x = g.randn(4, 3)
    return [_with_ref(s) if s.raises is None else s for s in [
        Sample((x,), call=_setitem_call(slice(1, 3), False)),
        Sample((x,), call=_setitem_call((slice(None), np.array([2, 0])), False), desc="int index"),
        Sample((g.randn(2, 2),), call=lambda m, x: _setitem_call(x > 0, False)(m, x), desc="bool mask"),
        Sample((scalar(1.0),), call=_setitem_call(Ellipsis, False)),
        Sample((empty(0, 3),), call=_setitem_call(slice(None), False)),
    ]]


def _masked_select(g):
    def ref(a, k):
        shape = np.broadcast_shapes(a.shape, k.shape)
        return np.broadcast_to(a, shape)[np.broadcast_to(k, shape)]
    return [
        Sample((g.randn(3, 4), g.bools(3, 4)), ref=ref),
        Sample((g.randn(3, 4), g.bools(4)), ref=ref, desc="mask broadcasts"),
        Sample((g.randn(4), g.bools(3, 1)), ref=ref, desc="input broadcasts too"),
        Sample((scalar(1.5), np.asarray(True)), ref=ref),
        Sample((empty(0, 2), np.zeros((0, 2), bool)), ref=ref),
        Sample((g.randn(3), g.ints(3)), raises=RuntimeError, desc="non-bool mask"),
    ]


def _argwhere(g):
    x = np.round(g.uniform(3, 4, low=-1, high=1))
    return [
        Sample((x,), grad=False, ref=np.argwhere),
        Sample((g.bools(2, 2, 2),), grad=False, ref=np.argwhere, desc="bool"),
        Sample((scalar(2.0),), grad=False, ref=lambda a: np.zeros((1, 0), np.int64)),
        Sample((scalar(0.0),), grad=False, ref=lambda a: np.zeros((0, 0), np.int64)),
        Sample((empty(0, 3),), grad=False, ref=np.argwhere),
        Sample((x,), call=lambda m, a: m.nonzero(a, as_tuple=True), grad=False,
               ref=lambda a: tuple(np.nonzero(a)), desc="nonzero(as_tuple=True)"),
        Sample((g.ints(3, 2, low=-1, high=2),), call=lambda m, a: m.count_nonzero(a, 0), grad=False,
               ref=lambda a: np.count_nonzero(a, 0), desc="count_nonzero"),
    ]


def _take_along_dim(g):
    x = g.randn(3, 4)
    return [
        Sample((x, np.array([[0, 3], [1, 1], [2, 0]]), 1), ref=lambda a, i, d: np.take_along_axis(a, i, d)),
        Sample((x, np.array([[2, 0, 2, 1]]), 0), ref=lambda a, i, d: np.take_along_axis(a, i, d),
               desc="repeats accumulate"),
        Sample((x[:1], np.array([[0, 3], [1, 1], [2, 0]]), 1),
               ref=lambda a, i, d: np.take_along_axis(np.broadcast_to(a, (3, 4)), i, d), desc="input broadcasts"),
        Sample((x, np.array([0, 11, 5])), ref=lambda a, i: a.ravel()[i], desc="flattened"),
        Sample((scalar(2.0), np.asarray(0)), ref=lambda a, i: a.reshape(1)[[0]], desc="0-d flattened"),
        Sample((x, np.zeros((3, 0), np.int64), 1), ref=lambda a, i, d: np.zeros((3, 0))),
        Sample((x, np.array([0.0, 1.0])), grad_inputs=(0,), raises=RuntimeError, desc="float indices"),
    ]


def _scatter_ref(a, d, idx, src, combine=None):
    """Write (or combine) src's entries in index order: the last write to a position wins, as on
    torch's CPU."""
    if a.ndim == 0:
        src = src.reshape(1) if isinstance(src, np.ndarray) else src
        return _scatter_ref(a.reshape(1), 0, idx.reshape(1), src, combine).reshape(())
    out = a.copy()
    for pos in np.ndindex(*idx.shape):
        target = pos[:d] + (idx[pos],) + pos[d + 1:]
        value = src[pos] if isinstance(src, np.ndarray) else src
        out[target] = value if combine is None else combine(out[target], value)
    return out


def _scatter(g):
    x = g.randn(3, 4)
    i = np.array([[0, 2], [1, 3], [3, 0]])
    ref = _scatter_ref
    return [
        Sample((x, 1, np.array([[1, 1, 1], [0, 2, 0], [3, 3, 1]]), g.randn(3, 3)), ref=ref, grad=False,
               desc="repeated indices: the last write wins"),
        Sample((np.array([1, 3, 4, 5]), 0, np.array([0, 0, 0]), np.array([7, 8, 9])), ref=ref, grad=False,
               desc="int64, repeated"),
        Sample((x, 0, np.array([[2, 2, 0, 2], [2, 1, 0, 2]]), g.randn(2, 4)), ref=ref, grad=False,
               desc="repeated along dim 0"),
        Sample((x, 1, i, g.randn(3, 2)), kwargs={"reduce": "add"}, grad=False,
               ref=lambda a, d, idx, src: ref(a, d, idx, src, np.add), desc="reduce='add'"),
        Sample((x, 1, np.array([[0, 0], [1, 3], [3, 3]])), kwargs={"value": 2.0, "reduce": "multiply"},
               grad=False, ref=lambda a, d, idx: ref(a, d, idx, 2.0, np.multiply),
               desc="value=, reduce='multiply'"),
        Sample((x, 1, i, g.randn(3, 2)), kwargs={"reduce": "max"}, raises=RuntimeError,
               desc="unknown reduce"),
        Sample((x, 1, i, g.randn(3, 2)), ref=ref),
        Sample((x, 0, np.array([[2, 0, 1, 2]]), g.randn(2, 4)), ref=ref, grad=False,
               desc="src larger than index (torch's backward rejects it)"),
        Sample((x, 1, i, 2.5), ref=lambda a, d, idx, v: ref(a, d, idx, np.full(idx.shape, v)), desc="number"),
        Sample((x, 1, i), kwargs={"value": -1.0}, ref=lambda a, d, idx: ref(a, d, idx, np.full(idx.shape, -1.0)),
               desc="value="),
        Sample((scalar(1.0), 0, np.asarray(0), scalar(5.0)), ref=lambda a, d, idx, s: s),
        Sample((x, 1, np.zeros((3, 0), np.int64), empty(3, 0)), ref=lambda a, d, idx, s: a),
        Sample((x, 1, g.ints(3, 2).astype(np.float64), g.randn(3, 2)), grad_inputs=(0,), raises=RuntimeError,
               desc="float index"),
    ]


def _scatter_reduce(g):
    x = g.randn(3, 4)
    idx = np.array([[0, 0, 2], [1, 3, 3], [2, 2, 2]])
    combine = {"sum": np.add, "prod": np.multiply, "amax": np.fmax, "amin": np.fmin}

    def ref(reduce, include_self=True):
        def fn(a, d, i, s):
            if reduce == "mean":
                total = _scatter_ref(a if include_self else _zero_hits(a, d, i), d, i, s, np.add)
                n = _scatter_ref(np.full(a.shape, 1.0 if include_self else 0.0), d, i, np.ones(i.shape),
                                 np.add)
                return np.where(n > 0, total / np.maximum(n, 1), a) if a.dtype.kind == "f" else \
                    np.where(n > 0, total // np.maximum(n, 1), a)
            base = a if include_self else _first_hits(a, d, i, s)
            return _scatter_ref(base, d, i, s, combine[reduce]) if include_self else \
                _scatter_rest(base, d, i, s, combine[reduce])
        return fn

    out = []
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        out.append(Sample((x, 1, idx, g.uniform(3, 3, low=0.5, high=1.5)), kwargs={"reduce": reduce},
                          ref=ref(reduce), desc=reduce))
        out.append(Sample((x, 1, idx, g.uniform(3, 3, low=0.5, high=1.5)),
                          kwargs={"reduce": reduce, "include_self": False},
                          ref=ref(reduce, False), desc=f"{reduce}, include_self=False"))
    ties = np.array([9.0, 2.0, 9.0, 4.0])
    out += [
        Sample((ties, 0, np.array([0, 0, 2, 2, 2]), np.array([5.0, 9.0, 7.0, 9.0, 9.0])),
               kwargs={"reduce": "amax"}, ref=ref("amax"), numerical=False, gradgrad=False,
               desc="ties share the gradient, as torch's"),
        Sample((g.ints(3, 4), 1, idx, g.ints(3, 3)), kwargs={"reduce": "mean"}, grad=False,
               ref=ref("mean"), desc="int64 mean floors"),
        Sample((g.ints(3, 4), 1, idx, g.ints(3, 3, low=1)), kwargs={"reduce": "prod"}, grad=False,
               ref=ref("prod"), desc="int64 prod"),
        Sample((scalar(1.0), 0, np.asarray(0), scalar(3.0)), kwargs={"reduce": "sum"}, ref=ref("sum")),
        Sample((x, 1, np.zeros((3, 0), np.int64), empty(3, 0)), kwargs={"reduce": "amax"},
               ref=lambda a, d, i, s: a),
        Sample((x, 1, idx, g.randn(3, 3)), kwargs={"reduce": "median"}, raises=RuntimeError,
               desc="unknown reduce"),
    ]
    return out


def _zero_hits(a, d, i):
    out = a.copy()
    for pos in np.ndindex(*i.shape):
        out[pos[:d] + (i[pos],) + pos[d + 1:]] = 0
    return out


def _first_hits(a, d, i, s):
    """a with each written position set to its first src entry (include_self=False's start)."""
    out, seen = a.copy(), set()
    for pos in np.ndindex(*i.shape):
        target = pos[:d] + (i[pos],) + pos[d + 1:]
        if target not in seen:
            seen.add(target)
            out[target] = s[pos]
    return out


def _scatter_rest(base, d, i, s, combine):
    out, seen = base.copy(), set()
    for pos in np.ndindex(*i.shape):
        target = pos[:d] + (i[pos],) + pos[d + 1:]
        if target in seen:
            out[target] = combine(out[target], s[pos])
        seen.add(target)
    return out


def _index_add(g):
    x = g.randn(4, 3)

    def ref(a, d, idx, src, alpha=1):
        out = a.copy()
        if out.ndim == 0:
            return out + alpha * src
        np.add.at(out, (slice(None),) * d + (idx,), alpha * src)
        return out
    return [
        Sample((x, 0, np.array([3, 0, 3]), g.randn(3, 3)), ref=ref, desc="repeats accumulate"),
        Sample((x, 1, np.array([2]), g.randn(4, 1)), kwargs={"alpha": 0.5},
               ref=lambda a, d, idx, src: ref(a, d, idx, src, 0.5), desc="alpha"),
        Sample((scalar(1.0), 0, np.array([0]), scalar(2.0)), ref=ref),
        Sample((x, 0, np.zeros(0, np.int64), empty(0, 3)), ref=ref),
        Sample((x, 0, np.array([0, 1]), g.randn(3, 3)), raises=RuntimeError, desc="source does not match"),
    ]


SAMPLES.update(masked_select=_masked_select, argwhere=_argwhere, take_along_dim=_take_along_dim,
               scatter=_scatter, index_add=_index_add, scatter_reduce=_scatter_reduce)
SAMPLES.update(getitem=_getitem, index_put_zeros=_index_put_zeros, gather=_gather, scatter_add=_scatter_add,
               index_select=_index_select, masked_fill=_masked_fill, one_hot=_one_hot, index_put=_index_put,
               index_fill=_index_fill)
