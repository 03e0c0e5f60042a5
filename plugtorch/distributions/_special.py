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


_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                   -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _horner(coeffs, w):
    p = w * 0 + coeffs[0]
    for c in coeffs[1:]:
        p = c + p * w
    return p


def erfinv(y):
    """Inverse error function on (-1, 1): Giles' single-precision approximation refined by two Newton
    steps on erf, which makes it accurate to double precision and gives autograd the right slope
    (1 / erf'(x)) through the last step."""
    w = -((1 - y) * (1 + y)).log()
    central = _horner(_ERFINV_CENTRAL, w - 2.5)
    tail = _horner(_ERFINV_TAIL, w.clamp(min=0).sqrt() - 3)
    x = pt.where(w < 5, central, tail) * y
    for _ in range(2):
        x = x - (pt.erf(x) - y) / (2 / math.sqrt(math.pi) * (-x * x).exp())
    return x
