"""Samples for reductions: sum/mean/prod/var/std/norm, extremes, arg-extremes, cumsum, any/all."""
from __future__ import annotations

from ._common import Sample, empty, np, scalar

SAMPLES: dict = {}


def _dims_samples(g, x, ref, **extra):
    """The usual dim variants of a sum-like reduction ``ref(x, axis, keepdims)``."""
    return [
        Sample((x,), ref=lambda a: ref(a, None, False), **extra),
        Sample((x, 1), ref=lambda a, d: ref(a, d, False), **extra),
        Sample((x, -1), kwargs={"keepdim": True}, ref=lambda a, d: ref(a, d, True), **extra),
        Sample((x, (0, 2)), ref=lambda a, d: ref(a, d, False), **extra, desc="dim tuple"),
        Sample((x, (0, 2), True), ref=lambda a, d, k: ref(a, d, k), **extra, desc="dim tuple keepdim"),
    ]


def _sum(g):
    ref = lambda a, d, k: np.sum(a, axis=d, keepdims=k)
    return _dims_samples(g, g.randn(2, 3, 2), ref) + [
        Sample((scalar(1.5),), ref=np.sum),
        Sample((scalar(1.5), 0), ref=lambda a, d: a, desc="0d dim=0"),
        Sample((empty(0, 3),), ref=np.sum, desc="empty sums to 0"),
        Sample((empty(0, 3), 0), ref=lambda a, d: np.sum(a, axis=0), desc="empty dim 0"),
        Sample((g.ints(2, 3),), grad=False, ref=np.sum, desc="int64"),
        Sample((g.bools(2, 3), 1), grad=False, ref=lambda a, d: np.sum(a, axis=d), desc="bool counts as int64"),
        Sample((g.randn(2, 3), 2), raises=IndexError, desc="dim out of range"),
        Sample((g.randn(2, 3), (1, 1)), raises=RuntimeError, desc="repeated dim"),
    ]


def _mean(g):
    ref = lambda a, d, k: np.mean(a, axis=d, keepdims=k)
    return _dims_samples(g, g.randn(2, 3, 2), ref) + [
        Sample((scalar(1.5),), ref=np.mean),
        Sample((empty(0, 3), 1), ref=lambda a, d: np.zeros((0,)), desc="empty rows"),
        Sample((g.ints(2, 3),), raises=RuntimeError, desc="integer input"),
        Sample((g.ints(2, 3),), kwargs={"dtype": None}, call=lambda m, x: m.mean(x, dtype=m.float64),
               grad=False, ref=np.mean, desc="integer input with dtype="),
    ]


def _prod(g):
    ref = lambda a, d, k: np.prod(a, axis=d, keepdims=k)
    x = g.uniform(2, 3, low=0.5, high=1.5)
    one_zero = x.copy()
    one_zero[0, 1] = 0.0
    two_zeros = one_zero.copy()
    two_zeros[0, 2] = 0.0
    return [
        Sample((x,), ref=np.prod),
        Sample((x, 1), ref=lambda a, d: np.prod(a, axis=d)),
        Sample((x, 0, True), ref=lambda a, d, k: ref(a, d, k), desc="keepdim"),
        Sample((one_zero, 1), ref=lambda a, d: np.prod(a, axis=d), desc="one zero in a row"),
        Sample((two_zeros,), ref=np.prod, desc="two zeros"),
        Sample((two_zeros, 1), ref=lambda a, d: np.prod(a, axis=d), desc="two zeros in a row"),
        Sample((scalar(-1.5),), ref=np.prod),
        Sample((empty(0, 3), 0), ref=lambda a, d: np.prod(a, axis=d), desc="empty gives ones"),
        Sample((g.ints(2, 3, low=1, high=4),), grad=False, ref=np.prod, desc="int64"),
    ]


