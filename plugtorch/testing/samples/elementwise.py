"""Samples for elementwise ops: unary math, binary arithmetic and comparisons, where, clamp."""
from __future__ import annotations

import math

from ._common import Sample, Waiver, empty, np, scalar

SAMPLES: dict = {}

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _quiet(ref):
    """A NumPy reference evaluated where it gives nan or inf on purpose, without warnings."""
    def call(*args):
        with np.errstate(all="ignore"):
            return ref(*args)
    return call


def _unary(name, domain, ref, int_ok=True):
    """domain(g, *shape) -> float64 inputs where the op is smooth."""
    def samples(g):
        out = [
            Sample((domain(g, 3, 4),), ref=ref),
            Sample((domain(g),), ref=ref),
            Sample((empty(0, 3),), ref=ref),
            Sample((domain(g, 2, 1, 3),), ref=ref, gradgrad=False),
        ]
        if int_ok:
            out.append(Sample((g.ints(2, 3, low=1, high=6),), grad=False, ref=ref, desc="int64 input"))
        return out
    SAMPLES[name] = samples


def _any(g, *s):
    return g.uniform(*s, low=-2, high=2)


def _pos(g, *s):
    return g.positive(*s)


def _away(g, *s):
    return g.away(*s)


def _frac(g, *s):
    # away from integers and half-integers, where floor/ceil/round jump
    return np.floor(g.uniform(*s, low=-3, high=3)) + g.uniform(*s, low=0.1, high=0.4)


_unary("neg", _any, np.negative)
_unary("exp", _any, np.exp)
_unary("log", _pos, np.log)
_unary("log1p", _pos, np.log1p)
_unary("expm1", _any, np.expm1)
_unary("sqrt", _pos, np.sqrt)
_unary("rsqrt", _pos, lambda x: 1 / np.sqrt(x))
_unary("abs", _away, np.abs)
_unary("sign", _away, np.sign)
_unary("sin", _any, np.sin)
_unary("cos", _any, np.cos)
_unary("tanh", _any, np.tanh)
_unary("erf", _any, _erf)
_unary("floor", _frac, np.floor)
_unary("ceil", _frac, np.ceil)
_unary("round", _frac, np.round)
_unary("reciprocal", _away, lambda x: 1 / x)
_unary("square", _any, np.square)
_unary("log2", _pos, np.log2)
_unary("log10", _pos, np.log10)
_unary("exp2", _any, np.exp2)
_unary("sinh", _any, np.sinh)
_unary("cosh", _any, np.cosh)
_unary("trunc", _frac, np.trunc)
_unary("frac", _frac, lambda x: x - np.trunc(x), int_ok=False)
_unary("tan", lambda g, *s: g.uniform(*s, low=-1.2, high=1.2), np.tan)
_unary("asin", lambda g, *s: g.uniform(*s, low=-0.9, high=0.9), _quiet(np.arcsin))
_unary("acos", lambda g, *s: g.uniform(*s, low=-0.9, high=0.9), _quiet(np.arccos))
_unary("atan", _any, np.arctan)
_unary("asinh", _any, np.arcsinh)
_unary("acosh", lambda g, *s: g.uniform(*s, low=1.2, high=3.0), _quiet(np.arccosh))
_unary("atanh", lambda g, *s: g.uniform(*s, low=-0.9, high=0.9), _quiet(np.arctanh))


def _lerp(g):
    def ref(a, b, w):
        return a + w * (b - a)
    return [
        Sample((g.randn(3, 4), g.randn(3, 4), 0.3), ref=ref),
        Sample((g.randn(3, 4), g.randn(1, 4), g.uniform(3, 1)), ref=ref, desc="tensor weight, broadcast"),
        Sample((scalar(1.0), scalar(3.0), 0.25), ref=ref),
        Sample((empty(0, 2), empty(0, 2), 0.5), ref=ref),
        Sample((g.randn(2), 1.0, 0.5), raises=TypeError, desc="end must be a tensor"),
    ]


SAMPLES["lerp"] = _lerp


