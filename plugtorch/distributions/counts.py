"""Count distributions: Poisson and Binomial.

Both sample with loops of vectorised plugtorch ops (no Poisson/binomial primitive exists in the
backend contract): Poisson multiplies uniforms until the product falls below exp(-rate), so it
costs about ``rate`` rounds; Binomial sums ``max(total_count)`` Bernoulli draws.
"""
from __future__ import annotations

import numbers

import plugtorch as pt

from ..core.ops.special import lgamma
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, expand_probs_or_logits, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Poisson", "Binomial"]


class Poisson(Distribution):
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch = pt.Size() if isinstance(rate, numbers.Number) else self.rate.size()
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Poisson, _instance)
        batch_shape = pt.Size(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with pt.no_grad():
            limit = pt.exp(-self.rate.detach()).expand(shape)
            count = pt.zeros(*shape, dtype=self.rate.dtype, device=self.rate.device)
            prod = pt.rand(*shape, dtype=self.rate.dtype, device=self.rate.device)
            active = prod > limit
            while bool(active.any().item()):  # host check: the loop runs until every draw is done
                count = count + active.to(count.dtype)
                prod = prod * pt.rand(*shape, dtype=self.rate.dtype, device=self.rate.device)
                active = active & (prod > limit)
            return count

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        # value * log(rate) with 0 * log 0 = 0, as torch's xlogy
        xlogy = pt.where(value == 0, pt.zeros_like(rate), value * rate.log())
        return xlogy - rate - lgamma(value + 1)


def _clamp_by_zero(x):
    # clamp(x, min=0) with gradient 1/2 at 0, as torch's binomial normaliser
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(Distribution):
    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.to(self.probs.dtype)
            self._param = self.probs
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.to(self.logits.dtype)
            self._param = self.logits
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Binomial, _instance)
        batch_shape = pt.Size(batch_shape)
        new.total_count = self.total_count.expand(batch_shape)
        expand_probs_or_logits(self, new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with pt.no_grad():
            n = self.total_count.detach().expand(shape)
            p = self.probs.detach().expand(shape)
            count = pt.zeros_like(p)
            for i in range(int(n.max().item()) if n.numel() else 0):
                draw = pt.rand(*shape, dtype=p.dtype, device=p.device) < p
                count = count + (draw & (n > i)).to(p.dtype)
            return count

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        normalize = n * _clamp_by_zero(logits) + n * pt.log1p(pt.exp(-logits.abs())) - lgamma(n + 1)
        return value * logits - lgamma(value + 1) - lgamma(n - value + 1) - normalize

    def entropy(self):
        total = int(self.total_count.max().item())
        if not bool((self.total_count == total).all().item()):
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(pt.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        total = int(self.total_count.max().item())
        if not bool((self.total_count == total).all().item()):
            raise NotImplementedError("Inhomogeneous total count not supported by `enumerate_support`.")
        values = pt.arange(1 + total, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values
