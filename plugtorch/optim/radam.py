"""RAdam: Adam whose adaptive step is switched on only once its variance estimate is reliable."""
from __future__ import annotations

from ..core.ops.creation import zeros_like
from ._pointwise import addcmul_, lerp_
from .optimizer import Optimizer


class RAdam(Optimizer):
    r"""PyTorch's RAdam (Liu et al., 2019), step for step:

    .. math::
        m &\leftarrow m + (1-\beta_1)(g - m), \quad v \leftarrow \beta_2 v + (1-\beta_2) g^2,
        \quad \hat m = m / (1-\beta_1^t) \\
        \rho_\infty &= \tfrac{2}{1-\beta_2} - 1, \quad
        \rho_t = \rho_\infty - \frac{2t\beta_2^t}{1-\beta_2^t} \\
        \theta &\leftarrow \theta - \gamma\,\hat m\, r_t \frac{\sqrt{1-\beta_2^t}}{\sqrt v + \epsilon}
            \text{ if } \rho_t > 5, \text{ else } \theta - \gamma\,\hat m, \quad
        r_t = \sqrt{\frac{(\rho_t-4)(\rho_t-2)\rho_\infty}{(\rho_\infty-4)(\rho_\infty-2)\rho_t}}

    ``weight_decay`` adds :math:`\lambda\theta` to the gradient, or with
    ``decoupled_weight_decay=True`` scales :math:`\theta` by :math:`1-\gamma\lambda` (RAdamW).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
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
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _update(self, p, group):
        lr, weight_decay = group["lr"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        grad = -p.grad if group["maximize"] else p.grad
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
        state["step"] = step = int(state["step"]) + 1
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(p, alpha=weight_decay)

        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        lerp_(exp_avg, grad, 1 - beta1)
        addcmul_(exp_avg_sq.mul_(beta2), grad, grad, value=1 - beta2)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        corrected = exp_avg / bias_correction1
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                    / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive = (bias_correction2 ** 0.5) / exp_avg_sq.sqrt().add_(group["eps"])
            p.add_((corrected * lr).mul_(adaptive).mul_(rect), alpha=-1.0)
        else:
            p.add_(corrected * lr, alpha=-1.0)
