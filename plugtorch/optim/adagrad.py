"""Adagrad: per-coordinate steps shrinking with the sum of all squared gradients so far."""
from __future__ import annotations

from ..core.ops.creation import full_like
from ._pointwise import addcdiv_, addcmul_
from .optimizer import Optimizer


class Adagrad(Optimizer):
    r"""PyTorch's Adagrad (Duchi et al., 2011), step for step:

    .. math::
        g &\leftarrow \pm\nabla + \lambda\theta, \quad
        \tilde\gamma = \frac{\gamma}{1 + (t-1)\eta}, \quad s \leftarrow s + g^2, \quad
        \theta \leftarrow \theta - \tilde\gamma\, \frac{g}{\sqrt{s} + \epsilon}

    As in torch, the state (``step`` and ``sum``, filled with ``initial_accumulator_value``)
    exists for every parameter from construction on, not from its first gradient, and the
    accumulator starts from the constructor's value even where a group sets its own.
    """

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        if not lr >= 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not lr_decay >= 0.0:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not weight_decay >= 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not initial_accumulator_value >= 0.0:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not eps >= 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p)

    def _init_state(self, p) -> dict:
        state = self.state[p]
        if not state:  # at construction, or for a group added later (at its first step)
            state["step"] = 0
            state["sum"] = full_like(p, self.defaults["initial_accumulator_value"])
        return state

    def _update(self, p, group):
        weight_decay, eps = group["weight_decay"], group["eps"]
        grad = -p.grad if group["maximize"] else p.grad
        state = self._init_state(p)
        state["step"] = step = int(state["step"]) + 1
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        state_sum = addcmul_(state["sum"], grad, grad, value=1)
        std = state_sum.sqrt().add_(eps)
        addcdiv_(p, grad, std, value=-clr)
