"""Samples for sort, argsort, topk, kthvalue and median."""
from __future__ import annotations

from ._common import Sample, empty, np, scalar

SAMPLES: dict = {}


def _np_sort(a, d=-1, descending=False):
    idx = np.argsort(-a if descending else a, axis=d, kind="stable")
    return np.take_along_axis(a, idx, d), idx


def _sort(g):
    x = g.distinct(3, 4)
    ties = np.array([[2.0, 1.0, 2.0, 1.0, 3.0]])
    return [
        Sample((x,), ref=lambda a: _np_sort(a)),
        Sample((x, 0, True), ref=lambda a, d, s: _np_sort(a, d, True), desc="descending"),
        Sample((ties,), kwargs={"stable": True, "dim": -1}, ref=lambda a: _np_sort(a), grad=False,
               desc="stable ties (not differentiable there)"),
        Sample((g.ints(2, 5),), grad=False, ref=lambda a: _np_sort(a), desc="int64"),
        Sample((np.array([1.0, np.nan, -1.0]),), grad=False, ref=lambda a: (np.array([-1.0, 1.0, np.nan]),
                                                                           np.array([2, 0, 1])),
               desc="nan sorts last"),
        Sample((scalar(1.5),), ref=lambda a: (a, np.asarray(0))),
        Sample((empty(0, 3), 1), ref=lambda a, d: (a, np.zeros((0, 3), np.int64))),
    ]


def _argsort(g):
    x = g.distinct(3, 4)
    return [
        Sample((x,), grad=False, ref=lambda a: np.argsort(a, -1)),
        Sample((x, 0, True), grad=False, ref=lambda a, d, s: np.argsort(-a, 0)),
        Sample((np.array([3, 1, 3, 1]),), kwargs={"stable": True}, grad=False,
               ref=lambda a: np.argsort(a, kind="stable"), desc="stable ties"),
        Sample((scalar(1.0),), grad=False, ref=lambda a: np.asarray(0)),
        Sample((empty(2, 0),), grad=False, ref=lambda a: np.zeros((2, 0), np.int64)),
    ]


def _topk(g):
    x = g.distinct(3, 5)

    def ref(a, k, d=-1, largest=True):
        v, i = _np_sort(a, d, largest)
        sl = [slice(None)] * a.ndim
        sl[d] = slice(0, k)
        return v[tuple(sl)], i[tuple(sl)]
    return [
        Sample((x, 2), ref=ref),
        Sample((x, 2, 0, False), ref=ref, desc="smallest along dim 0"),
        Sample((x, 0), ref=ref, desc="k=0"),
        Sample((x, 5), ref=ref, desc="k = size"),
        Sample((scalar(1.5), 1), ref=lambda a, k: (a, np.asarray(0))),
        Sample((empty(2, 0), 0), ref=ref),
        Sample((x, 6), raises=RuntimeError, desc="k larger than the dim"),
    ]


def _kthvalue(g):
    x = g.distinct(3, 5)

    def ref(a, k, d=-1, keepdim=False):
        v, i = _np_sort(a, d)
        v, i = np.take(v, [k - 1], d), np.take(i, [k - 1], d)
        return (v, i) if keepdim else (v.squeeze(d), i.squeeze(d))
    return [
        Sample((x, 2), ref=ref),
        Sample((x, 1, 0, True), ref=ref, desc="dim 0, keepdim"),
        Sample((x, 5, 1), ref=ref, desc="the largest"),
        Sample((scalar(1.5), 1), ref=lambda a, k: (a, np.asarray(0))),
        Sample((empty(0, 3), 2, 1), ref=ref),
        Sample((x, 6), raises=(RuntimeError, IndexError), desc="k larger than the dim"),
    ]


def _median(g):
    x = g.distinct(3, 4)

    def ref_dim(a, d, keepdim=False):
        v, i = _np_sort(a, d)
        n = a.shape[d]
        v, i = np.take(v, [(n - 1) // 2], d), np.take(i, [(n - 1) // 2], d)
        return (v, i) if keepdim else (v.squeeze(d), i.squeeze(d))
    return [
        Sample((x,), ref=lambda a: np.sort(a, None)[(a.size - 1) // 2], desc="all, even count: lower"),
        Sample((g.distinct(5),), ref=lambda a: np.sort(a)[2], desc="all, odd count"),
        Sample((x, 1), ref=ref_dim),
        Sample((x, 0, True), ref=ref_dim, desc="keepdim"),
        Sample((scalar(2.5),), ref=lambda a: a),
        Sample((empty(0, 3), 1), ref=ref_dim),
        Sample((empty(0, 3),), ref=lambda a: np.asarray(np.nan), grad=False, desc="all of an empty tensor: nan"),
    ]


SAMPLES.update(sort=_sort, argsort=_argsort, topk=_topk, kthvalue=_kthvalue, median=_median)


# -- searchsorted, bucketize ---------------------------------------------------------------------

def _searchsorted(g):
    seq = np.array([1.0, 3.0, 3.0, 5.0, 7.0])
    vals = np.array([[3.0, 6.0, 9.0], [0.0, 1.0, np.nan]])

    def ss(side):
        return lambda s, v, **kw: np.searchsorted(s, v, side=side)
    return [
        Sample((seq, vals), grad=False, ref=lambda s, v: np.where(np.isnan(v), s.size, np.searchsorted(s, v))),
        Sample((seq, vals[:1]), kwargs={"right": True}, grad=False, ref=ss("right"), desc="right"),
        Sample((seq, vals[:1]), kwargs={"side": "right", "out_int32": True}, grad=False,
               ref=lambda s, v: ss("right")(s, v).astype(np.int32), desc="side, int32"),
        Sample((np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.5, 0.0], [5.0, 3.0]])), grad=False,
               ref=lambda s, v: np.stack([np.searchsorted(a, b) for a, b in zip(s, v)]), desc="batched boundaries"),
        Sample((seq, scalar(3.0)), grad=False, ref=ss("left"), desc="0-d value"),
        Sample((empty(0), np.array([1.0])), grad=False, ref=lambda s, v: np.zeros(1, dtype=np.int64)),
        Sample((np.ones((2, 3)), np.ones((3, 3))), raises=RuntimeError, desc="leading dims differ"),
    ]


def _bucketize(g):
    bounds = np.array([1.0, 3.0, 5.0, 7.0])
    return [
        Sample((np.array([[3.0, 6.0], [9.0, 0.5]]), bounds), grad=False, ref=lambda v, b: np.searchsorted(b, v)),
        Sample((np.array([3.0, 7.0]), bounds), kwargs={"right": True}, grad=False,
               ref=lambda v, b: np.searchsorted(b, v, side="right"), desc="right"),
        Sample((scalar(4.0), bounds), grad=False, ref=lambda v, b: np.searchsorted(b, v)),
        Sample((empty(0), bounds), grad=False, ref=lambda v, b: np.zeros(0, dtype=np.int64)),
        Sample((np.array([1.0]), np.ones((2, 2))), raises=RuntimeError, desc="2-D boundaries"),
    ]


SAMPLES.update(searchsorted=_searchsorted, bucketize=_bucketize)
