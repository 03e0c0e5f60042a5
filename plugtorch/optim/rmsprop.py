"""RMSprop: divide by a running root-mean-square of gradients; optional centring and momentum."""
from __future__ import annotations

from ..core.ops.creation import zeros_like
from ._pointwise import addcdiv_, addcmul_, lerp_
from .optimizer import Optimizer


class RMSprop(Optimizer):
    r"""PyTorch's RMSprop, step for step:

    .. math::
        v &\leftarrow \alpha v + (1-\alpha) g^2, \quad
        \bar g \leftarrow \bar g + (1-\alpha)(g - \bar g) \text{ (centred)} \\
        d &= \sqrt{v - \bar g^2} + \epsilon \text{ (centred) or } \sqrt{v} + \epsilon \\
        \theta &\leftarrow \theta - \gamma\, b, \quad b \leftarrow \mu b + g/d
        \quad (\text{or } \theta \leftarrow \theta - \gamma g/d \text{ without momentum})
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        if not lr >= 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not eps >= 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not momentum >= 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not weight_decay >= 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not alpha >= 0.0:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update(self, p, group):
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        momentum, weight_decay = group["momentum"], group["weight_decay"]
        grad = -p.grad if group["maximize"] else p.grad
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["square_avg"] = zeros_like(p)
            if momentum > 0:
                state["momentum_buffer"] = zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = zeros_like(p)
        state["step"] = int(state["step"]) + 1

        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        square_avg = state["square_avg"]
        addcmul_(square_avg.mul_(alpha), grad, grad, value=1 - alpha)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            lerp_(grad_avg, grad, 1 - alpha)
            avg = addcmul_(square_avg.clone(), grad_avg, grad_avg, value=-1).sqrt()
        else:
            avg = square_avg.sqrt()
        avg = avg.add_(eps)
        if momentum > 0:
            buf = state["momentum_buffer"]
            addcdiv_(buf.mul_(momentum), grad, avg)
            p.add_(buf, alpha=-lr)
        else:
            addcdiv_(p, grad, avg, value=-lr)
