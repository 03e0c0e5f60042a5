"""torch.special's functions (and their torch.* and Tensor.* spellings: lgamma, digamma, erfinv, ...).

The functions no composition of other ops computes to double precision are ops on the backend's
``special`` primitive (one primitive, the function named by an attr, as ``fft``); their
derivatives are written with each other (digamma's is polygamma(1, x), i0's is i1). The rest
(``xlogy``, ``entr``, ``sinc``, ``logit``, ``mvlgamma``) are decompositions with derivative
rules of their own, so a zero where the formula has 0 * inf gives torch's gradient, not nan.
Integer inputs are computed in the default float dtype, as torch's.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..dtypes import get_default_dtype, result_type
from ..optable import op, public
from . import elementwise as ew
from ._args import broadcast_shapes
from .conversion import cast

_EVERYWHERE = ("plugtorch", "Tensor")
_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2 * math.pi)


def _float(x):
    return x if x.dtype.is_floating_point else cast(x, get_default_dtype())


def _check_real(name, x):
    if x.dtype.is_complex:
        raise NotImplementedError(f"{name}: not implemented for complex tensors (got {x.dtype!r}); apply it "
                                  "to the real and imaginary parts, or to .abs()")


def _lower(function):
    def lower(backend, x, y=None, **attrs):
        return backend.primitives["special"](function, x, y, attrs.get("n", 0))
    return lower


def _unary_args(name):
    def bind(input):
        _check_real(name, input)
        return (_float(input),), {}
    return bind


_Op = Callable[..., Any]  # (annotated: the rules name ops declared after them)


def _special(name, function, rule, exposed=(), doc="") -> _Op:
    """An op of one tensor computed by the ``special`` primitive's ``function``."""
    def computes(input):
        pass
    computes.__doc__ = doc
    return op(name, lower=_lower(function), bind=_unary_args(name), derivative=rule, save="inputs",
              exposed=exposed, inplace="Tensor" in exposed)(computes)


def _x(ctx):
    return ctx.saved[0]


lgamma: _Op = _special("lgamma", "lgamma", lambda ctx, g: g * digamma(_x(ctx)), _EVERYWHERE,
                  "log |Gamma(x)| (torch.special.gammaln).")
digamma: _Op = _special("digamma", "digamma", lambda ctx, g: g * polygamma(1, _x(ctx)), _EVERYWHERE,
                   "The logarithmic derivative of Gamma (torch.special.psi); -inf at 0, nan at negative integers.")
erfc: _Op = _special("erfc", "erfc", lambda ctx, g: g * (-2 / _SQRT_PI) * ew.exp(-_x(ctx) * _x(ctx)), _EVERYWHERE,
                "1 - erf(x), accurate where erf(x) is near 1.")
erfinv: _Op = _special("erfinv", "erfinv", lambda ctx, g: g * (_SQRT_PI / 2) * ew.exp(erfinv(_x(ctx)) ** 2),
                  _EVERYWHERE, "The inverse of erf on (-1, 1); +-inf at +-1, nan outside.")
i0: _Op = _special("i0", "i0", lambda ctx, g: g * special_i1(_x(ctx)), _EVERYWHERE,
              "The modified Bessel function of the first kind, order 0.")
special_i0e: _Op = _special("special_i0e", "i0e",
                       lambda ctx, g: g * (special_i1e(_x(ctx)) - ew.sign(_x(ctx)) * special_i0e(_x(ctx))),
                       doc="i0(x) * exp(-|x|).")


def _i1_rule(ctx, g):
    x = _x(ctx)
    return g * ew.where(x == 0, 0.5, i0(x) - special_i1(x) / x)


def _i1e_rule(ctx, g):
    x = _x(ctx)
    safe = ew.where(x == 0, 1.0, x)  # 1/x is not taken at 0, where the limit 1/2 stands: no 0 * inf
    return g * ew.where(x == 0, 0.5, special_i0e(x) - special_i1e(x) * (ew.sign(x) + ew.reciprocal(safe)))


special_i1: _Op = _special("special_i1", "i1", _i1_rule, doc="The modified Bessel function of the first kind, order 1.")
special_i1e: _Op = _special("special_i1e", "i1e", _i1e_rule, doc="i1(x) * exp(-|x|).")
special_erfcx: _Op = _special("special_erfcx", "erfcx",
                         lambda ctx, g: g * (2 * _x(ctx) * special_erfcx(_x(ctx)) - 2 / _SQRT_PI),
                         doc="exp(x**2) * erfc(x), without its overflow and underflow.")