def _var_like(name, npfn):
    def samples(g):
        x = g.randn(3, 4)
        return [
            Sample((x,), ref=lambda a: npfn(a, ddof=1)),
            Sample((x, 1), ref=lambda a, d: npfn(a, axis=d, ddof=1)),
            Sample((x, (0, 1)), kwargs={"keepdim": True}, ref=lambda a, d: npfn(a, axis=d, keepdims=True, ddof=1),
                   desc="keepdim"),
            Sample((x, (0, 1), True), ref=lambda a, d, u: npfn(a, axis=d, ddof=1), desc="positional unbiased"),
            Sample((x, 0), kwargs={"correction": 0}, ref=lambda a, d: npfn(a, axis=d), desc="correction=0"),
            Sample((x, 1), kwargs={"unbiased": False}, ref=lambda a, d: npfn(a, axis=d), desc="unbiased=False"),
            Sample((x, False), ref=lambda a, u: npfn(a), desc="legacy positional unbiased"),
            Sample((x, 1), kwargs={"correction": 2}, ref=lambda a, d: npfn(a, axis=d, ddof=2), desc="correction=2"),
            Sample((scalar(0.3),), kwargs={"correction": 0}, ref=lambda a: npfn(a), grad=False,
                   desc="0d (zero variance: no gradient check)"),
            Sample((empty(0, 3), 1), ref=lambda a, d: np.zeros((0,)), desc="empty rows"),
            Sample((g.ints(3),), raises=RuntimeError, desc="integer input"),
        ]
    SAMPLES[name] = samples


def _norm(g):
    x = g.away(3, 4)
    n = np.linalg.norm
    return [
        Sample((x,), ref=lambda a: n(a.ravel())),
        Sample((x, 2, 1), ref=lambda a, p, d: n(a, p, axis=d)),
        Sample((x, 1, 1), ref=lambda a, p, d: n(a, p, axis=d), desc="p=1"),
        Sample((g.distinct(3, 4), float("inf"), 0), ref=lambda a, p, d: n(a, np.inf, axis=d), desc="p=inf"),
        Sample((g.distinct(3, 4), float("-inf"), 0), ref=lambda a, p, d: n(a, -np.inf, axis=d), desc="p=-inf"),
        Sample((x, 3, (0, 1), True), ref=lambda a, p, d, k: np.sum(np.abs(a) ** 3) ** (1 / 3) * np.ones((1, 1)),
               desc="p=3 keepdim"),
        Sample((x, 0, 1), ref=lambda a, p, d: np.sum(a != 0, axis=d).astype(float), desc="p=0"),
        Sample((x, "fro"), ref=lambda a, p: n(a), desc="fro"),
        Sample((scalar(-2.0),), ref=np.abs),
        Sample((empty(0, 3), 2, 1), ref=lambda a, p, d: np.zeros((0,)), desc="empty rows"),
        Sample((np.zeros((2, 3)), 2, 1), ref=lambda a, p, d: np.zeros(2), gradgrad=False,
               desc="zero rows: gradient 0 (not twice differentiable there)"),
        Sample((g.ints(3),), raises=RuntimeError, desc="integer input"),
    ]


def _extreme(name, npfn):
    def samples(g):
        x = g.distinct(2, 3, 2)
        ties = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]])
        return [
            Sample((x,), ref=lambda a: npfn(a)),
            Sample((x, 1), ref=lambda a, d: npfn(a, axis=d)),
            Sample((x, (0, 2), True), ref=lambda a, d, k: npfn(a, axis=d, keepdims=k), desc="dim tuple keepdim"),
            Sample((ties, 1), ref=lambda a, d: npfn(a, axis=d), gradgrad=False,
                   desc="ties share the gradient (not twice differentiable there)"),
            Sample((scalar(0.5),), ref=lambda a: a),
            Sample((empty(0, 3), 1), ref=lambda a, d: np.zeros((0,)), desc="empty rows"),
            Sample((empty(0, 3),), raises=IndexError, desc="empty, all dims"),
            Sample((g.ints(2, 3), 1), grad=False, ref=lambda a, d: npfn(a, axis=d), desc="int64"),
        ]
    SAMPLES[name] = samples


