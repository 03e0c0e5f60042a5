"""Samples for the optimizer-update ops: torch's own updates (``torch.optim.adam.adam`` and
``torch.optim.sgd.sgd``, the single-tensor paths) are the reference, and the kit compares every
mutated tensor with torch's."""
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


def _fused_adam(n, amsgrad=False, step=3, **options):
    opts = {**_DEFAULTS, **options}

    def call(m, *tensors):
        lists = [list(tensors[k * n:(k + 1) * n]) for k in range(5 if amsgrad else 4)]
        with m.no_grad():
            if is_torch(m):
                adam = importlib.import_module("torch.optim.adam").adam
                adam(*lists[:4], lists[4] if amsgrad else [], [m.tensor(float(step - 1)) for _ in range(n)],
                     foreach=False, amsgrad=amsgrad, **{k: v for k, v in opts.items()})
            else:
                from plugtorch.core.ops.optimizer_updates import _fused_adam_
                _fused_adam_(*lists[:4], lists[4] if amsgrad else None, step=step, **opts)
            return tensors[0]
    return call


def _fused_adam_samples(g):
    shapes = [(4, 3), (5,), (), (0, 2)]

    def lists(*extra):
        def one(make):
            return [make(*s) if s else scalar(float(make(1)[0])) for s in shapes]
        return (*one(g.randn), *one(g.randn), *one(lambda *s: g.randn(*s) * 0.1),
                *one(lambda *s: g.positive(*s) * 0.01), *extra)
    n, every = len(shapes), range(len(shapes))
    written = (*every, *(2 * n + i for i in every), *(3 * n + i for i in every))
    return [
        Sample(lists(), call=_fused_adam(n), mutates=written, grad=False, desc="four parameters, 2-d, 1-d, 0-d, empty"),
        Sample(lists(), call=_fused_adam(n, weight_decay=0.1, decoupled_weight_decay=True, step=1),
               mutates=written, grad=False, desc="AdamW's first step"),
        Sample(lists(*(g.positive(*s) * 0.02 if s else scalar(0.02) for s in shapes)),
               call=_fused_adam(n, amsgrad=True, maximize=True, weight_decay=0.1), grad=False,
               mutates=(*written, *(4 * n + i for i in every)), desc="AMSGrad, maximize, L2 weight decay"),
    ]


_SGD_DEFAULTS = dict(lr=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False)


def _sgd(first_step=False, **options):
    opts = {**_SGD_DEFAULTS, **options}

    def call(m, param, grad, momentum_buffer=None):
        with m.no_grad():
            if is_torch(m):
                buffers = [None if first_step or momentum_buffer is None else momentum_buffer]
                importlib.import_module("torch.optim.sgd").sgd([param], [grad], buffers, foreach=False, **opts)
                if first_step and momentum_buffer is not None:  # torch made a new buffer; ours is given
                    momentum_buffer.copy_(buffers[0])
                return param
            from plugtorch.core.ops.optimizer_updates import sgd_step_
            return sgd_step_(param, grad, momentum_buffer, first_step=first_step, **opts)
    return call


def _sgd_step_(g):
    return [
        Sample((g.randn(4, 3), g.randn(4, 3)), call=_sgd(), mutates=(0,), grad=False, desc="plain SGD"),
        Sample((g.randn(5), g.randn(5), g.randn(5)), call=_sgd(momentum=0.9), mutates=(0, 2), grad=False,
               desc="momentum"),
        Sample((g.randn(5), g.randn(5), g.randn(5)), call=_sgd(first_step=True, momentum=0.9), mutates=(0, 2),
               grad=False, desc="the first step sets the buffer to the gradient"),
        Sample((g.randn(2, 3), g.randn(2, 3), g.randn(2, 3)), call=_sgd(momentum=0.8, dampening=0.3,
                                                                       weight_decay=0.01),
               mutates=(0, 2), grad=False, desc="dampening and weight decay"),
        Sample((g.randn(2, 3), g.randn(2, 3), g.randn(2, 3)), call=_sgd(momentum=0.9, nesterov=True, maximize=True),
               mutates=(0, 2), grad=False, desc="Nesterov, maximize"),
        Sample((scalar(0.5), scalar(-1.0), scalar(0.2)), call=_sgd(momentum=0.5), mutates=(0, 2), grad=False,
               desc="0-d parameter"),
        Sample((empty(0, 2), empty(0, 2)), call=_sgd(), mutates=(0,), grad=False, desc="empty parameter"),
        Sample((g.randn(3), g.randn(4)), call=_sgd(), raises=RuntimeError, desc="a gradient of another shape"),
    ]


def _fused_sgd(n, buffers=False, **options):
    opts = {**_SGD_DEFAULTS, **options}

    def call(m, *tensors):
        params, grads = list(tensors[:n]), list(tensors[n:2 * n])
        bufs = list(tensors[2 * n:]) if buffers else None
        with m.no_grad():
            if is_torch(m):
                importlib.import_module("torch.optim.sgd").sgd(params, grads, bufs or [None] * n, foreach=False,
                                                               **opts)
            else:
                from plugtorch.core.ops.optimizer_updates import _fused_sgd_
                _fused_sgd_(params, grads, bufs, **opts)
            return tensors[0]
    return call


def _fused_sgd_samples(g):
    shapes = [(4, 3), (5,), (), (0, 2)]

    def one(make):
        return [make(*s) if s else scalar(float(make(1)[0])) for s in shapes]
    n, every = len(shapes), tuple(range(len(shapes)))
    return [
        Sample((*one(g.randn), *one(g.randn)), call=_fused_sgd(n, weight_decay=0.01), mutates=every, grad=False,
               desc="four parameters, 2-d, 1-d, 0-d, empty; no momentum"),
        Sample((*one(g.randn), *one(g.randn), *one(g.randn)),
               call=_fused_sgd(n, True, momentum=0.9, nesterov=True, maximize=True),
               mutates=(*every, *(2 * n + i for i in every)), grad=False, desc="momentum buffers, Nesterov, maximize"),
        Sample((*one(g.randn), *one(g.randn), *one(g.randn)), call=_fused_sgd(n, True, momentum=0.8, dampening=0.3),
               mutates=(*every, *(2 * n + i for i in every)), grad=False, desc="dampening"),
    ]


SAMPLES = {"_fused_adam_": _fused_adam_samples, "_fused_sgd_": _fused_sgd_samples, "adam_step_": _adam_step_,
           "sgd_step_": _sgd_step_}
