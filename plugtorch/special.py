"""``plugtorch.special``: torch.special's functions.

The special functions are ops declared in ``core/ops/special.py`` (lgamma, digamma, polygamma,
erfinv, the Bessel functions, zeta, the incomplete gamma functions, ...); the rest of torch.special
are ops plugtorch already has under torch's other names (``expit`` is ``sigmoid``). This module gives
them torch.special's names.
"""
from __future__ import annotations

from ._ops import erf, exp2, expm1, log1p, sigmoid
from .core.ops import special as _special
from .core.ops.reduce import logsumexp
from .core.ops.special import digamma, erfc, erfinv, i0, lgamma, polygamma, sinc, xlogy
from .core.ops.special import igamma as gammainc
from .core.ops.special import igammac as gammaincc
from .core.ops.special import logit as _logit
from .core.ops.special import mvlgamma as _mvlgamma
from .core.ops.special import special_bessel_j0 as bessel_j0
from .core.ops.special import special_bessel_j1 as bessel_j1
from .core.ops.special import special_entr as entr
from .core.ops.special import special_erfcx as erfcx
from .core.ops.special import special_i0e as i0e
from .core.ops.special import special_i1 as i1
from .core.ops.special import special_i1e as i1e
from .core.ops.special import special_log_ndtr as log_ndtr
from .core.ops.special import special_ndtr as ndtr
from .core.ops.special import special_ndtri as ndtri
from .core.ops.special import special_xlog1py as xlog1py
from .core.ops.special import special_zeta as zeta

__all__ = ["bessel_j0", "bessel_j1", "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1",
           "gammainc", "gammaincc", "gammaln", "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit",
           "logsumexp", "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round", "sinc", "softmax", "xlog1py",
           "xlogy", "zeta"]

gammaln = lgamma
psi = digamma
expit = sigmoid


def logit(input, eps=None):
    """log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given."""
    return _logit(input, eps)


def multigammaln(input, p):
    """The log of the multivariate gamma function of dimension p."""
    return _mvlgamma(input, p)


def round(input, *, decimals=0):
    """Round half to even, to ``decimals`` places (torch scales by 10**decimals, rounds and scales back)."""
    from ._ops import round as _round
    if decimals == 0:
        return _round(input)
    scale = 10.0 ** decimals
    return _round(input * scale) / scale


def softmax(input, dim, *, dtype=None):
    """softmax along ``dim`` (in ``dtype`` when given)."""
    from ._ops import softmax as _softmax
    return _softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    """log_softmax along ``dim`` (in ``dtype`` when given)."""
    from ._ops import log_softmax as _log_softmax
    return _log_softmax(input, dim, dtype=dtype)


del _special