def _max_min(name, npfn, argfn):
    def samples(g):
        x = g.distinct(3, 4)
        return [
            Sample((x,), ref=npfn),
            Sample((x, 1), ref=lambda a, d: (npfn(a, axis=d), argfn(a, axis=d)), desc="(values, indices)"),
            Sample((x, 0, True), ref=lambda a, d, k: (npfn(a, axis=d, keepdims=True), argfn(a, axis=d, keepdims=True)),
                   desc="keepdim"),
            Sample((x, g.distinct(3, 4) + 0.01), ref=np.maximum if name == "max" else np.minimum,
                   desc="binary form"),
            Sample((scalar(0.5), 0), ref=lambda a, d: (a, np.asarray(0)), desc="0d with dim"),
            Sample((empty(0, 3), 1), ref=lambda a, d: (np.zeros(0), np.zeros(0, np.int64)), desc="empty rows"),
            Sample((empty(0, 3),), raises=IndexError, desc="empty, all dims"),
            Sample((empty(0, 3), 0), raises=IndexError, desc="reduce an empty dim"),
        ]
    SAMPLES[name] = samples


def _arg(name, argfn):
    def samples(g):
        x = g.distinct(3, 4)
        return [
            Sample((x,), grad=False, ref=lambda a: argfn(a)),
            Sample((x, 1), grad=False, ref=lambda a, d: argfn(a, axis=d)),
            Sample((x, 0, True), grad=False, ref=lambda a, d, k: argfn(a, axis=d, keepdims=k)),
            Sample((np.array([1.0, 3.0, 3.0, 0.0]),), grad=False, ref=argfn, desc="first of ties"),
            Sample((scalar(2.0),), grad=False, ref=lambda a: np.asarray(0)),
            Sample((empty(0, 3), 1), grad=False, ref=lambda a, d: np.zeros(0, np.int64), desc="empty rows"),
            Sample((empty(0, 3),), raises=IndexError, desc="empty, all dims"),
            Sample((g.ints(5),), grad=False, ref=argfn, desc="int64"),
        ]
    SAMPLES[name] = samples


def _logsumexp(g):
    def ref(a, d, k=False):
        m = np.max(a, axis=d, keepdims=True)
        out = np.log(np.sum(np.exp(a - m), axis=d, keepdims=True)) + m
        return out if k else np.squeeze(out, axis=d)
    return [
        Sample((g.randn(3, 4), 1), ref=ref),
        Sample((g.randn(2, 3, 2), (0, 2), True), ref=ref, desc="dim tuple keepdim"),
        Sample((g.randn(2, 3) * 300, 1), ref=ref, desc="large values stay finite"),
        Sample((scalar(0.7), 0), ref=lambda a, d: a),
        Sample((empty(0, 3), 1), ref=lambda a, d: np.zeros(0), desc="empty rows"),
    ]


def _cumsum(g):
    return [
        Sample((g.randn(3, 4), 1), ref=lambda a, d: np.cumsum(a, axis=d)),
        Sample((g.randn(3, 4), 0), ref=lambda a, d: np.cumsum(a, axis=d)),
        Sample((g.randn(2, 3, 2), -1), ref=lambda a, d: np.cumsum(a, axis=d)),
        Sample((scalar(1.5), 0), ref=lambda a, d: a),
        Sample((empty(0, 3), 1), ref=lambda a, d: a),
        Sample((g.ints(2, 3), 1), grad=False, ref=lambda a, d: np.cumsum(a, axis=d), desc="int64"),
        Sample((g.randn(3), 1), raises=IndexError, desc="dim out of range"),
    ]


def _any_all(name, npfn):
    def samples(g):
        x = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
        return [
            Sample((x,), grad=False, ref=npfn),
            Sample((x, 1), grad=False, ref=lambda a, d: npfn(a, axis=d)),
            Sample((g.bools(2, 3), 0, True), grad=False, ref=lambda a, d, k: npfn(a, axis=d, keepdims=k)),
            Sample((np.asarray(True),), grad=False, ref=npfn),
            Sample((np.zeros((0, 2), bool),), grad=False, ref=npfn, desc="empty"),
            Sample((g.ints(2, 3, low=0, high=2), 1), grad=False, ref=lambda a, d: npfn(a, axis=d)),
        ]
    SAMPLES[name] = samples


