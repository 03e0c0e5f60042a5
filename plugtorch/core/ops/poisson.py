"""torch.poisson: Poisson draws with the given rates, from plugtorch's generator.

The draws transform the backend's uniform draws with plugtorch ops, so every backend runs them
and ``manual_seed`` (or a ``generator``) makes them reproducible; they cannot match torch's
draws number for number, only in distribution. Two methods, as torch's CPU kernel:

* rate < 10: inversion, one uniform per entry walked up the cumulative distribution;
* rate >= 10: Hoermann's transformed rejection (PTRS, 1993), two uniforms per try, about
  1.1 tries per entry.

Each round of either loop reads back to the host whether any entry is still pending (a few
rounds for inversion at rates near 10, rarely more than 6 for rejection); entries are
otherwise computed together, in float64, and cast to the rates' dtype at the end.
"""
from __future__ import annotations

from ..dtypes import float64
from ..grad_mode import no_grad
from ..optable import public
from ..tensor import Tensor
from . import elementwise as ew
from .creation import _random, zeros
from .draws import _word, _zero_grad_from
from .special import lgamma

_SMALL = 10.0  # below it, inversion; at or above it, transformed rejection (torch's threshold too)
_MAX_ROUNDS = 2000  # inversion stops here: past it the remaining probability is below float64's reach


def _uniform(shape, generator, device):
    return _random("uniform", shape, generator, float64, device, False, 0.0, 1.0)


def _by_inversion(lam, generator):
    """Draws for rates below 10: the first k whose cumulative probability reaches a uniform."""
    u = _uniform(tuple(lam.shape), generator, lam._backend.name)
    p = ew.exp(-lam)
    cdf = p
    k = zeros(lam.shape, dtype=float64, device=lam._backend.name)
    pending = ew.gt(u, cdf)
    for step in range(1, _MAX_ROUNDS):
        if not bool(pending.any().item()):
            break
        p = p * lam / step
        k = k + pending.to(float64)
        cdf = cdf + p
        pending = ew.logical_and(pending, ew.gt(u, cdf))
    return k


def _by_rejection(lam, generator):
    """Draws for rates of 10 or more: PTRS, each entry retried until its candidate is accepted."""
    device = lam._backend.name
    slam, loglam = ew.sqrt(lam), ew.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    log_inv_alpha = ew.log(1.1239 + 1.1328 / (b - 3.4))
    vr = 0.9277 - 3.6224 / (b - 2)
    out = zeros(lam.shape, dtype=float64, device=device)
    pending = ew.ge(lam, 0)  # every entry
    while bool(pending.any().item()):
        u = _uniform(tuple(lam.shape), generator, device) - 0.5
        v = _uniform(tuple(lam.shape), generator, device)
        us = 0.5 - ew.abs(u)
        k = ew.floor((2 * a / us + b) * u + lam + 0.43)
        quick = ew.logical_and(ew.ge(us, 0.07), ew.le(v, vr))
        hopeless = ew.logical_or(ew.lt(k, 0), ew.logical_and(ew.lt(us, 0.013), ew.gt(v, us)))
        kk = ew.clamp_min(k, 0)  # lgamma(k + 1) of a hopeless k < 0 is not used
        bound = ew.log(v) + log_inv_alpha - ew.log(a / (us * us) + b)
        exact = ew.le(bound, -lam + kk * loglam - lgamma(kk + 1))
        accept = ew.logical_and(pending, ew.logical_or(quick, ew.logical_and(ew.logical_not(hopeless), exact)))
        out = ew.where(accept, k, out)
        pending = ew.logical_and(pending, ew.logical_not(accept))
    return out


@public("plugtorch")
def poisson(input, generator=None):
    """One Poisson draw per entry of ``input``, the rates (non-negative floats), in ``input``'s
    dtype. Not differentiable: where ``input`` requires grad, so does the result, with a zero
    gradient (as torch's)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"poisson(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for '{_word(input.dtype)}': the rates must be a "
                                  "floating point tensor; convert with .float()")
    with no_grad():
        lam = input.detach().to(float64)
        if lam.numel() and not bool(ew.ge(lam, 0).all().item()):  # nan too, as torch
            raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
        small = ew.lt(lam, _SMALL)
        draws = zeros(lam.shape, dtype=float64, device=lam._backend.name)
        if lam.numel() and bool(small.any().item()):
            draws = ew.where(small, _by_inversion(ew.where(small, lam, 0.0), generator), draws)
        if lam.numel() and not bool(small.all().item()):
            draws = ew.where(small, draws, _by_rejection(ew.where(small, _SMALL, lam), generator))
        out = draws.to(input.dtype)
    return _zero_grad_from(out, input)


__all__ = ["poisson"]
