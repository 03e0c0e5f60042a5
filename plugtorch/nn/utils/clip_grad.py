"""Gradient clipping, in place on ``.grad`` (call between ``backward()`` and ``step()``)."""
from __future__ import annotations

import math

import plugtorch

from ...core.grad_mode import no_grad
from ...core.tensor import Tensor


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None):
    """Scale all gradients together so their joint ``norm_type``-norm is at most ``max_norm``.

    Returns the total norm before clipping (a 0-d tensor).
    """
    grads = _grads(parameters)
    norm_type = float(norm_type)
    if not grads:
        return plugtorch.tensor(0.0)
    with no_grad():
        if math.isinf(norm_type):
            norms = [g.abs().amax() for g in grads]
            total = norms[0] if len(norms) == 1 else plugtorch.stack(norms).amax()
        else:
            sums = [(g.abs() ** norm_type).sum() for g in grads]
            total = plugtorch.stack(sums).sum() ** (1.0 / norm_type)
        if error_if_nonfinite and not bool(plugtorch.isfinite(total)):
            raise RuntimeError(
                f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                "so it cannot be clipped. To disable this error and scale the gradients by the "
                "non-finite norm anyway, set `error_if_nonfinite=False`"
            )
        coef = plugtorch.clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))
    return total


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient element into [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)