special_ndtri: _Op = _special("special_ndtri", "ndtri",
                         lambda ctx, g: g * _SQRT_2PI * ew.exp(special_ndtri(_x(ctx)) ** 2 / 2),
                         doc="The inverse of ndtr: the standard normal quantile of p in [0, 1].")
special_ndtr: _Op = _special("special_ndtr", "ndtr", lambda ctx, g: g * ew.exp(-_x(ctx) * _x(ctx) / 2) / _SQRT_2PI,
                        doc="The standard normal distribution function.")
special_log_ndtr: _Op = _special(
    "special_log_ndtr", "log_ndtr",
    lambda ctx, g: g * ew.exp(-(special_log_ndtr(_x(ctx)) + _x(ctx) * _x(ctx) / 2)) / _SQRT_2PI,
    doc="log(ndtr(x)), accurate far into the lower tail.")
# torch has no derivatives for the Bessel functions of the first kind: neither has plugtorch
special_bessel_j0: _Op = _special("special_bessel_j0", "j0", None, doc="The Bessel function J0.")
special_bessel_j1: _Op = _special("special_bessel_j1", "j1", None, doc="The Bessel function J1.")


def _polygamma_args(n, input):
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"polygamma(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError(f"polygamma(n, x) does not support negative n (got n={n})")
    _check_real("polygamma", input)
    return (_float(input),), {"n": n}


@op(lower=_lower("polygamma"), bind=_polygamma_args, save="inputs",
    derivative=lambda ctx, g: g * polygamma(ctx.attrs["n"] + 1, ctx.saved[0]), exposed=("plugtorch",))
def polygamma(input, *, n):
    """The n-th derivative of digamma (torch.polygamma(n, input); Tensor.polygamma(n))."""


@public("Tensor", name="polygamma", inplace=True)
def _polygamma_method(input, n):
    """``polygamma(n, self)``."""
    return polygamma(n, input)


def _pair_args(name):
    def bind(input, other):
        from .creation import tensor
        if not hasattr(input, "dtype"):
            input = tensor(input, dtype=result_type(other, input), device=other.device)
        if not hasattr(other, "dtype"):
            other = tensor(other, dtype=result_type(input, other), device=input.device)
        _check_real(name, input)
        _check_real(name, other)
        dtype = result_type(input, other)
        dtype = dtype if dtype.is_floating_point else get_default_dtype()
        shape = broadcast_shapes(input.shape, other.shape)
        return (cast(input, dtype).broadcast_to(shape), cast(other, dtype).broadcast_to(shape)), {}
    return bind


def _no_grad_of_first(name, ctx):
    if ctx.needs_input_grad[0]:
        raise NotImplementedError(f"the derivative of {name} with respect to its first argument is not "
                                  "implemented (nor in torch); detach it")


def _zeta_rule(ctx, g):
    _no_grad_of_first("special_zeta", ctx)
    x, q = ctx.saved
    return None, g * -x * special_zeta(x + 1.0, q)


@op(lower=_lower("zeta"), bind=_pair_args("special_zeta"), save="inputs", derivative=_zeta_rule)
def special_zeta(input, other):
    """The Hurwitz zeta function sum over k >= 0 of (other + k) ** -input."""


def _igamma_density(a, x):
    return ew.exp((a - 1) * ew.log(x) - x - lgamma(a))


def _igamma_rule(ctx, g):
    _no_grad_of_first("igamma", ctx)
    return None, g * _igamma_density(*ctx.saved)


def _igammac_rule(ctx, g):
    _no_grad_of_first("igammac", ctx)
    return None, -(g * _igamma_density(*ctx.saved))


@op(lower=_lower("gammainc"), bind=_pair_args("igamma"), save="inputs", derivative=_igamma_rule,
    exposed=_EVERYWHERE, inplace=True)
def igamma(input, other):
    """The regularised lower incomplete gamma function P(input, other) (torch.special.gammainc)."""


@op(lower=_lower("gammaincc"), bind=_pair_args("igammac"), save="inputs", derivative=_igammac_rule,
    exposed=_EVERYWHERE, inplace=True)
def igammac(input, other):
    """The regularised upper incomplete gamma function Q(input, other) = 1 - P (torch.special.gammaincc)."""


# -- decompositions with rules of their own --------------------------------------------

