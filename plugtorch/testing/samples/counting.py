"""Samples for ops whose output size depends on the values: unique, bincount."""
from __future__ import annotations

from ._common import Sample, Waiver, np, scalar

SAMPLES: dict = {}


def _unique(g):
    x = np.array([3, 1, 2, 3, 1, 7])
    rows = np.array([[1, 2], [1, 2], [0, 5], [0, 4]])

    def flat(a):
        return np.unique(a)

    def everything(a):
        values, inverse, counts = np.unique(a, return_inverse=True, return_counts=True)
        return values, inverse.reshape(a.shape), counts
    return [
        Sample((x,), grad=False, ref=flat),
        Sample((g.randn(2, 3).round(),), grad=False, ref=flat, desc="float, 2-D"),
        Sample((x.reshape(2, 3),), kwargs={"return_inverse": True, "return_counts": True}, grad=False,
               ref=everything, desc="inverse and counts"),
        Sample((rows,), kwargs={"dim": 0, "return_inverse": True, "return_counts": True}, grad=False,
               ref=lambda a: np.unique(a, axis=0, return_inverse=True, return_counts=True),
               desc="unique rows"),
        Sample((rows,), kwargs={"dim": 1}, grad=False, ref=lambda a: np.unique(a, axis=1),
               desc="unique columns"),
        Sample((g.bools(6),), grad=False, ref=flat, desc="bool"),
        Sample((scalar(2.0),), grad=False, ref=lambda a: a.reshape(1)),
        Sample((np.zeros((0, 3)),), grad=False, ref=flat),
        Sample((scalar(2.0),), kwargs={"dim": 0}, raises=IndexError, desc="dim of a 0-d tensor"),
        Waiver("grad", "unique is in the graph but has no derivative, as torch's"),
    ]


def _bincount(g):
    x = np.array([1, 3, 3, 0, 6])
    return [
        Sample((x,), grad=False, ref=np.bincount),
        Sample((x, g.randn(5)), grad=False, ref=lambda a, w: np.bincount(a, w), desc="float weights"),
        Sample((x, np.array([1, 2, 3, 4, 5])), grad=False, ref=lambda a, w: np.bincount(a, w),
               desc="integer weights give float64"),
        Sample((x,), kwargs={"minlength": 9}, grad=False, ref=lambda a: np.bincount(a, minlength=9),
               desc="minlength"),
        Sample((np.zeros(0, np.int64),), grad=False, ref=np.bincount, desc="empty"),
        Sample((np.asarray(3),), raises=RuntimeError, desc="0-d input"),
        Sample((np.array([1, -1]),), raises=RuntimeError, desc="negative value"),
        Sample((g.randn(3),), raises=RuntimeError, desc="floating input"),
    ]


SAMPLES.update(unique=_unique, bincount=_bincount)
