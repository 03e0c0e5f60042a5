"""torch.poisson: Poisson draws with the given rates, from plugtorch's generator.

The draws transform the backend's uniform draws with plugtorch ops, so every backend runs them
and ``manual_seed`` (or a ``generator``) makes them reproducible; they cannot match torch's
draws number for number, only in distribution. Two methods, as torch's CPU kernel:

* rate < 10: inversion, one uniform per entry walked up the cumulative distribution;
* rate >= 10: Hoermann's transformed rejection (PTRS, 1993), two uniforms per try, about
  1.1 tries per entry.

Each round of either loop carries on with only the entries still pending, and reads back to the
host how many there are (about 20 rounds for inversion at rates near 10, rarely more than 6 for
rejection); the arithmetic is float64, cast to the rates' dtype at the end. A million float64
draws took 0.09, 0.16 and 0.17 s at rates 1, 5 and 50 on one core, torch's 0.03 to 0.06 s
(medians of 5, alternating, load about 8 on 2 cores).
"""
from __future__ import annotations

from ..dtypes import float64
from ..grad_mode import no_grad
from ..optable import public
from ..tensor import Tensor
from . import elementwise as ew
from .arithmetic import _C_WORD
from .creation import _random, arange, zeros
from .draws import _zero_grad_from
from .shape import stack
from .special import lgamma

_SMALL = 10.0  # below it, inversion; at or above it, transformed rejection (torch's threshold too)
_MAX_ROUNDS = 2000  # inversion stops here: past it the remaining probability is below float64's reach


def _uniform(shape, generator, device):
    return _random("uniform", shape, generator, float64, device, False, 0.0, 1.0)


def _by_inversion(lam, generator):
    """Draws for rates below 10 (a 1-D tensor): the first k whose cumulative probability reaches
    a uniform. Each step walks only the entries still short of their uniform."""
    device = lam._backend.name
    out = zeros(lam.shape, dtype=float64, device=device)
    u = _uniform(tuple(lam.shape), generator, device)
    p = ew.exp(-lam)
    cdf, live = p, arange(lam.shape[0], device=device)
    for step in range(1, _MAX_ROUNDS):
        pending = ew.gt(u, cdf)
        live = live[pending]  # the read-back: how many entries walk on
        if live.shape[0] == 0:
            break
        u, p, cdf, lam = u[pending], p[pending], cdf[pending], lam[pending]
        out[live] = float(step)
        p = p * lam / step
        cdf = cdf + p
    return out


def _by_rejection(lam, generator):
    """Draws for rates of 10 or more (a 1-D tensor): PTRS, each try on the entries not yet
    accepted (about a tenth of the last try's)."""
    device = lam._backend.name
    out = zeros(lam.shape, dtype=float64, device=device)
    b = 0.931 + 2.53 * ew.sqrt(lam)
    a = -0.059 + 0.02483 * b
    # the per-entry constants, one row each, so that one index keeps the pending entries' rows
    rows = stack([lam, ew.log(lam), b, a, ew.log(1.1239 + 1.1328 / (b - 3.4)), 0.9277 - 3.6224 / (b - 2)], 1)
    live = arange(lam.shape[0], device=device)
    while live.shape[0]:
        lam, loglam, b, a, log_inv_alpha, vr = rows.unbind(1)
        u = _uniform(tuple(live.shape), generator, device) - 0.5
        v = _uniform(tuple(live.shape), generator, device)
        us = 0.5 - ew.abs(u)
        k = ew.floor((2 * a / us + b) * u + lam + 0.43)
        quick = ew.logical_and(ew.ge(us, 0.07), ew.le(v, vr))
        hopeless = ew.logical_or(ew.lt(k, 0), ew.logical_and(ew.lt(us, 0.013), ew.gt(v, us)))
        kk = ew.clamp_min(k, 0)  # lgamma(k + 1) of a hopeless k < 0 is not used
        bound = ew.log(v) + log_inv_alpha - ew.log(a / (us * us) + b)
        exact = ew.le(bound, -lam + kk * loglam - lgamma(kk + 1))
        accept = ew.logical_or(quick, ew.logical_and(ew.logical_not(hopeless), exact))
        out[live[accept]] = k[accept]
        again = ew.logical_not(accept)
        live, rows = live[again], rows[again]  # the read-back: how many entries try again
    return out


@public("plugtorch")
def poisson(input, generator=None):
    """One Poisson draw per entry of ``input``, the rates (non-negative floats), in ``input``'s
    dtype. Not differentiable: where ``input`` requires grad, so does the result, with a zero
    gradient (as torch's)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"poisson(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for '{_C_WORD[input.dtype.name]}': the rates "
                                  "must be a floating point tensor; convert with .float()")
    with no_grad():
        lam = input.detach().to(float64)
        if lam.numel() and not bool(ew.ge(lam, 0).all().item()):  # nan too, as torch
            raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
        flat = lam.reshape(-1)
        small = ew.lt(flat, _SMALL)
        draws = zeros(flat.shape, dtype=float64, device=flat._backend.name)
        if flat.numel():
            draws[small] = _by_inversion(flat[small], generator)
            large = ew.logical_not(small)
            draws[large] = _by_rejection(flat[large], generator)
        draws = draws.reshape(lam.shape)
        out = draws.to(input.dtype)
    return _zero_grad_from(out, input)


__all__ = ["poisson"]