def _xlogy_rule(ctx, g, log=ew.log):
    x, y = ctx.saved
    need = ctx.needs_input_grad
    gx = None
    if need[0]:  # torch's xlogy(g, y) (xlog1py(g, y)), 0 where x is 0 and log's argument <= 0
        if log is ew.log1p:
            gx = ew.where((x == 0) & (y <= -1), 0.0, special_xlog1py(g, y))
        else:
            gx = ew.where((x == 0) & (y <= 0), 0.0, xlogy(g, y))
    gy = g * x / ((1 + y) if log is ew.log1p else y) if need[1] else None
    return gx, gy


def _xlog1py_rule(ctx, g):
    return _xlogy_rule(ctx, g, ew.log1p)


def _one_where_zero(input, other, one=1.0):
    """other, except where input is 0 (and other not nan): there the value whose log is 0, so that
    0 * log(...) is 0 and never 0 * inf."""
    return ew.where((input == 0) & ~ew.isnan(other), one, other)


def _plus_zero_at_zero(input, out):
    """out, with torch's +0.0 where input is 0 (-0.0 * log(1) would be -0.0); nan stays nan."""
    return ew.where((out == 0) & (input == 0), 0.0, out)


@op(bind=_pair_args("xlogy"), derivative=_xlogy_rule, save="inputs", exposed=_EVERYWHERE, inplace=True)
def xlogy(input, other):
    """input * log(other), 0 where input is 0 (unless other is nan)."""
    return _plus_zero_at_zero(input, input * ew.log(_one_where_zero(input, other)))


@op(bind=_pair_args("special_xlog1py"), derivative=_xlog1py_rule, save="inputs")
def special_xlog1py(input, other):
    """input * log1p(other), 0 where input is 0 (unless other is nan)."""
    return _plus_zero_at_zero(input, input * ew.log1p(_one_where_zero(input, other, 0.0)))


@op(bind=_unary_args("special_entr"), derivative=lambda ctx, g: g * -(1 + ew.log(ctx.saved[0])), save="inputs")
def special_entr(input):
    """-x * log(x): 0 at 0, -inf for negative x."""
    positive = ew.where(input > 0, input, 1.0)  # log of the others is not taken: no 0 * inf
    return ew.where(input > 0, -positive * ew.log(positive),
                    ew.where(input == 0, 0.0, ew.where(ew.isnan(input), input, -math.inf)))


def _sinc_rule(ctx, g):
    x = ctx.saved[0]
    px = math.pi * x
    # 0 where pi x^2 is 0, as torch's: a tiny x's square underflows (0 / 0 would be nan)
    return g * ew.where(px * x == 0, 0.0, (px * ew.cos(px) - ew.sin(px)) / (px * x))


@op(bind=_unary_args("sinc"), derivative=_sinc_rule, save="inputs", exposed=_EVERYWHERE, inplace=True)
def sinc(input):
    """sin(pi x) / (pi x), 1 at 0."""
    px = math.pi * input
    return ew.where(input == 0, 1.0, ew.sin(px) / px)


def _logit_args(input, eps=None):
    _check_real("logit", input)
    return (_float(input),), {"eps": eps}


def _logit_rule(ctx, g):
    x, eps = ctx.saved[0], ctx.attrs["eps"]
    grad = g / (x * (1 - x))
    if eps is None:  # outside [0, 1], where logit is nan, so is its gradient (torch's)
        return ew.where((x < 0) | (x > 1), math.nan, grad)
    return ew.where((x < eps) | (x > 1 - eps), 0.0, grad)


@op(bind=_logit_args, derivative=_logit_rule, save="inputs", exposed=_EVERYWHERE, inplace=True)
def logit(input, *, eps):
    """log(x / (1 - x)), x first clamped to [eps, 1 - eps] when eps is given."""
    x = input if eps is None else ew.clamp(input, eps, 1 - eps)
    return ew.log(x / (1 - x))


def _mvlgamma_args(input, p):
    _check_real("mvlgamma", input)
    if not isinstance(p, int) or p < 1:
        raise RuntimeError(f"mvlgamma: p has to be greater than or equal to 1 (got {p!r})")
    # torch 2.13 no longer checks that every element exceeds (p - 1) / 2: below, lgamma's values
    return (_float(input),), {"p": p}


@op(bind=_mvlgamma_args, exposed=_EVERYWHERE, inplace=True)
def mvlgamma(input, *, p):
    """The log of the multivariate gamma function of dimension p (torch.special.multigammaln)."""
    from .shape import stack
    terms = stack([lgamma(input - j / 2) for j in range(p)], 0).sum(0)
    return terms + p * (p - 1) / 4 * math.log(math.pi)