def _predicate(name, ref):
    def samples(g):
        x = np.array([[0.5, np.nan, -np.inf], [np.inf, -1.0, 0.0]])
        return [
            Sample((x,), grad=False, ref=ref),
            Sample((scalar(np.nan),), grad=False, ref=ref),
            Sample((empty(0, 2),), grad=False, ref=ref),
            Sample((g.ints(3),), grad=False, ref=ref, desc="int64 input"),
        ]
    SAMPLES[name] = samples


_predicate("isnan", np.isnan)
_predicate("isinf", np.isinf)
_predicate("isfinite", np.isfinite)


def _logical_not(g):
    return [
        Sample((g.bools(2, 3),), grad=False, ref=np.logical_not),
        Sample((np.asarray(True),), grad=False, ref=np.logical_not),
        Sample((np.zeros((0,), bool),), grad=False, ref=np.logical_not),
        Sample((g.uniform(4).round(),), grad=False, ref=np.logical_not, desc="float input"),
    ]


SAMPLES["logical_not"] = _logical_not


# -- binary ------------------------------------------------------------------------------

def _binary(name, lhs, rhs, ref, scalar_rhs=2.0, grad=True, ints=True):
    """scalar_rhs=None: torch accepts no Python number as the second operand."""
    def samples(g):
        out = [
            Sample((lhs(g, 3, 4), rhs(g, 3, 4)), ref=ref, grad=grad),
            Sample((lhs(g, 3, 1), rhs(g, 1, 4)), ref=ref, grad=grad, desc="broadcast 3x1,1x4"),
            Sample((lhs(g, 2, 3), rhs(g, 3)), ref=ref, grad=grad, gradgrad=False, desc="broadcast 2x3,3"),
            Sample((lhs(g), rhs(g, 2, 3)), ref=ref, grad=grad, gradgrad=False, desc="0d,2x3"),
            Sample((lhs(g), rhs(g)), ref=ref, grad=grad, gradgrad=False, desc="0d,0d"),
            Sample((empty(0, 3), rhs(g, 1, 3)), ref=ref, grad=grad, desc="empty,1x3"),
        ]
        if scalar_rhs is not None:
            out.append(Sample((lhs(g, 2, 3), scalar_rhs), ref=lambda x, s: ref(x, s), grad=grad,
                              gradgrad=False, desc="python scalar"))
            out.append(Sample((g.ints(2, 3, low=1, high=5), 2.5), grad=False, ref=lambda x, s: ref(x, s),
                              desc="int64 tensor, python float: default float dtype"))
            out.append(Sample((g.ints(2, 3, low=1, high=5).astype(np.int32), 2), grad=False,
                              ref=lambda x, s: ref(x, s), desc="int32 tensor, python int keeps int32"))
        if ints:
            out.append(Sample((g.ints(2, 3, low=1, high=5), rhs(g, 2, 3)), grad=False, ref=ref,
                              desc="int64 with float64 promotes"))
            out.append(Sample((g.ints(2, 3, low=1, high=5), g.ints(3, low=1, high=4)), grad=False,
                              ref=ref, desc="int64,int64"))
        out.append(Sample((lhs(g, 2, 3), rhs(g, 4)), raises=RuntimeError, desc="shapes do not broadcast"))
        return out
    SAMPLES[name] = samples


def _u(g, *s):
    return g.uniform(*s, low=-2, high=2)


def _pos2(g, *s):
    return g.positive(*s, low=0.5, high=2.0)


def _distinct(g, *s):
    return g.distinct(*s) if s else scalar(g.uniform(low=-1, high=1))


def _distinct_shift(g, *s):
    return (g.distinct(*s) + 0.013) if s else scalar(g.uniform(low=-1, high=1) + 0.37)


_binary("add", _u, _u, np.add)
_binary("sub", _u, _u, np.subtract)
_binary("mul", _u, _u, np.multiply)
_binary("div", _u, lambda g, *s: g.away(*s, low=0.5, high=2), np.divide)


