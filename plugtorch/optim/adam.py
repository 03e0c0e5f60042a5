"""Adam and AdamW: moment estimates with bias correction, L2 or decoupled weight decay, AMSGrad."""
from __future__ import annotations

from ..compiler import capturing, dynamic_attrs, guard, not_capturable
from ..core.grad_mode import no_grad
from ..core.ops.creation import zeros_like
from ..core.ops.optimizer_updates import _fused_adam_, adam_attrs, adam_step_
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
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")

    _fused = True  # fused=True is served: by _fused_adam_, whose values are the loop's

    def step(self, closure=None):
        """Update every parameter that has a gradient, under no_grad: the parameters of a group
        in one ``_fused_adam_`` call where they can share one (``foreach``/``fused`` not False,
        every parameter past its first step, at one step count, of one dtype and backend), else
        one ``adam_step_`` each. The values are the same either way."""
        loss = self._evaluate(closure)
        if capturing():
            guard(self._step_lags)
        with no_grad():
            for group in self.param_groups:
                params = [p for p in group["params"] if p.grad is not None]
                if not (params and self._multi_tensor(params, group)):
                    for p in params:
                        self._update(p, group)
        return loss

    def _multi_tensor(self, params, group) -> bool:
        """Update ``params`` with one ``_fused_adam_`` call if they qualify; say whether it ran."""
        if group["foreach"] is False or group["fused"] is False or group["differentiable"]:
            return False
        dtype, backend, amsgrad = params[0].dtype, params[0]._backend, group["amsgrad"]
        # without a kernel the op is the loop anyway, and its many calls would stop a capture
        if not dtype.is_floating_point or "_fused_adam_" not in backend.kernels:
            return False
        states: list[dict] = []
        step = None
        for p in params:
            state = self.state.get(p)
            if not state:
                return False  # a first step makes the state (and a capture of it retries)
            if step is None:
                step = int(state["step"])
            grad = p.grad
            if int(state["step"]) != step or p.dtype is not dtype or p._backend is not backend \
                    or grad.dtype is not dtype or grad._backend is not backend \
                    or (amsgrad and "max_exp_avg_sq" not in state):
                return False
            states.append(state)
        with dynamic_attrs("_fused_adam_", lambda: self._fused_attrs(states, group)):
            _fused_adam_(params, [p.grad for p in params], [s["exp_avg"] for s in states],
                         [s["exp_avg_sq"] for s in states],
                         [s["max_exp_avg_sq"] for s in states] if amsgrad else None,
                         **self._attrs_of(self._count(states), group))
        return True

    @staticmethod
    def _count(states) -> int:
        """Count this step in every state; the new step number."""
        for state in states:
            state["step"] = step = int(state["step"]) + 1
        return step

    def _fused_attrs(self, states, group) -> dict:
        """What a replay of ``_fused_adam_`` runs with: the step counted, the group reread."""
        return {**self._attrs_of(self._count(states), group), "amsgrad": bool(group["amsgrad"])}

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

    def _captured_options(self, group) -> tuple:
        # which update a step calls, and with how many lists
        return (group["foreach"] is False or group["fused"] is False, bool(group["amsgrad"]))

    def _step_lags(self) -> int | tuple:
        """Each parameter's step count less the first's. Whether the parameters a step updates are
        at one count decides between one ``_fused_adam_`` call (one count for all) and one call
        each; a parameter frozen for a while lags behind. A capture replays only while this is
        as it was: a fused replay would give a lagging parameter's neighbours its count. Read
        from the state table's values, as ``_captured_state`` is (hashing tensors costs a call)."""
        steps = [s.get("step", 0) for s in self.state.values()]
        if not steps or steps.count(steps[0]) == len(steps):
            return len(steps)  # all at one count, the common case: how many is the whole pattern
        return tuple(int(x) - int(steps[0]) for x in steps)

    @staticmethod
    def _attrs(state, group) -> dict:
        """Count this step and return the update's attrs from the live group."""
        state["step"] = step = int(state["step"]) + 1
        return Adam._attrs_of(step, group)

    @staticmethod
    def _attrs_of(step, group) -> dict:
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
