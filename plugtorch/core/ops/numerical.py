"""Numerical helpers written with differentiable ops: gradient (finite differences, numpy's
and torch's formulas) and renorm (each slice's norm capped).

Both are decompositions, so their derivatives are those of the ops they are written with; for
renorm that is torch's ``renorm_backward``, which differentiates through the norm too.
"""
from __future__ import annotations

import builtins
import numbers

from ..dtypes import get_default_dtype
from ..optable import op, public
from ..tensor import Tensor, _wrap_dim
from . import elementwise as ew
from .linalg import linalg_vector_norm
from .shape import cat

_EVERYWHERE = ("plugtorch", "Tensor")


# -- renorm -------------------------------------------------------------------------------------

def _renorm_args(input, p: float, dim: int, maxnorm: float):
    if not isinstance(input, Tensor):
        raise TypeError(f"renorm(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm:g}")
    if input.ndim <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {_C_NAME.get(input.dtype.name, input.dtype.name)}")
    return (input,), {"p": float(p), "dim": _wrap_dim(dim, input.ndim), "maxnorm": float(maxnorm)}


_C_NAME = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long"}


@op(bind=_renorm_args, exposed=_EVERYWHERE, inplace=True)
def renorm(input, *, p, dim, maxnorm):
    """Each slice ``input.select(dim, i)`` whose ``p``-norm exceeds ``maxnorm`` scaled down to norm
    ``maxnorm`` (by ``maxnorm / (norm + 1e-7)``, as torch); the others unchanged."""
    others = tuple(d for d in range(input.ndim) if d != dim)
    magnitude = ew.abs(input) if input.dtype.is_complex else input  # a complex slice's norm is its |z|'s
    norm = linalg_vector_norm(magnitude, p, others, keepdim=True)
    factor = ew.where(ew.gt(norm, maxnorm), maxnorm / (norm + 1e-7), 1.0)
    return input * factor.to(input.dtype)


# -- gradient -----------------------------------------------------------------------------------

def _spacing_and_dims(input, spacing, dim):
    if dim is None:
        dims = list(range(input.ndim))
    elif isinstance(dim, numbers.Integral):
        dims = [_wrap_dim(int(dim), input.ndim)]
    else:
        dims = [_wrap_dim(d, input.ndim) for d in dim]
    if isinstance(spacing, (numbers.Number, Tensor)) and not (isinstance(spacing, Tensor) and spacing.ndim):
        steps = [spacing] * len(dims)
    else:
        steps = list(spacing)
        if len(steps) != len(dims) and dim is None:
            raise RuntimeError(
                "torch.gradient expected spacing to be unspecified, a scalar, or a list of length equal to "
                f"'self.dim() = {input.ndim}', since dim argument was not given, but got a list of length "
                f"{len(steps)}")
        if len(steps) != len(dims):
            raise RuntimeError(
                "torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim arguments "
                f"to have the same length, but got a spacing argument of length {len(steps)} and a dim argument "
                f"of length {len(dims)}.")
    return steps, dims


def _slice(x, d, start, stop):
    return x.narrow(d, start, stop - start)


def _along(v, d, ndim):
    """A 1-D tensor ``v`` shaped to broadcast along dim ``d`` of an ``ndim``-D tensor."""
    return v.reshape([-1 if i == d else 1 for i in range(ndim)])


def _uniform(x, d, h, edge_order):
    n = x.shape[d]
    inner = (_slice(x, d, 2, n) - _slice(x, d, 0, n - 2)) / (2 * h)
    if edge_order == 1:
        first = (_slice(x, d, 1, 2) - _slice(x, d, 0, 1)) / h
        last = (_slice(x, d, n - 1, n) - _slice(x, d, n - 2, n - 1)) / h
    else:
        first = (-1.5 * _slice(x, d, 0, 1) + 2 * _slice(x, d, 1, 2) - 0.5 * _slice(x, d, 2, 3)) / h
        last = (0.5 * _slice(x, d, n - 3, n - 2) - 2 * _slice(x, d, n - 2, n - 1)
                + 1.5 * _slice(x, d, n - 1, n)) / h
    return cat([first, inner, last], d)


def _coordinates(x, d, coords, edge_order):
    """numpy.gradient's (and torch's) second-order differences on uneven coordinates."""
    n = x.shape[d]
    if coords.ndim != 1 or coords.shape[0] != n:
        raise RuntimeError(f"torch.gradient expected each tensor to be on the same device as the input and the "
                           f"spacing tensor for dim {d} to be 1-D of size {n}, got shape {list(coords.shape)}")
    c = coords.to(x.dtype)
    dx = c[1:] - c[:-1]
    dx1, dx2 = _along(dx[:-1], d, x.ndim), _along(dx[1:], d, x.ndim)
    a = -dx2 / (dx1 * (dx1 + dx2))
    b = (dx2 - dx1) / (dx1 * dx2)
    cc = dx1 / (dx2 * (dx1 + dx2))
    inner = a * _slice(x, d, 0, n - 2) + b * _slice(x, d, 1, n - 1) + cc * _slice(x, d, 2, n)
    if edge_order == 1:
        first = (_slice(x, d, 1, 2) - _slice(x, d, 0, 1)) / dx[0]
        last = (_slice(x, d, n - 1, n) - _slice(x, d, n - 2, n - 1)) / dx[-1]
    else:
        h1, h2 = dx[0], dx[1]
        first = (-(2 * h1 + h2) / (h1 * (h1 + h2)) * _slice(x, d, 0, 1) + (h1 + h2) / (h1 * h2) * _slice(x, d, 1, 2)
                 - h1 / (h2 * (h1 + h2)) * _slice(x, d, 2, 3))
        h1, h2 = dx[-2], dx[-1]
        last = (h2 / (h1 * (h1 + h2)) * _slice(x, d, n - 3, n - 2) - (h2 + h1) / (h1 * h2) * _slice(x, d, n - 2, n - 1)
                + (2 * h2 + h1) / (h2 * (h1 + h2)) * _slice(x, d, n - 1, n))
    return cat([first, inner, last], d)


@public("plugtorch")
def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """The derivative of ``input`` along each of ``dim`` (all dims by default) estimated by central
    differences (one-sided at the edges, of order ``edge_order``), one tensor per dim.
    ``spacing``: a number (the sample distance), one per dim, or each dim's coordinates."""
    if not isinstance(input, Tensor):
        raise TypeError(f"gradient(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    steps, dims = _spacing_and_dims(input, spacing, dim)
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
    x = input if input.dtype.is_floating_point or input.dtype.is_complex else input.to(get_default_dtype())
    out = []
    for h, d in zip(steps, dims):
        if isinstance(h, Tensor) and h.ndim == 1:
            out.append(_coordinates(x, d, h, edge_order))
        else:
            out.append(_uniform(x, d, h.item() if isinstance(h, Tensor) else h, edge_order))
    return builtins.tuple(out)


__all__ = ["renorm", "gradient"]