def _rounded_division(g):
    ints = np.array([-7, 7, -6, 6, 0])
    div = np.array([2, -2, 4, -4, 3])
    x, y = g.uniform(2, 3, low=-3, high=3), g.away(2, 3, low=0.5, high=2)
    return [
        Sample((ints, div), kwargs={"rounding_mode": "trunc"}, grad=False,
               ref=lambda a, b: np.trunc(a / b).astype(np.int64), desc="int trunc"),
        Sample((ints, div), kwargs={"rounding_mode": "floor"}, grad=False, ref=np.floor_divide,
               desc="int floor"),
        Sample((ints, -3), kwargs={"rounding_mode": "trunc"}, grad=False,
               ref=lambda a, b: np.trunc(a / b).astype(np.int64), desc="int trunc by a number"),
        Sample((x, y), kwargs={"rounding_mode": "trunc"}, ref=lambda a, b: np.trunc(a / b),
               desc="float trunc (zero gradient)"),
        Sample((x, y), kwargs={"rounding_mode": "floor"}, ref=np.floor_divide, desc="float floor"),
        Sample((x, y), kwargs={"rounding_mode": "round"}, raises=RuntimeError, desc="unknown mode"),
    ]


SAMPLES["div"] = (lambda base: lambda g: base(g) + _rounded_division(g))(SAMPLES["div"])
_binary("pow", _pos2, _u, np.power, scalar_rhs=3)
SAMPLES["pow"] = (lambda base: lambda g: base(g) + [
    Sample((np.array([0.0, 0.0, 2.0]), np.array([0.0, 2.0, 0.0])), ref=np.power, gradgrad=False,
           numerical=False, desc="0 ** 0: torch's gradients (0, not nan)"),
])(SAMPLES["pow"])
_binary("maximum", _distinct, _distinct_shift, np.maximum, scalar_rhs=None)
_binary("minimum", _distinct, _distinct_shift, np.minimum, scalar_rhs=None)
_binary("remainder", lambda g, *s: g.uniform(*s, low=0.1, high=0.9) + g.ints(*s, low=-3, high=3),
        lambda g, *s: np.full(s, 1.0), np.remainder, scalar_rhs=0.75, ints=True)
_binary("floor_divide", _u, lambda g, *s: g.away(*s, low=0.5, high=2), np.floor_divide, grad=False)
SAMPLES["floor_divide"] = (lambda base: lambda g: base(g) + [Waiver(
    "grad", "torch keeps floor_divide in the graph but raises in its backward; ours is zero, and "
            "test_forward checks requires_grad matches")])(SAMPLES["floor_divide"])
_ref: np.ufunc  # the loops' NumPy reference, a different ufunc in each
for _name, _ref in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                    ("gt", np.greater), ("ge", np.greater_equal)):
    _binary(_name, lambda g, *s: np.round(g.uniform(*s, low=-2, high=2)),
            lambda g, *s: np.round(g.uniform(*s, low=-2, high=2)), _ref, grad=False, scalar_rhs=0.0)
for _name, _ref in (("logical_and", np.logical_and), ("logical_or", np.logical_or)):
    _binary(_name, lambda g, *s: np.round(g.uniform(*s, low=0, high=1)),
            lambda g, *s: np.round(g.uniform(*s, low=0, high=1)), _ref, grad=False, scalar_rhs=None)


def _where(g):
    def ref(c, x, y):
        return np.where(c, x, y)
    return [
        Sample((g.bools(3, 4), g.randn(3, 4), g.randn(3, 4)), ref=ref),
        Sample((g.bools(3, 1), g.randn(1, 4), g.randn(3, 4)), ref=ref, desc="broadcast"),
        Sample((np.asarray(True), g.randn(), g.randn(2)), ref=ref, desc="0d cond"),
        Sample((g.bools(0, 2), empty(0, 2), empty(1, 2)), ref=ref, desc="empty"),
        Sample((g.bools(2, 3), g.randn(2, 3), 0.5), ref=ref, desc="python scalar other"),
        Sample((g.bools(2, 3), g.ints(2, 3), g.randn(2, 3)), ref=ref, grad=False, desc="int,float promotes"),
        Sample((g.randn(2, 3), g.randn(2, 3), g.randn(2, 3)), raises=RuntimeError, desc="float condition"),
        Sample((g.bools(2, 3),), grad=False, ref=lambda c: tuple(np.nonzero(c)), desc="where(condition) alone"),
        Sample((g.bools(2, 3), 1.0, 0), grad=False, ref=lambda c, x, y: np.asarray(np.where(c, x, y), dtype=np.float32),
               desc="two numbers: default float"),
        Sample((g.bools(2, 3), 2, 0), grad=False, ref=lambda c, x, y: np.where(c, x, y), desc="two ints"),
    ]


