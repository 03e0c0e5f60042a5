"""Adamax: Adam with the infinity norm of past gradients in place of their root mean square."""
from __future__ import annotations

from ..core.ops.creation import zeros_like
from ._pointwise import addcdiv_, lerp_
from .optimizer import Optimizer


class Adamax(Optimizer):
    r"""PyTorch's Adamax (Kingma & Ba, 2014, section 7), step for step:

    .. math::
        g &\leftarrow \pm\nabla + \lambda\theta, \quad
        m \leftarrow m + (1-\beta_1)(g - m), \quad
        u \leftarrow \max(\beta_2 u,\ |g| + \epsilon) \\
        \theta &\leftarrow \theta - \frac{\gamma}{1-\beta_1^t}\, \frac{m}{u}
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        if not lr >= 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not eps >= 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not weight_decay >= 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _update(self, p, group):
        beta1, beta2 = group["betas"]
        weight_decay = group["weight_decay"]
        grad = -p.grad if group["maximize"] else p.grad
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["exp_avg"] = zeros_like(p)
            state["exp_inf"] = zeros_like(p)
        state["step"] = step = int(state["step"]) + 1
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        lerp_(exp_avg, grad, 1 - beta1)
        exp_inf.mul_(beta2).maximum_(grad.abs().add_(group["eps"]))
        clr = group["lr"] / (1 - beta1 ** step)
        addcdiv_(p, exp_avg, exp_inf, value=-clr)
