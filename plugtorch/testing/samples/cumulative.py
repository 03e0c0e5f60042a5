"""Samples for running ops: cumprod, cummax, cummin, logcumsumexp."""
from __future__ import annotations

from ._common import Sample, empty, np, scalar

SAMPLES: dict = {}


def _cumprod(g):
    x = g.uniform(3, 5, low=0.5, high=1.5)
    zeros = x.copy()
    zeros[0, 1] = 0.0
    zeros[1, 3] = zeros[1, 4] = 0.0
    return [
        Sample((x, 1), ref=lambda a, d: np.cumprod(a, axis=d)),
        Sample((g.uniform(9, 2, low=0.5, high=1.5), 0), ref=lambda a, d: np.cumprod(a, axis=d),
               desc="9 long: four doubling passes"),
        Sample((zeros, 1), ref=lambda a, d: np.cumprod(a, axis=d), desc="zeros: exact gradient"),
        Sample((g.randn(2, 3, 2), -2), ref=lambda a, d: np.cumprod(a, axis=d)),
        Sample((scalar(1.5), 0), ref=lambda a, d: a),
        Sample((empty(0, 3), 1), ref=lambda a, d: a),
        Sample((g.ints(2, 4, low=-3, high=4), 1), grad=False, ref=lambda a, d: np.cumprod(a, axis=d),
               desc="int64"),
        Sample((g.bools(5), 0), grad=False, ref=lambda a, d: np.cumprod(a, axis=d), desc="bool -> int64"),
        Sample((g.ints(2, 4, low=1, high=4), 1), kwargs={"dtype": None}, grad=False,
               call=lambda m, a, d: m.cumprod(a, d, dtype=m.float64),
               ref=lambda a, d: np.cumprod(a, axis=d), desc="dtype="),
        Sample((g.randn(4), 1), raises=IndexError, desc="dim out of range"),
    ]


def _logcumsumexp(g):
    def ref(a, d):
        with np.errstate(all="ignore"):
            return np.logaddexp.accumulate(a, axis=d) if a.size and a.ndim else a
    return [
        Sample((g.randn(3, 5), 1), ref=ref),
        Sample((g.randn(7, 2) * 300, 0), ref=ref, desc="large values stay finite"),
        Sample((np.array([-np.inf, -np.inf, 1.0, np.inf]), 0), grad=False, ref=ref, desc="infinities"),
        Sample((scalar(0.5), 0), ref=ref),
        Sample((empty(0, 3), 1), ref=ref),
        Sample((g.ints(3), 0), raises=NotImplementedError, desc="integer input"),
    ]


def _running(name, better):
    def ref(a, d):
        if a.ndim == 0:
            return a, np.asarray(0)
        values, indices = np.empty_like(a), np.empty(a.shape, np.int64)
        for pos in np.ndindex(*(s for i, s in enumerate(a.shape) if i != d)):
            best, at = None, 0
            for k in range(a.shape[d]):
                v = a[pos[:d] + (k,) + pos[d:]]
                if best is None or np.isnan(v) or better(v, best):
                    best, at = v, k
                values[pos[:d] + (k,) + pos[d:]], indices[pos[:d] + (k,) + pos[d:]] = best, at
        return values, indices

    def samples(g):
        ties = np.array([[1.0, 3.0, 3.0, 2.0, 5.0], [4.0, 4.0, 0.0, 4.0, -1.0]])
        return [
            Sample((g.distinct(3, 5), 1), ref=ref),
            Sample((g.distinct(9, 2), 0), ref=ref, desc="9 long"),
            Sample((ties, 1), ref=ref, numerical=False, gradgrad=False,
                   desc="ties take the later index (and its gradient, as torch's)"),
            Sample((np.array([1.0, np.nan, 0.0, np.nan, 7.0]), 0), grad=False, ref=ref,
                   desc="a nan stays (each later nan's index)"),
            Sample((scalar(0.5), 0), ref=ref),
            Sample((empty(0, 3), 1), ref=lambda a, d: (a, np.zeros(a.shape, np.int64))),
            Sample((g.ints(2, 5), 1), grad=False, ref=ref, desc="int64"),
        ]
    SAMPLES[name] = samples


SAMPLES.update(cumprod=_cumprod, logcumsumexp=_logcumsumexp)
_running("cummax", lambda v, best: v >= best)
_running("cummin", lambda v, best: v <= best)