SAMPLES["where"] = _where


def _clamp(g):
    x = g.uniform(3, 4, low=-2, high=2)
    return [
        Sample((x,), kwargs={"min": -0.5, "max": 0.7}, ref=lambda x: np.clip(x, -0.5, 0.7)),
        Sample((x,), kwargs={"min": 0.1}, ref=lambda x: np.maximum(x, 0.1)),
        Sample((x,), kwargs={"max": 0.1}, ref=lambda x: np.minimum(x, 0.1)),
        Sample((x, g.uniform(3, 1, low=-1.8, high=-0.1), g.uniform(1, 4, low=0.1, high=1.8)),
               call=lambda m, x, lo, hi: m.clamp(x, lo, hi), ref=lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
               desc="tensor bounds, broadcast"),
        Sample((scalar(1.5),), kwargs={"min": -1.0, "max": 1.0}, ref=lambda x: np.clip(x, -1, 1)),
        Sample((empty(0, 2),), kwargs={"min": 0.0}, ref=lambda x: x),
        Sample((g.ints(2, 3),), kwargs={"min": 1, "max": 3}, grad=False, ref=lambda x: np.clip(x, 1, 3),
               desc="int64 keeps int64"),
        Sample((x,), kwargs={"min": 0.5, "max": -0.5}, ref=lambda x: np.full_like(x, -0.5),
               desc="min > max gives max"),
        Sample((x,), raises=RuntimeError, desc="neither min nor max"),
        Sample((x, 0.2), call=lambda m, a, v: m.clamp_min(a, v), ref=np.maximum, desc="clamp_min"),
        Sample((x, g.uniform(4)), call=lambda m, a, v: m.clamp_max(a, v), ref=np.minimum, desc="clamp_max tensor"),
    ]


SAMPLES["clamp"] = _clamp


# -- more binary functions -----------------------------------------------------------------

_binary("atan2", _u, _u, np.arctan2, scalar_rhs=None)
_binary("fmod", lambda g, *s: g.uniform(*s, low=0.1, high=0.9) + g.ints(*s, low=-3, high=3),
        lambda g, *s: np.full(s, 1.0), np.fmod, scalar_rhs=-0.75)
_binary("copysign", _away, _away, np.copysign, scalar_rhs=-1.0)
_binary("hypot", _away, _away, np.hypot, ints=False, scalar_rhs=None)
_binary("logaddexp", _u, _u, np.logaddexp, ints=False, scalar_rhs=None)
_binary("logaddexp2", _u, _u, np.logaddexp2, ints=False, scalar_rhs=None)
_binary("logical_xor", lambda g, *s: np.round(g.uniform(*s, low=0, high=1)),
        lambda g, *s: np.round(g.uniform(*s, low=0, high=1)), np.logical_xor, grad=False, scalar_rhs=None)


def _extended(name, extra):
    SAMPLES[name] = (lambda base: lambda g: base(g) + extra(g))(SAMPLES[name])


def _special_values(g):
    inf, nan = np.inf, np.nan
    a, b = np.array([inf, -inf, inf, nan, 0.0, -0.0]), np.array([inf, -inf, -inf, 1.0, -0.0, 2.0])
    return a, b


