"""Gamma, Beta and Dirichlet, sampled with Marsaglia-Tsang gamma draws built from plugtorch's normal and
uniform primitives (no gamma primitive exists in the backend contract).

``rsample`` uses implicit reparameterisation, as torch: a Gamma(a, 1) draw x has
dx/da = -(dP/da)(a, x) / p(x; a), with P the regularised lower incomplete gamma function, whose
a-derivative comes from its power series. Beta and Dirichlet normalise reparameterised Gamma draws.
See docs/distributions.md.
"""
from __future__ import annotations

import math
import numbers

import plugtorch as pt

from ..core.ops.special import digamma, lgamma
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, tiny

__all__ = ["Gamma", "Beta", "Dirichlet", "standard_gamma", "standard_gamma_grad"]


def standard_gamma(alpha):
    """Gamma(alpha, 1) draws, one per element of ``alpha`` (no gradient).

    Marsaglia and Tsang (2000): x = d (1 + c z)^3 for a normal z, accepted with probability
    exp(z^2/2 + d - d v + d log v). Each round draws for every element and keeps the first
    accepted value; the acceptance rate is above 95 %, so a handful of rounds suffice. For
    alpha < 1 it draws Gamma(alpha + 1) and multiplies by u^(1/alpha).
    """
    with pt.no_grad():
        alpha = alpha.detach()
        boost = alpha < 1
        a = pt.where(boost, alpha + 1, alpha)
        d = a - 1.0 / 3
        c = 1 / (9 * d).sqrt()
        out = pt.zeros_like(a)
        done = pt.zeros_like(a) > 0
        shape = tuple(a.shape)
        while True:
            z = pt.randn(*shape, dtype=a.dtype, device=a.device)
            u = pt.rand(*shape, dtype=a.dtype, device=a.device)
            v = (1 + c * z) ** 3
            v_pos = v.clamp(min=tiny(a.dtype))
            ok = (v > 0) & (u.clamp(min=tiny(a.dtype)).log() < 0.5 * z * z + d - d * v_pos + d * v_pos.log())
            take = ok & ~done
            out = pt.where(take, d * v_pos, out)
            done = done | ok
            if bool(done.all().item()):  # host check; the loop needs it to know when to stop
                break
        u = pt.rand(*shape, dtype=a.dtype, device=a.device).clamp(min=tiny(a.dtype))
        out = pt.where(boost, out * u ** (1 / alpha.clamp(min=tiny(a.dtype))), out)
        return out.clamp(min=tiny(a.dtype))


def standard_gamma_grad(alpha, x):
    """dx/dalpha for Gamma(alpha, 1) draws x (no gradient), by implicit differentiation of the CDF.

    P(a, x) = sum_n exp((a + n) log x - x - lgamma(a + n + 1)), so
    dP/da = sum_n term_n (log x - digamma(a + n + 1)); the series runs past the largest x by ten
    standard deviations, where its terms have become negligible."""
    with pt.no_grad():
        alpha, x = alpha.detach(), x.detach()
        top = float(x.max().item()) if x.numel() else 0.0
        n_terms = int(top + 10 * math.sqrt(top) + 30)
        n = pt.arange(n_terms, dtype=x.dtype, device=x.device)
        a_n = alpha.unsqueeze(-1) + n + 1
        log_x = x.log().unsqueeze(-1)
        terms = ((a_n - 1) * log_x - x.unsqueeze(-1) - lgamma(a_n)).exp()
        dp_da = (terms * (log_x - digamma(a_n))).sum(-1)
        log_pdf = (alpha - 1) * x.log() - x - lgamma(alpha)
        return -dp_da / log_pdf.exp()


def _rsample_standard_gamma(alpha):
    x = standard_gamma(alpha)
    if not alpha.requires_grad:
        return x
    # value x, gradient dx/dalpha: the implicit reparameterisation gradient
    return x + (alpha - alpha.detach()) * standard_gamma_grad(alpha, x)


