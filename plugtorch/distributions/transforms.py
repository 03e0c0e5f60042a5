"""Invertible transforms with ``log_abs_det_jacobian``, as ``torch.distributions.transforms``."""
from __future__ import annotations

import math

import plugtorch as pt
import plugtorch.nn.functional as F

from . import constraints

__all__ = ["Transform", "ExpTransform", "AffineTransform", "SigmoidTransform", "TanhTransform",
           "ComposeTransform", "identity_transform"]


class Transform:
    bijective = False
    domain: constraints.Constraint = constraints.real
    codomain: constraints.Constraint = constraints.real

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached_x_y = None, None

    @property
    def event_dim(self):
        return max(self.domain.event_dim, self.codomain.event_dim)

    @property
    def sign(self):
        raise NotImplementedError

    @property
    def inv(self):
        return _InverseTransform(self)

    def __call__(self, x):
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = x, y
        return y

    def _inv_call(self, y):
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = x, y
        return x

    def _call(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return id(self)

    def __repr__(self):
        return self.__class__.__name__ + "()"


class _InverseTransform(Transform):
    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = Transform.__hash__

    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform
        self.bijective = transform.bijective

    @property
    def domain(self):  # type: ignore[override]
        return self._inv.codomain

    @property
    def codomain(self):  # type: ignore[override]
        return self._inv.domain

    @property
    def sign(self):
        return self._inv.sign

    @property
    def inv(self):
        return self._inv

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)


class ComposeTransform(Transform):
    def __init__(self, parts, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)
        self.bijective = all(p.bijective for p in self.parts)

    @property
    def domain(self):  # type: ignore[override]
        return self.parts[0].domain if self.parts else constraints.real

    @property
    def codomain(self):  # type: ignore[override]
        return self.parts[-1].codomain if self.parts else constraints.real

    @property
    def event_dim(self):
        return max([p.event_dim for p in self.parts], default=0)

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = Transform.__hash__

    @property
    def inv(self):
        return ComposeTransform([p.inv for p in reversed(self.parts)])

    def __call__(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return pt.zeros_like(x)
        total = 0
        for part in self.parts[:-1]:
            y_tmp = part(x)
            total = total + part.log_abs_det_jacobian(x, y_tmp)
            x = y_tmp
        return total + self.parts[-1].log_abs_det_jacobian(x, y)

    def __repr__(self):
        return "ComposeTransform(\n    " + ",\n    ".join(repr(p) for p in self.parts) + "\n)"


identity_transform = ComposeTransform([])


class ExpTransform(Transform):
    def __eq__(self, other):
        return isinstance(other, ExpTransform)

    __hash__ = Transform.__hash__

    codomain = constraints.positive
    bijective = True
    sign = +1

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


def _same(a, b) -> bool:
    if isinstance(a, pt.Tensor) or isinstance(b, pt.Tensor):
        return bool((a == b).all().item())
    return a == b


class AffineTransform(Transform):
    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    @property
    def event_dim(self):
        return self._event_dim

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False
        return _same(self.loc, other.loc) and _same(self.scale, other.scale)

    __hash__ = Transform.__hash__

    @property
    def sign(self):
        return self.scale.sign() if isinstance(self.scale, pt.Tensor) else math.copysign(1, self.scale)

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        if isinstance(self.scale, pt.Tensor):
            result = self.scale.abs().log()
        else:
            result = pt.full_like(x, math.log(abs(self.scale)))
        if self._event_dim:
            shape = result.size()[:-self._event_dim] + (-1,)
            result = result.reshape(shape).sum(-1)
        return result.expand(x.shape[:x.dim() - self._event_dim]) if result.dim() < x.dim() - self._event_dim \
            else result


class SigmoidTransform(Transform):
    def __eq__(self, other):
        return isinstance(other, SigmoidTransform)

    __hash__ = Transform.__hash__

    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def _call(self, x):
        return pt.sigmoid(x)

    def _inverse(self, y):
        from .utils import eps, tiny
        y = y.clamp(min=tiny(y.dtype), max=1 - eps(y.dtype))
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x) - F.softplus(x)


class TanhTransform(Transform):
    def __eq__(self, other):
        return isinstance(other, TanhTransform)

    __hash__ = Transform.__hash__

    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return pt.atanh(y)

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) in a form that stays finite for large |x| (torch's formula)
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))