_extended("fmod", lambda g: [
    Sample((np.array([5.0, -5.0, 5.5]), np.array([0.0, 3.0, -2.0])), grad=False, ref=np.fmod,
           desc="by zero is nan; the sign follows the dividend"),
    Sample((np.array([7, -7, 8]), 3), grad=False, ref=np.fmod, desc="int64 keeps int64"),
])
_extended("copysign", lambda g: [
    Sample((np.array([1.0, 2.0, 3.0]), np.array([-0.0, 0.0, -np.inf])), grad=False, ref=np.copysign,
           desc="-0.0 counts as negative"),
    Sample((np.array([0.0, 0.0]), np.array([1.0, -1.0])), ref=np.copysign, gradgrad=False,
           desc="gradient 0 at 0, as torch's"),
])
_extended("hypot", lambda g: [
    Sample((np.array([1e200, 3.0, np.inf]), np.array([1e200, 4.0, np.nan])), grad=False, ref=np.hypot,
           desc="no overflow; inf beats nan"),
    Sample((g.ints(3), g.ints(3)), raises=NotImplementedError, desc="integer input"),
])
for _name, _ref in (("logaddexp", np.logaddexp), ("logaddexp2", np.logaddexp2)):
    _extended(_name, lambda g, _ref=_ref: [
        Sample(_special_values(g), grad=False, ref=_ref, desc="infinities, nan, zeros"),
        Sample((np.array([1000.0, -1000.0]), np.array([999.0, -1001.0])), ref=_ref, desc="no overflow"),
        Sample((g.ints(3), g.ints(3)), raises=NotImplementedError, desc="integer input"),
    ])


def _isclose(g):
    a = np.array([1.0, 1.0, np.inf, -np.inf, np.nan, 0.0, 1e-9])
    b = np.array([1.0 + 1e-6, 1.1, np.inf, np.inf, np.nan, 1e-9, 0.0])
    return [
        Sample((a, b), grad=False, ref=lambda x, y: np.isclose(x, y)),
        Sample((a, b), kwargs={"equal_nan": True}, grad=False,
               ref=lambda x, y: np.isclose(x, y, equal_nan=True), desc="equal_nan"),
        Sample((a, b), kwargs={"rtol": 0.2, "atol": 0.0}, grad=False,
               ref=lambda x, y: np.isclose(x, y, rtol=0.2, atol=0.0), desc="rtol, atol"),
        Sample((g.randn(2, 3), g.randn(3)), grad=False, ref=np.isclose, desc="broadcast"),
        Sample((scalar(1.0), scalar(1.0 + 1e-9)), grad=False, ref=np.isclose),
        Sample((empty(0, 2), empty(0, 2)), grad=False, ref=np.isclose),
        Sample((g.ints(3), g.ints(3)), grad=False, ref=np.isclose, desc="int64"),
        Sample((g.ints(3), g.randn(3)), raises=RuntimeError, desc="dtypes differ"),
    ]


SAMPLES["isclose"] = _isclose


def _addc(name, npop):
    def samples(g):
        def ref(x, a, b, value=1):
            return x + value * npop(a, b)
        away = g.away
        return [
            Sample((g.randn(2, 3), g.randn(2, 3), away(2, 3)), ref=ref),
            Sample((g.randn(2, 3), g.randn(3), away(2, 1)), kwargs={"value": -0.5},
                   ref=lambda x, a, b: ref(x, a, b, -0.5), desc="broadcast, value"),
            Sample((scalar(1.0), scalar(2.0), scalar(-1.5)), ref=ref),
            Sample((empty(0, 2), empty(0, 2), empty(1, 2) + 1.0), ref=ref),
        ]
    SAMPLES[name] = samples


_addc("addcmul", np.multiply)
_addc("addcdiv", np.divide)
SAMPLES["addcdiv"] = (lambda base: lambda g: base(g) + [
    Sample((g.randn(3), g.ints(3), g.ints(3, low=1)), raises=RuntimeError, desc="integer division"),
])(SAMPLES["addcdiv"])



for _name, _x, _ref in (("asin", np.array([-2.0, 1.0, 1.5]), np.arcsin),
                        ("acos", np.array([-2.0, -1.0, 1.5]), np.arccos),
                        ("acosh", np.array([0.5, 1.0, -1.0]), np.arccosh),
                        ("atanh", np.array([-1.0, 1.0, 2.0]), np.arctanh)):
    _extended(_name, lambda g, _x=_x, _ref=_ref: [
        Sample((_x,), grad=False, ref=_quiet(_ref), desc="outside the domain: nan or inf, no warning")])


