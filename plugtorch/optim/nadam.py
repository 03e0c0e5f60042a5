"""NAdam: Adam with Nesterov momentum, its momentum warmed up by a decaying schedule."""
from __future__ import annotations

from ..core.ops.creation import zeros_like
from ._pointwise import addcdiv_, addcmul_, lerp_, scalar_state
from .optimizer import Optimizer


class NAdam(Optimizer):
    r"""PyTorch's NAdam (Dozat, 2016), step for step:

    .. math::
        \mu_t &= \beta_1\bigl(1 - \tfrac12\, 0.96^{t\psi}\bigr), \quad
        \Pi_t = \textstyle\prod_{s \le t} \mu_s \\
        m &\leftarrow m + (1-\beta_1)(g - m), \quad v \leftarrow \beta_2 v + (1-\beta_2) g^2,
        \quad d = \sqrt{v/(1-\beta_2^t)} + \epsilon \\
        \theta &\leftarrow \theta - \gamma\,\frac{1-\mu_t}{1-\Pi_t}\,\frac{g}{d}
            - \gamma\,\frac{\mu_{t+1}}{1-\Pi_t\mu_{t+1}}\,\frac{m}{d}

    ``weight_decay`` adds :math:`\lambda\theta` to the gradient, or with
    ``decoupled_weight_decay=True`` scales :math:`\theta` by :math:`1-\gamma\lambda` (NAdamW).
    ``mu_product`` is kept rounded to the scalar dtype torch stores it in (see
    :func:`~plugtorch.optim._pointwise.scalar_state`).
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
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
        if not momentum_decay >= 0.0:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update(self, p, group):
        lr, weight_decay, momentum_decay = group["lr"], group["weight_decay"], group["momentum_decay"]
        beta1, beta2 = group["betas"]
        grad = -p.grad if group["maximize"] else p.grad
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["mu_product"] = 1.0
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
        state["step"] = step = int(state["step"]) + 1
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(p, alpha=weight_decay)

        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * momentum_decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * momentum_decay))
        # torch multiplies its float32 state by mu rounded to float32: round both, as it does
        state["mu_product"] = mu_product = scalar_state(float(state["mu_product"]) * scalar_state(mu))
        mu_product_next = mu_product * mu_next

        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        lerp_(exp_avg, grad, 1 - beta1)
        addcmul_(exp_avg_sq.mul_(beta2), grad, grad, value=1 - beta2)
        denom = exp_avg_sq.div(1 - beta2 ** step).sqrt().add_(group["eps"])
        addcdiv_(p, grad, denom, value=-lr * (1.0 - mu) / (1.0 - mu_product))
        addcdiv_(p, exp_avg, denom, value=-lr * mu_next / (1.0 - mu_product_next))
