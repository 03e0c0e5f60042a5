"""MultivariateNormal parametrised by scale_tril, covariance_matrix or precision_matrix, as torch.

Everything goes through the Cholesky factor ``scale_tril`` (L, with covariance L L^T): log_prob
needs |L^-1 (x - loc)|^2 and log det L, rsample is loc + L eps.
"""
from __future__ import annotations

import math

import plugtorch as pt

from . import constraints
from ._linalg import cholesky, diagonal, solve_lower
from .distribution import Distribution
from .utils import lazy_property

__all__ = ["MultivariateNormal"]


def _mahalanobis(lower, x):
    """|lower^-1 x|^2 over the last dim of x, broadcasting batch dims."""
    shape = pt.Size(pt.broadcast_shapes(lower.shape[:-2], x.shape[:-1]))
    d = x.shape[-1]
    sol = solve_lower(lower.expand(shape + (d, d)), x.expand(shape + (d,)).unsqueeze(-1))
    return sol.squeeze(-1).pow(2).sum(-1)


class MultivariateNormal(Distribution):
    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        given = next(m for m in (scale_tril, covariance_matrix, precision_matrix) if m is not None)
        if given.dim() < 2:
            name = ("scale_tril" if scale_tril is not None else
                    "covariance_matrix" if covariance_matrix is not None else "precision_matrix")
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional leading batch dimensions")
        batch_shape = pt.Size(pt.broadcast_shapes(given.shape[:-2], loc.shape[:-1]))
        event = loc.shape[-1:]
        full = batch_shape + (event[0], event[0])
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(full)
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(full)
        else:
            self.precision_matrix = precision_matrix.expand(full)
        self.loc = loc.expand(batch_shape + event)
        super().__init__(batch_shape, event, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = pt.linalg.cholesky(covariance_matrix)  # raises as torch
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = pt.Size(batch_shape)
        full = batch_shape + self.event_shape + self.event_shape
        new.loc = self.loc.expand(batch_shape + self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(full))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _full(self):
        return self._batch_shape + self._event_shape + self._event_shape

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._full())

    @lazy_property
    def covariance_matrix(self):
        lower = self._unbroadcasted_scale_tril
        return (lower @ lower.transpose(-1, -2)).expand(self._full())

    @lazy_property
    def precision_matrix(self):
        lower = self._unbroadcasted_scale_tril
        eye = pt.eye(lower.shape[-1], dtype=lower.dtype, device=lower.device)
        inv = solve_lower(lower, eye.expand(lower.shape))
        return (inv.transpose(-1, -2) @ inv).expand(self._full())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(self._batch_shape + self._event_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = pt.randn(*shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return diagonal(self._unbroadcasted_scale_tril).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        m = _mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self):
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h.expand(self._batch_shape) if len(self._batch_shape) else h


def _precision_to_scale_tril(p):
    # covariance = P^-1 = L_P^-T L_P^-1 with P = L_P L_P^T; its Cholesky factor is the scale
    lp = cholesky(p)
    eye = pt.eye(p.shape[-1], dtype=p.dtype, device=p.device)
    inv = solve_lower(lp, eye.expand(p.shape))
    return cholesky(inv.transpose(-1, -2) @ inv)
