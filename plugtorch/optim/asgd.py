"""ASGD: SGD with a decaying step size and a running (Polyak) average of the iterates."""
from __future__ import annotations

from ..core.ops.creation import zeros_like
from ._pointwise import scalar_state
from .optimizer import Optimizer


class ASGD(Optimizer):
    r"""PyTorch's averaged SGD (Polyak & Juditsky, 1992), step for step:

    .. math::
        \theta &\leftarrow \theta(1 - \lambda\eta_t) - \eta_t g, \quad
        \bar\theta \leftarrow \bar\theta + \mu_t(\theta - \bar\theta)
            \ (\bar\theta \leftarrow \theta \text{ while } \mu_t = 1) \\
        \eta_{t+1} &= \frac{\gamma}{(1 + \lambda\gamma t)^\alpha}, \quad
        \mu_{t+1} = \frac{1}{\max(1,\ t - t_0)}

    ``lambd`` is the decay term, ``weight_decay`` adds :math:`\lambda_{wd}\theta` to the
    gradient. The average lives in ``state["ax"]``; ``eta`` and ``mu`` are kept rounded as
    torch stores them (see :func:`~plugtorch.optim._pointwise.scalar_state`).
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        if not lr >= 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not weight_decay >= 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _update(self, p, group):
        lr, lambd = group["lr"], group["lambd"]
        grad = -p.grad if group["maximize"] else p.grad
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["eta"] = scalar_state(lr)
            state["mu"] = 1.0
            state["ax"] = zeros_like(p)
        state["step"] = step = int(state["step"]) + 1
        if group["weight_decay"] != 0:
            grad = grad.add(p, alpha=group["weight_decay"])
        eta, mu, ax = float(state["eta"]), float(state["mu"]), state["ax"]
        p.mul_(1 - lambd * eta)
        p.add_(grad, alpha=-eta)
        if mu != 1:
            ax.add_(p.sub(ax).mul_(mu))
        else:
            ax.copy_(p)
        state["eta"] = scalar_state(lr / ((1 + lambd * lr * step) ** group["alpha"]))
        state["mu"] = scalar_state(1 / max(1, step - group["t0"]))
