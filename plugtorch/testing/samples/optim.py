"""Samples for the optimizer-update ops: torch's own update (``torch.optim.adam.adam``, the
single-tensor path) is the reference, and the kit compares every mutated tensor with torch's."""
from __future__ import annotations

import importlib

from ._common import Sample, empty, is_torch, scalar

_DEFAULTS = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, maximize=False,
                 decoupled_weight_decay=False)


def _adam(step=3, **options):
    opts = {**_DEFAULTS, **options}

    def call(m, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq=None):
        with m.no_grad():
            if is_torch(m):
                adam = importlib.import_module("torch.optim.adam").adam
                adam([param], [grad], [exp_avg], [exp_avg_sq], [] if max_exp_avg_sq is None else [max_exp_avg_sq],
                     [m.tensor(float(step - 1))], foreach=False, decoupled_weight_decay=opts["decoupled_weight_decay"],
                     amsgrad=max_exp_avg_sq is not None, beta1=opts["beta1"], beta2=opts["beta2"], lr=opts["lr"],
                     weight_decay=opts["weight_decay"], eps=opts["eps"], maximize=opts["maximize"])
                return param
            from plugtorch.core.ops.optimizer_updates import adam_step_
            return adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step=step, **opts)
    return call


def _adam_step_(g):
    def state(*shape):
        return g.randn(*shape), g.randn(*shape), g.randn(*shape) * 0.1, g.positive(*shape) * 0.01

    return [
        Sample(state(4, 3), call=_adam(), mutates=(0, 2, 3), grad=False, desc="Adam, step 3"),
        Sample(state(5), call=_adam(step=1), mutates=(0, 2, 3), grad=False, desc="the first step"),
        Sample(state(2, 3), call=_adam(maximize=True), mutates=(0, 2, 3), grad=False, desc="maximize"),
        Sample(state(2, 3), call=_adam(weight_decay=0.1), mutates=(0, 2, 3), grad=False,
               desc="L2 weight decay on the gradient"),
        Sample(state(2, 3), call=_adam(weight_decay=0.1, decoupled_weight_decay=True), mutates=(0, 2, 3),
               grad=False, desc="decoupled weight decay (AdamW)"),
        Sample((*state(3, 2), g.positive(3, 2) * 0.02), call=_adam(step=7), mutates=(0, 2, 3, 4), grad=False,
               desc="AMSGrad keeps the running maximum"),
        Sample(state(6), call=_adam(beta1=0.2), mutates=(0, 2, 3), grad=False,
               desc="beta1 below 0.5: lerp's other formula"),
        Sample((scalar(0.5), scalar(-1.0), scalar(0.1), scalar(0.02)), call=_adam(), mutates=(0, 2, 3), grad=False,
               desc="0-d parameter"),
        Sample((empty(0, 3), empty(0, 3), empty(0, 3), empty(0, 3)), call=_adam(), mutates=(0, 2, 3), grad=False,
               desc="empty parameter"),
        Sample((g.randn(3), g.randn(2), g.randn(3), g.positive(3)), call=_adam(), raises=RuntimeError,
               desc="a gradient of another shape"),
    ]


SAMPLES = {"adam_step_": _adam_step_}
