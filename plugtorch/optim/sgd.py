"""Stochastic gradient descent, with momentum, dampening, Nesterov momentum and weight decay."""
from __future__ import annotations

import functools

from ..compiler import dynamic_attrs, not_capturable
from ..core.grad_mode import no_grad
from ..core.ops.creation import zeros_like
from ..core.ops.optimizer_updates import _fused_sgd_, sgd_attrs, sgd_step_
from .optimizer import Optimizer


class SGD(Optimizer):
    r"""PyTorch's SGD, step for step:

    .. math::
        g &\leftarrow \pm\nabla + \lambda\theta \\
        b &\leftarrow \mu b + (1-\tau) g \quad (b = g \text{ on the first step}) \\
        g &\leftarrow g + \mu b \text{ (Nesterov) or } b \\
        \theta &\leftarrow \theta - \gamma g
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 *, maximize=False, foreach=None, differentiable=False, fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")

    _fused = True  # fused=True is served: by _fused_sgd_, whose values are the loop's
    _capturable_step = True  # plugtorch.compile can replay its updates (attrs refreshed per step)

    def step(self, closure=None):
        loss = self._evaluate(closure)
        with no_grad():
            for group in self.param_groups:
                momentum = group["momentum"]
                params = [p for p in group["params"] if p.grad is not None]
                if params and self._multi_tensor(params, group):
                    continue
                for p in params:
                    buf, first = None, False
                    if momentum != 0:
                        state = self.state[p]
                        buf = state.get("momentum_buffer")
                        if buf is None:  # torch's buffer starts as a copy of the first step's gradient
                            not_capturable("SGD makes a momentum buffer in this call (a replay would make it "
                                           "afresh every time)", retry=True)
                            buf = state["momentum_buffer"] = zeros_like(p)
                            first = True
                    # one registered op per parameter: a backend may fuse it (core/ops/optimizer_updates.py);
                    # under plugtorch.compile a replay rereads the group (a scheduler's lr); the buffer
                    # exists by then (the warm-up call made it), so it is never a first step
                    with dynamic_attrs("sgd_step_", functools.partial(self._attrs, group, False)):
                        sgd_step_(p, p.grad, buf, **self._attrs(group, first))
        return loss

    def _multi_tensor(self, params, group) -> bool:
        """Update ``params`` with one ``_fused_sgd_`` call if they qualify (``foreach``/``fused``
        not False, one floating dtype and backend with a kernel, every momentum buffer made);
        say whether it ran. The values are the per-parameter loop's."""
        if group["foreach"] is False or group["fused"] is False or group["differentiable"]:
            return False
        dtype, backend = params[0].dtype, params[0]._backend
        if not dtype.is_floating_point or "_fused_sgd_" not in backend.kernels:
            return False
        for p in params:
            grad = p.grad
            if p.dtype is not dtype or p._backend is not backend or grad.dtype is not dtype \
                    or grad._backend is not backend:
                return False
        buffers = None
        if group["momentum"] != 0:
            buffers = [self.state[p].get("momentum_buffer") for p in params]
            if any(b is None for b in buffers):
                return False  # a first step makes the buffers (and a capture of it retries)
        with dynamic_attrs("_fused_sgd_", functools.partial(self._fused_attrs, group, buffers is not None)):
            _fused_sgd_(params, [p.grad for p in params], buffers, **self._attrs(group, False))
        return True

    @classmethod
    def _fused_attrs(cls, group, momentum_buffers: bool) -> dict:
        return {**cls._attrs(group, False), "momentum_buffers": momentum_buffers}

    def _captured_options(self, group) -> tuple:
        # with momentum a step reads and writes a buffer; which update a step calls
        return (group["momentum"] != 0, group["foreach"] is False or group["fused"] is False)

    @staticmethod
    def _attrs(group, first_step: bool) -> dict:
        """The update's attrs from the live group."""
        return sgd_attrs(group["lr"], group["momentum"], group["dampening"], group["weight_decay"],
                         group["nesterov"], group["maximize"], first_step)
