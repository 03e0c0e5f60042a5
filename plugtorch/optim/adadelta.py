"""Adadelta: step sizes from running averages of squared gradients and squared updates."""
from __future__ import annotations

from ..core.ops.creation import zeros_like
from ._pointwise import addcmul_
from .optimizer import Optimizer


class Adadelta(Optimizer):
    r"""PyTorch's Adadelta (Zeiler, 2012), step for step:

    .. math::
        g &\leftarrow \pm\nabla + \lambda\theta, \quad
        v \leftarrow \rho v + (1-\rho) g^2 \\
        \Delta &= \frac{\sqrt{u + \epsilon}}{\sqrt{v + \epsilon}}\, g, \quad
        u \leftarrow \rho u + (1-\rho) \Delta^2, \quad
        \theta \leftarrow \theta - \gamma \Delta
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        if not lr >= 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not eps >= 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not weight_decay >= 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update(self, p, group):
        rho, eps, weight_decay = group["rho"], group["eps"], group["weight_decay"]
        grad = -p.grad if group["maximize"] else p.grad
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["square_avg"] = zeros_like(p)
            state["acc_delta"] = zeros_like(p)
        state["step"] = int(state["step"]) + 1
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        addcmul_(square_avg.mul_(rho), grad, grad, value=1 - rho)
        std = square_avg.add(eps).sqrt_()
        delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
        addcmul_(acc_delta.mul_(rho), delta, delta, value=1 - rho)
        p.add_(delta, alpha=-group["lr"])
