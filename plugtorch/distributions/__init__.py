"""Probability distributions, as ``torch.distributions``, written with plugtorch ops.

``rsample`` maps parameter-free noise through differentiable ops, so gradients reach the
parameters on every backend. See docs/distributions.md.
"""
from __future__ import annotations

from . import constraints, transforms
from .continuous import Exponential, Laplace, Normal, Uniform
from .counts import Binomial, Poisson
from .discrete import Bernoulli, Categorical, OneHotCategorical
from .distribution import Distribution
from .gamma import Beta, Dirichlet, Gamma
from .kl import kl_divergence, register_kl
from .multivariate_normal import MultivariateNormal
from .relaxed import ExpRelaxedCategorical, LogitRelaxedBernoulli, RelaxedBernoulli, RelaxedOneHotCategorical
from .transformed import Independent, LogNormal, TransformedDistribution
from .transforms import AffineTransform, ComposeTransform, ExpTransform, SigmoidTransform, TanhTransform, Transform

__all__ = [
    "constraints", "transforms", "Distribution", "Normal", "Uniform", "Exponential", "Laplace", "Bernoulli",
    "Categorical", "OneHotCategorical", "Independent", "TransformedDistribution", "LogNormal", "kl_divergence",
    "register_kl", "Transform", "ExpTransform", "AffineTransform", "SigmoidTransform", "TanhTransform",
    "ComposeTransform", "Gamma", "Beta", "Dirichlet", "Poisson", "Binomial", "MultivariateNormal",
    "RelaxedBernoulli", "RelaxedOneHotCategorical", "LogitRelaxedBernoulli", "ExpRelaxedCategorical",
]