# -- nan_to_num, fmax/fmin, float_power, ldexp, rad2deg/deg2rad -----------------------------------

def _nan_to_num(g):
    big = float(np.finfo(np.float64).max)
    special = np.array([1.0, np.nan, np.inf, -np.inf, -2.0])
    return [
        Sample((g.randn(2, 3),), ref=np.nan_to_num),
        # finite differences cannot step from nan or inf: torch's gradient (0 there) is the check
        Sample((special,), ref=lambda x: np.nan_to_num(x, posinf=big, neginf=-big), numerical=False,
               desc="nan and infinities"),
        Sample((special,), kwargs={"nan": 1.5, "posinf": 9.0, "neginf": -9.0}, numerical=False,
               ref=lambda x: np.nan_to_num(x, nan=1.5, posinf=9.0, neginf=-9.0), desc="replacements given"),
        Sample((scalar(np.nan),), ref=lambda x: np.zeros(()), numerical=False),
        Sample((empty(0, 2),), ref=np.nan_to_num),
        Sample((g.ints(3),), grad=False, ref=lambda x: x, desc="int64 unchanged"),
    ]


def _nan_ignoring(npop):
    def samples(g):
        nan = np.nan
        return [
            Sample((g.distinct(2, 3), g.distinct(2, 3)), ref=npop),
            Sample((np.array([1.0, nan, nan, 2.0]), np.array([nan, 3.0, nan, 0.5])), ref=npop, numerical=False,
                   desc="NaN ignored unless both are"),
            Sample((g.distinct(2, 3), g.distinct(3)), ref=npop, desc="broadcast"),
            Sample((np.array([1.0, 2.0]), np.array([1.0, 2.0])), ref=npop, gradgrad=False, numerical=False,
                   desc="ties: the gradient goes to input"),
            Sample((scalar(1.0), g.randn(2)), ref=npop),
            Sample((empty(0, 2), g.randn(2)), ref=npop),
            Sample((g.ints(3), g.ints(3)), grad=False, ref=npop, desc="int64"),
        ]
    return samples


def _float_power(g):
    return [
        Sample((g.positive(2, 3), g.randn(2, 3)), ref=np.power),
        Sample((g.positive(3), 2.5), ref=np.power, desc="number exponent"),
        Sample((g.ints(3, low=1), g.ints(3)), grad=False, ref=lambda a, b: np.power(a.astype(float), b),
               desc="int64 computed in float64"),
        Sample((scalar(2.0), g.randn(2)), ref=np.power),
        Sample((empty(0, 2), g.randn(2)), ref=np.power),
    ]


def _ldexp(g):
    return [
        Sample((g.randn(2, 3), g.ints(2, 3)), ref=lambda a, e: a * 2.0 ** e),
        Sample((g.randn(2, 3), g.randn(3)), ref=lambda a, e: a * 2.0 ** e, desc="float exponent, broadcast"),
        Sample((scalar(1.5), g.ints(2)), ref=lambda a, e: a * 2.0 ** e),
        Sample((empty(0, 2), g.ints(2)), ref=lambda a, e: a * 2.0 ** e),
    ]


def _angle_conversion(npop):
    def samples(g):
        return [
            Sample((g.randn(2, 3),), ref=npop),
            Sample((scalar(1.0),), ref=npop),
            Sample((empty(0),), ref=npop),
            Sample((g.ints(3),), grad=False, ref=lambda x: npop(x).astype(np.float32), desc="int64 to float32"),
        ]
    return samples


SAMPLES.update(nan_to_num=_nan_to_num, fmax=_nan_ignoring(np.fmax), fmin=_nan_ignoring(np.fmin),
               float_power=_float_power, ldexp=_ldexp, rad2deg=_angle_conversion(np.rad2deg),
               deg2rad=_angle_conversion(np.deg2rad))
