"""Adam and AdamW: moment estimates with bias correction, L2 or decoupled weight decay, AMSGrad."""
from __future__ import annotations

from ..compiler import dynamic_attrs, not_capturable
from ..core.ops.creation import zeros_like
from ..core.ops.optimizer_updates import adam_attrs, adam_step_
from .optimizer import Optimizer


class Adam(Optimizer):
    r"""PyTorch's Adam, step for step (its single-tensor CPU path):

    .. math::
        g &\leftarrow \pm\nabla\ (+\lambda\theta \text{, or } \theta \leftarrow \theta(1-\gamma\lambda)
             \text{ when decoupled}) \\
        m &\leftarrow m + (1-\beta_1)(g - m), \quad v \leftarrow \beta_2 v + (1-\beta_2) g^2 \\
        \theta &\leftarrow \theta - \frac{\gamma}{1-\beta_1^t}\,
             \frac{m}{\sqrt{\hat v}/\sqrt{1-\beta_2^t} + \epsilon}
             \quad (\hat v = \max_{s \le t} v_s \text{ with AMSGrad, else } v)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
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
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _update(self, p, group):
        state = self.state[p]
        if not state:
            not_capturable("Adam makes its moment buffers in this call (a replay would make them afresh)",
                           retry=True)
            state["step"] = 0
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = zeros_like(p)
        # one registered op per parameter: a backend may fuse it (core/ops/optimizer_updates.py);
        # under plugtorch.compile a replay recounts the step and rereads the group (a scheduler's lr)
        with dynamic_attrs("adam_step_", lambda: self._attrs(state, group)):
            adam_step_(p, p.grad, state["exp_avg"], state["exp_avg_sq"], state.get("max_exp_avg_sq"),
                       **self._attrs(state, group))

    _capturable_step = True  # plugtorch.compile can replay its updates (see _attrs)

    @staticmethod
    def _attrs(state, group) -> dict:
        """Count this step and return the update's attrs from the live group."""
        state["step"] = step = int(state["step"]) + 1
        beta1, beta2 = group["betas"]
        return adam_attrs(group["lr"], beta1, beta2, group["eps"], group["weight_decay"], step,
                          group["maximize"], group["decoupled_weight_decay"])


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), default ``weight_decay=1e-2``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
