"""Muon: momentum SGD for 2-D weights whose update is orthogonalised by Newton-Schulz steps."""
from __future__ import annotations

import math

from ..core.dtypes import float32, float64
from ..core.ops.creation import zeros_like
from ..core.ops.elementwise import where
from ._pointwise import lerp, lerp_
from .optimizer import Optimizer

# Keller Jordan's quintic coefficients and defaults, as torch.optim.Muon uses them
EPS = 1e-7
DEFAULT_A, DEFAULT_B, DEFAULT_C = 3.4445, -4.7750, 2.0315
DEFAULT_NS_STEPS = 5


def _round_to_bfloat16(x):
    """The nearest bfloat16 value (8 significant bits, ties to even) of each element of a float32
    or float64 ``x``, in x's dtype: Veltkamp's split keeps the top 8 bits of the significand. plugtorch has no bfloat16
    dtype; rounding after every operation makes float32 arithmetic give what torch's bfloat16
    tensors give (they compute in float32 and round each result)."""
    c = 2.0 ** (24 - 8) + 1 if x.dtype == float32 else 2.0 ** (53 - 8) + 1
    t = x * c
    return t.sub_(t - x)


def _bfloat16_value(v: float) -> float:
    """The bfloat16 nearest to a Python float (ties to even)."""
    mantissa, exponent = math.frexp(v)
    return math.ldexp(round(math.ldexp(mantissa, 8)), exponent - 8)


def _zeropower_via_newtonschulz(grad, ns_coefficients, ns_steps: int, eps: float):
    """Approximately orthogonalise ``grad`` (``U S V^T`` -> about ``U V^T``) with ``ns_steps``
    quintic Newton-Schulz iterations, in bfloat16 arithmetic as torch does."""
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if len(grad.shape) != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    # Round once from float64 (exact for float32 input, and no overflow in the split).
    x = _round_to_bfloat16(grad.to(float64)).to(float32)
    tall = grad.shape[0] > grad.shape[1]
    if tall:
        x = x.T
    norm = (x * x).sum().sqrt()
    # an overflowing norm stays inf (the split would make it nan), so x becomes 0 as in torch
    norm = where(norm.isfinite(), _round_to_bfloat16(norm), norm).clamp(min=_bfloat16_value(eps))
    x = _round_to_bfloat16(x / norm)  # spectral norm now at most 1
    for _ in range(ns_steps):
        gram = _round_to_bfloat16(x @ x.T)
        update = _round_to_bfloat16(gram * b + (gram @ gram) * c)
        x = _round_to_bfloat16(x * a + update @ x)
    return x.T if tall else x


def _adjust_lr(lr: float, adjust_lr_fn, param_shape) -> float:
    """Scale the step so orthogonalised updates of differently shaped matrices have a
    comparable RMS: Keller Jordan's ``sqrt(max(1, A/B))`` ("original", the default) or
    Moonshot's ``0.2 sqrt(max(A, B))`` ("match_rms_adamw")."""
    rows, cols = param_shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr


class Muon(Optimizer):
    r"""PyTorch's Muon, step for step:

    .. math::
        B &\leftarrow \mu B + (1-\mu) g, \quad
        \tilde B = g + \mu (B - g) \text{ (Nesterov) or } B, \quad
        O = \mathrm{NS}^{(a,b,c)}_k(\tilde B) \\
        \theta &\leftarrow \theta(1 - \gamma\lambda) - \mathrm{AdjustLR}(\gamma)\, O

    Only for 2-D parameters (hidden-layer weights); optimise biases and embeddings with a
    standard optimizer such as AdamW. The Newton-Schulz iteration runs in bfloat16 as in
    torch, emulated by rounding float32 results to bfloat16 (see ``_round_to_bfloat16``):
    the update agrees with torch's to bfloat16 precision (a matrix product may round the
    other way in an element or two, since it sums in another order).
    """

    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=(DEFAULT_A, DEFAULT_B, DEFAULT_C), eps=EPS,
                 ns_steps=DEFAULT_NS_STEPS, adjust_lr_fn=None):
        if not lr >= 0.0:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not momentum >= 0.0:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not weight_decay >= 0.0:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps,
                        adjust_lr_fn=adjust_lr_fn)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError("Muon only supports 2D parameters whereas we found a "
                                     f"parameter with size: {p.size()}")

    def _update(self, p, group):
        lr, momentum = group["lr"], group["momentum"]
        grad = p.grad
        if grad.ndim != 2:
            raise ValueError("Param gradient must be a 2D matrix")
        state = self.state[p]
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = zeros_like(grad)
        buf = lerp_(state["momentum_buffer"], grad, 1 - momentum)
        update = lerp(grad, buf, momentum) if group["nesterov"] else buf
        update = _zeropower_via_newtonschulz(update, group["ns_coefficients"], group["ns_steps"],
                                             group["eps"])
        p.mul_(1 - lr * group["weight_decay"])
        p.add_(update, alpha=-_adjust_lr(lr, group["adjust_lr_fn"], p.shape))
