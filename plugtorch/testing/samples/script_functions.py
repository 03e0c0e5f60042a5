"""Samples for torch functions scripts call: gcd, lcm, nextafter, frexp, mode, nanmedian,
unique_consecutive, renorm, histogramdd, as_strided."""
from __future__ import annotations

from ._common import Sample, Waiver, np, scalar

SAMPLES: dict = {}


def _ints(g, *shape):
    return np.asarray(np.round(g.uniform(*shape, low=-30, high=30)), dtype=np.int64)


def _divisors(name, ref):
    def samples(g):
        a, b = _ints(g, 3, 4), _ints(g, 4)
        a[0, :2] = 0
        b[:1] = 0
        return [
            Sample((a, b), grad=False, ref=ref, desc="broadcast, zeros, signs"),
            Sample((np.asarray(12), np.asarray(-18)), grad=False, ref=ref),
            Sample((np.zeros(0, np.int64), np.zeros(0, np.int64)), grad=False, ref=ref),
            Sample((g.randn(3), g.randn(3)), grad=False, raises=NotImplementedError, desc="floats"),
        ]
    return samples


def _nextafter(g):
    x = np.array([0.0, -0.0, 1.0, -2.5, 1e-300, np.inf, -np.inf, np.nan, 3.0])
    y = np.array([1.0, -1.0, 2.0, -3.0, 0.0, 0.0, 0.0, 1.0, 3.0])
    return [
        Sample((x, y), grad=False, ref=np.nextafter, atol=0, rtol=0, desc="edge cases"),
        Sample((g.randn(2, 3), g.randn(3)), grad=False, ref=np.nextafter, atol=0, rtol=0, desc="broadcast"),
        Sample((scalar(1.0), scalar(0.0)), grad=False, ref=np.nextafter, atol=0, rtol=0),
        Sample((np.zeros(0), np.zeros(0)), grad=False, ref=np.nextafter),
        Sample((np.array([1, 2]), np.array([2, 3])), grad=False, raises=NotImplementedError, desc="integers"),
        Waiver("grad", "nextafter is in the graph with no derivative, as torch's"),
    ]


def _frexp(g):
    x = np.concatenate([g.randn(6) * 1e3, [0.0, -0.0, 1.0, 8.0, -0.75, 1e-310, np.inf, np.nan]])
    return [
        Sample((x,), grad=False, ref=lambda a: np.frexp(a), desc="normal, subnormal, special"),
        Sample((g.randn(2, 3) * 10,), call=lambda m, a: m.frexp(a).mantissa, desc="mantissa's gradient"),
        Sample((scalar(-6.0),), grad=False, ref=lambda a: np.frexp(a)),
        Sample((np.zeros((0, 2)),), grad=False, ref=lambda a: np.frexp(a)),
        Sample((np.array([1, 2]),), grad=False, raises=RuntimeError, desc="integers"),
    ]


def _repeats(g, *shape):
    return np.round(g.uniform(*shape, low=0, high=3))


def _mode(g):
    return [
        Sample((_repeats(g, 4, 7),), grad=False, desc="repeats, last dim"),
        Sample((_repeats(g, 5, 3, 2),), kwargs={"dim": 0, "keepdim": True}, grad=False, desc="dim 0, keepdim"),
        Sample((g.randn(3, 4),), kwargs={"dim": 1}, desc="distinct values: the smallest"),
        Sample((scalar(2.0),)),
        Sample((np.zeros((2, 0)),), kwargs={"dim": 1}, raises=IndexError, desc="empty reduction dim"),
    ]


def _nanmedian(g):
    with_nan = g.randn(4, 5)
    with_nan[0, 1] = with_nan[2, :3] = np.nan
    return [
        Sample((with_nan,), grad=False, desc="all, nan ignored"),
        Sample((with_nan,), kwargs={"dim": 1, "keepdim": True}, grad=False, desc="along dim 1, nan ignored"),
        Sample((g.randn(3, 5),), kwargs={"dim": 0}),
        Sample((g.randn(2, 3),)),
        Sample((scalar(2.0),), kwargs={"dim": 0}),
        Sample((np.zeros(0),), grad=False, desc="empty: nan"),
    ]


def _unique_consecutive(g):
    runs = np.array([1, 1, 2, 2, 3, 1, 1, 2])
    rows = np.array([[1.0, 1.0], [1.0, 1.0], [2.0, 3.0], [1.0, 1.0]])
    return [
        Sample((runs,), kwargs={"return_inverse": True, "return_counts": True}, grad=False),
        Sample((rows,), kwargs={"dim": 0, "return_counts": True}, grad=False, desc="runs of rows"),
        Sample((rows,), kwargs={"dim": 1, "return_inverse": True}, grad=False, desc="runs of columns"),
        Sample((scalar(5.0),), kwargs={"return_inverse": True}, grad=False),
        Sample((np.zeros(0),), kwargs={"return_counts": True}, grad=False),
        Waiver("grad", "unique_consecutive is in the graph but has no derivative, as torch's"),
    ]


def _renorm(g):
    return [
        Sample((g.randn(3, 4),), kwargs={"p": 2, "dim": 0, "maxnorm": 1.0}),
        Sample((g.randn(2, 3, 2),), kwargs={"p": 1.5, "dim": -1, "maxnorm": 0.8}),
        Sample((g.randn(3, 2),), kwargs={"p": 3, "dim": 1, "maxnorm": 100.0}, desc="under maxnorm: unchanged"),
        Sample((np.zeros((0, 3)),), kwargs={"p": 2, "dim": 1, "maxnorm": 1.0}, grad=False),
        Sample((scalar(1.0),), kwargs={"p": 2, "dim": 0, "maxnorm": 1.0}, raises=RuntimeError, desc="0-d"),
    ]


def _histogramdd(g):
    def hist(**kwargs):
        return lambda m, a: m.histogramdd(a, **kwargs).hist
    return [
        Sample((g.randn(40, 2),), call=hist(bins=3), grad=False),
        Sample((g.randn(30, 3),), call=hist(bins=[2, 3, 4], range=[-1.0, 1.0, -2.0, 2.0, 0.0, 1.0], density=True),
               grad=False, desc="range, density"),
        Sample((np.zeros((0, 2)),), call=hist(bins=2), grad=False),
        Sample((scalar(1.0),), call=hist(bins=2), grad=False, raises=RuntimeError, desc="0-d"),
        Waiver("grad", "histogramdd is in the graph but has no derivative, as torch's"),
    ]


def _as_strided(g):
    def view(size, stride, offset=None):
        return lambda m, a: m.as_strided(a, size, stride, offset)
    return [
        Sample((g.randn(9),), call=view((2, 2), (3, 1), 1)),
        Sample((g.randn(8),), call=view((3, 3), (2, 1)), desc="overlapping windows"),
        Sample((g.randn(6),), call=view((2, 3), (0, 2)), desc="a zero stride"),
        Sample((scalar(3.0),), call=view((), ())),
        Sample((np.zeros(0),), call=view((0, 2), (1, 1)), grad=False),
        Sample((g.randn(9),), call=view((3, 3), (3, 1), 1), raises=RuntimeError, desc="out of bounds"),
    ]


SAMPLES.update(gcd=_divisors("gcd", np.gcd), lcm=_divisors("lcm", np.lcm), nextafter=_nextafter, frexp=_frexp,
               mode=_mode, nanmedian=_nanmedian, unique_consecutive=_unique_consecutive, renorm=_renorm,
               histogramdd=_histogramdd, as_strided=_as_strided)