class Gamma(Distribution):
    has_rsample = True
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        scalar = isinstance(concentration, numbers.Number) and isinstance(rate, numbers.Number)
        super().__init__(pt.Size() if scalar else self.concentration.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = pt.Size(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return _rsample_standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c, r = self.concentration, self.rate
        # (c - 1) log x, with 0 log 0 = 0 as torch's xlogy
        xlogy = pt.where(c == 1, pt.zeros_like(c * value), (c - 1) * value.log())
        return c * r.log() + xlogy - r * value - lgamma(c)

    def cdf(self, value):
        """The regularised lower incomplete gamma function P(c, rate * value), summed from its power
        series (terms run ten standard deviations past the largest argument)."""
        if self._validate_args:
            self._validate_sample(value)
        y = self.rate * value
        c = self.concentration.expand(y.shape) if y.dim() >= self.concentration.dim() else self.concentration
        top = float(y.detach().max().item()) if y.numel() else 0.0
        n = pt.arange(int(top + 10 * math.sqrt(max(top, 0.0)) + 30), dtype=y.dtype, device=y.device)
        positive = y > 0
        y_safe = pt.where(positive, y, pt.ones_like(y))
        a_n = c.unsqueeze(-1) + n
        terms = (a_n * y_safe.log().unsqueeze(-1) - y_safe.unsqueeze(-1) - lgamma(a_n + 1)).exp()
        return pt.where(positive, terms.sum(-1), pt.zeros_like(terms.sum(-1)))

    def entropy(self):
        c = self.concentration
        return c - self.rate.log() + lgamma(c) + (1.0 - c) * digamma(c)


class Dirichlet(Distribution):
    has_rsample = True
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        shape = concentration.shape
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = pt.Size(batch_shape)
        new.concentration = self.concentration.expand(batch_shape + self.event_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        g = _rsample_standard_gamma(self.concentration.expand(shape))
        return g / g.sum(-1, keepdim=True)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return ((c - 1) * value.log()).sum(-1) + lgamma(c.sum(-1)) - lgamma(c).sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        cm1 = (self.concentration - 1).clamp(min=0.0)
        mode = cm1 / cm1.sum(-1, keepdim=True)
        # all concentrations below 1: the density peaks at the vertex of the largest one
        low = (self.concentration < 1).all(-1, keepdim=True)
        vertex = (self.concentration == self.concentration.amax(-1, keepdim=True)).to(mode.dtype)
        return pt.where(low.expand(mode.shape), vertex, mode)

    @property
    def variance(self):
        c0 = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (c0 - self.concentration) / (c0.pow(2) * (c0 + 1))

    def entropy(self):
        c = self.concentration
        k = c.size(-1)
        a0 = c.sum(-1)
        return lgamma(c).sum(-1) - lgamma(a0) - (k - a0) * digamma(a0) - ((c - 1.0) * digamma(c)).sum(-1)


class Beta(Distribution):
    has_rsample = True
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        scalar = isinstance(concentration1, numbers.Number) and isinstance(concentration0, numbers.Number)
        super().__init__(pt.Size() if scalar else self.concentration1.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = pt.Size(batch_shape)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def __repr__(self):
        # torch keeps Beta's parameters inside a Dirichlet, so its repr (and error texts) say "Beta()"
        return "Beta()"

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        stacked = pt.stack([self.concentration1, self.concentration0], -1)
        return Dirichlet(stacked, validate_args=False).mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = _rsample_standard_gamma(self.concentration1.expand(shape))
        y = _rsample_standard_gamma(self.concentration0.expand(shape))
        return (x / (x + y)).clamp(min=tiny(x.dtype), max=1 - 2 ** -52 if x.dtype == pt.float64 else 1 - 2 ** -23)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return (a - 1) * value.log() + (b - 1) * (-value).log1p() - (lgamma(a) + lgamma(b) - lgamma(a + b))

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        total = a + b
        return (lgamma(a) + lgamma(b) - lgamma(total) - (a - 1) * digamma(a) - (b - 1) * digamma(b)
                + (total - 2) * digamma(total))