def _aminmax(g):
    x = g.distinct(2, 3, 2)
    return [
        Sample((x,), ref=lambda a: (np.min(a), np.max(a))),
        Sample((x,), kwargs={"dim": 1}, ref=lambda a: (np.min(a, axis=1), np.max(a, axis=1))),
        Sample((x,), kwargs={"dim": -1, "keepdim": True},
               ref=lambda a: (np.min(a, axis=-1, keepdims=True), np.max(a, axis=-1, keepdims=True)),
               desc="keepdim"),
        Sample((scalar(0.5),), kwargs={"dim": 0}, ref=lambda a: (a, a)),
        Sample((empty(0, 3),), kwargs={"dim": 1}, ref=lambda a: (np.zeros(0), np.zeros(0)), desc="empty rows"),
        Sample((g.ints(2, 3),), grad=False, ref=lambda a: (np.min(a), np.max(a)), desc="int64"),
        Sample((empty(0, 3),), raises=RuntimeError, desc="empty, all dims"),
    ]


def _numpy_aliases(name, npfn, integer=False):
    """torch's ``axis=``/``keepdims=`` spellings, and a 0-d tensor's dim range."""
    def samples(g):
        x = g.distinct(2, 3, 2)
        out = [
            Sample((x,), kwargs={"axis": 1}, ref=lambda a: npfn(a, axis=1), desc="axis="),
            Sample((x,), kwargs={"axis": (0, 2), "keepdims": True},
                   ref=lambda a: npfn(a, axis=(0, 2), keepdims=True), desc="axis=, keepdims="),
            Sample((x,), kwargs={"dim": 0, "axis": 1}, raises=TypeError, desc="dim and axis"),
            Sample((scalar(1.5), 1), raises=IndexError, desc="0-d: dim 1 is out of range"),
        ]
        if name in ("max", "min", "argmax", "argmin", "any", "all", "prod"):  # one dim only
            out = [s for s in out if not isinstance(s.kwargs.get("axis"), tuple)]
        if name in ("argmax", "argmin", "any", "all"):
            for s in out:
                s.grad = False
        return out
    return samples


SAMPLES.update(sum=_sum, mean=_mean, prod=_prod, norm=_norm, logsumexp=_logsumexp, cumsum=_cumsum,
               aminmax=_aminmax)
_var_like("var", np.var)
_var_like("std", np.std)
_extreme("amax", np.max)
_extreme("amin", np.min)
_max_min("max", np.max, np.argmax)
_max_min("min", np.min, np.argmin)
_arg("argmax", np.argmax)
_arg("argmin", np.argmin)
_any_all("any", np.any)
_any_all("all", np.all)

for _name, _npfn in (("sum", np.sum), ("mean", np.mean), ("prod", np.prod), ("amax", np.max),
                     ("amin", np.min), ("var", lambda a, axis, keepdims=False: np.var(a, axis=axis, ddof=1,
                                                                                  keepdims=keepdims)),
                     ("std", lambda a, axis, keepdims=False: np.std(a, axis=axis, ddof=1, keepdims=keepdims)),
                     ("any", np.any), ("all", np.all), ("argmax", np.argmax), ("argmin", np.argmin),
                     ("logsumexp", lambda a, axis, keepdims=False: np.log(np.sum(np.exp(a), axis=axis,
                                                                               keepdims=keepdims)))):
    SAMPLES[_name] = (lambda base, extra: lambda g: base(g) + extra(g))(SAMPLES[_name],
                                                                       _numpy_aliases(_name, _npfn))


def _max_axis(g):
    x = g.distinct(3, 4)
    return [Sample((x,), kwargs={"axis": 1}, ref=lambda a: (np.max(a, axis=1), np.argmax(a, axis=1)),
                   desc="axis=")]


SAMPLES["max"] = (lambda base: lambda g: base(g) + _max_axis(g))(SAMPLES["max"])
