"""lgamma and digamma for positive arguments, written with plugtorch ops so autograd differentiates them
(the derivative of ``digamma`` here is the trigamma the Gamma-family entropies and KLs need).

The op table has neither function yet; these serve the distributions, whose parameters and
supports keep the arguments positive.
"""
from __future__ import annotations

import math

import plugtorch as pt

# Lanczos approximation, g = 7, n = 9: relative error ~1e-15 for x >= 0.5
_G = 7.0
_P = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
      -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
      1.5056327351493116e-7)


def _lgamma_ge_half(x):
    x = x - 1
    a = x * 0 + _P[0]
    for i in range(1, len(_P)):
        a = a + _P[i] / (x + i)
    t = x + (_G + 0.5)
    return 0.5 * math.log(2 * math.pi) + (x + 0.5) * t.log() - t + a.log()


def lgamma(x):
    """log Gamma(x) for x > 0 (reflection below 1/2 keeps the Lanczos sum accurate)."""
    small = x < 0.5
    x_hi = pt.where(small, pt.ones_like(x), x)
    x_lo = pt.where(small, x, pt.full_like(x, 0.25))
    reflected = math.log(math.pi) - (math.pi * x_lo).sin().log() - _lgamma_ge_half(1 - x_lo)
    return pt.where(small, reflected, _lgamma_ge_half(x_hi))


_SHIFT = 10  # digamma(x) = digamma(x + 10) - sum 1/(x + k): the asymptotic series is ~1e-14 accurate at 10


def digamma(x):
    """digamma(x) for x > 0."""
    acc = x * 0
    for k in range(_SHIFT):
        acc = acc + 1 / (x + k)
    y = x + _SHIFT
    inv2 = 1 / (y * y)
    series = inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 / 132))))
    return y.log() - 0.5 / y - series - acc


def lbeta(a, b):
    return lgamma(a) + lgamma(b) - lgamma(a + b)
