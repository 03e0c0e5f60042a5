"""Optimizer updates as ops: one registered op per parameter update, in place.

``adam_step_`` is what ``optim.Adam``/``AdamW`` call for each parameter, ``sgd_step_`` what
``optim.SGD`` calls; ``_fused_adam_`` is ``adam_step_`` over lists of parameters at once (what
Adam calls with ``foreach``/``fused`` left on) and ``_fused_sgd_`` the same for ``sgd_step_``,
so that a step of a model with many small parameters pays one dispatch rather than one per
parameter (their decompositions are that loop). The per-parameter ops' decompositions (the body
of their declaration) are the update written with plugtorch's in-place ops (so every backend
runs it, in torch's order of operations), and a backend may register a kernel that does the
same in one pass: the NumPy backend's uses in-place ufuncs and one scratch array, instead of
~15 dispatched ops and their temporaries (``backends/numpy_backend/fused_optim.py``). Each op
mutates its tensor operands, bumps their version counters, and is not differentiable (torch's
optimizers update under ``no_grad``, and so do these ops).

Their public functions are written out (``front=``) rather than generated from a ``bind``:
after the one dispatched call (``plugtorch.compile`` refreshes its attrs on replay) they move
the operands' version counters, which a kernel writing arrays cannot, and return ``param``
itself (the multi-tensor ops None, as torch's) rather than the new tensor a kernel's returned
array is wrapped in.
"""
from __future__ import annotations

from ..dispatch import call_op
from ..grad_mode import is_grad_enabled
from ..optable import op
from ..tensor import Tensor

__all__ = ["_fused_adam_", "_fused_sgd_", "adam_step_", "sgd_step_"]


def _check_operands(op_name, param, tensors):
    # runs for every parameter of every step: compare backends by identity, and on a
    # multi-device backend the arrays' device ordinals (building and comparing Device objects,
    # which resolve names through the registry, took 35 us a parameter on CuPy)
    backend, dtype, shape = param._backend, param.dtype, param._data.shape
    device_index = backend.device_index
    ordinal = device_index(param._data) if device_index is not None else None
    grad_mode = is_grad_enabled()
    for what, t in tensors.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"{op_name}(): argument '{what}' must be a Tensor, not {type(t).__name__}")
        if not dtype.is_floating_point or t.dtype is not dtype or t._backend is not backend \
                or t._data.shape != shape or (ordinal is not None and device_index(t._data) != ordinal):
            raise RuntimeError(f"{op_name}(): '{what}' is {t.dtype.name} {list(t.shape)} on {t.device}, but every "
                               f"tensor must match the floating parameter: {param.dtype.name} "
                               f"{list(param.shape)} on {param.device}")
        if grad_mode and t.requires_grad:
            raise RuntimeError(f"{op_name}(): '{what}' requires grad and the op updates it in place; "
                               "call it under plugtorch.no_grad(), as optimizers do")


def _lerp_(start, end, weight: float):
    # torch's lerp switches formula at 0.5 so that both ends are exact
    if abs(weight) < 0.5:
        return start.add_(end - start, alpha=weight)
    return start.sub_(end).mul_(1 - weight).add_(end)


def _adam_front(name):
    def adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq=None, *, lr, beta1, beta2, eps,
                   weight_decay=0.0, step, maximize=False, decoupled_weight_decay=False):
        tensors = {"param": param, "grad": grad, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
        if max_exp_avg_sq is not None:
            tensors["max_exp_avg_sq"] = max_exp_avg_sq
        _check_operands(name, param, tensors)
        if step < 1:
            raise ValueError(f"{name}(): step is the number of this update, counted from 1; got {step}")
        call_op(name, (param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq),
                adam_attrs(lr, beta1, beta2, eps, weight_decay, step, maximize, decoupled_weight_decay))
        for t in (param, exp_avg, exp_avg_sq, max_exp_avg_sq):
            if t is not None:
                t._vc[0] += 1
        return param
    adam_step_.__qualname__ = name
    return adam_step_


@op(front=_adam_front, exposed=(), dtypes="floating; every tensor of the parameter's dtype, shape and backend")
def adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, *, lr, beta1, beta2, eps, weight_decay, step,
               maximize, decoupled_weight_decay):
    """One Adam/AdamW update of ``param`` in place, as torch.optim.Adam's single-tensor step.

    ``exp_avg`` and ``exp_avg_sq`` (and ``max_exp_avg_sq`` with AMSGrad) are the moment
    estimates, updated in place; ``step`` is the step number after this update (1 first).
    ``weight_decay`` is L2 on the gradient, or decoupled (AdamW) with
    ``decoupled_weight_decay``. Returns ``param``.

    A kernel receives param, grad, exp_avg, exp_avg_sq and max_exp_avg_sq (or None), all
    arrays of one floating dtype and shape, and lr, beta1, beta2, eps, weight_decay (floats),
    step (int), maximize and decoupled_weight_decay (bools) by name; it updates param,
    exp_avg, exp_avg_sq and max_exp_avg_sq in place and returns param.
    """
    if maximize:
        grad = -grad
    if weight_decay != 0:
        if decoupled_weight_decay:
            param.mul_(1 - lr * weight_decay)
        else:
            grad = grad.add(param, alpha=weight_decay)
    _lerp_(exp_avg, grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).add_((grad * (1 - beta2)).mul_(grad))
    step_size = lr / (1 - beta1 ** step)
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    second = exp_avg_sq
    if max_exp_avg_sq is not None:
        second = max_exp_avg_sq.copy_(max_exp_avg_sq.maximum(exp_avg_sq))
    denom = (second.sqrt() / bias_correction2_sqrt).add_(eps)
    return param.add_(exp_avg / denom, alpha=-step_size)


def _fused_adam_front(name):
    def _fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs=None, *, lr, beta1, beta2, eps,
                     weight_decay=0.0, step, maximize=False, decoupled_weight_decay=False):
        lists = {"grads": grads, "exp_avgs": exp_avgs, "exp_avg_sqs": exp_avg_sqs}
        if max_exp_avg_sqs is not None:
            lists["max_exp_avg_sqs"] = max_exp_avg_sqs
        # one kernel serves the lists, so every tensor must share the first parameter's dtype
        # and backend, and each its own parameter's shape (the per-parameter op's contract)
        _fused_lists_check(name, params, lists)
        if step < 1:
            raise ValueError(f"{name}(): step is the number of this update, counted from 1; got {step}")
        if not params:
            return
        for i, p in enumerate(params):
            _check_operands(name, p, {"param": p, **{what[:-1]: ts[i] for what, ts in lists.items()}})
        operands = (*params, *grads, *exp_avgs, *exp_avg_sqs, *(max_exp_avg_sqs or ()))
        call_op(name, operands, _fused_attrs(adam_attrs(lr, beta1, beta2, eps, weight_decay, step, maximize,
                                                        decoupled_weight_decay), max_exp_avg_sqs is not None))
        for ts in (params, exp_avgs, exp_avg_sqs, max_exp_avg_sqs or ()):
            for t in ts:
                t._vc[0] += 1
    _fused_adam_.__qualname__ = name
    return _fused_adam_


def _fused_attrs(attrs: dict, amsgrad: bool) -> dict:
    return {**attrs, "amsgrad": bool(amsgrad)}


@op(front=_fused_adam_front, variadic=True, exposed=(),
    dtypes="floating; every tensor of params[0]'s dtype and backend, and of its own parameter's shape")
def _fused_adam_(tensors, *, lr, beta1, beta2, eps, weight_decay, step, maximize, decoupled_weight_decay,
                 amsgrad):
    """``adam_step_`` on every parameter of a list at once, in place: torch.optim.Adam's
    multi-tensor (``foreach``/``fused``) step, computed as its single-tensor step is, so the
    values are ``adam_step_``'s bit for bit. Returns None.

    The public function takes torch's lists (``params, grads, exp_avgs, exp_avg_sqs`` and
    ``max_exp_avg_sqs`` or None); ``step`` is the one step number of every parameter. A kernel
    receives those lists concatenated in that order (4 or, with ``amsgrad``, 5 runs of equal
    length) and the attrs of ``adam_step_`` plus ``amsgrad`` by name; it updates the
    parameters and their moment estimates in place and returns the first parameter.
    """
    lists = 5 if amsgrad else 4
    n = len(tensors) // lists
    attrs = {"lr": lr, "beta1": beta1, "beta2": beta2, "eps": eps, "weight_decay": weight_decay, "step": step,
             "maximize": maximize, "decoupled_weight_decay": decoupled_weight_decay}
    for i in range(n):  # the per-parameter op: a backend without this kernel may still fuse that one
        call_op("adam_step_", (*tensors[i:len(tensors):n], *(() if amsgrad else (None,))), attrs)
    return tensors[0]


def adam_attrs(lr, beta1, beta2, eps, weight_decay, step, maximize, decoupled_weight_decay) -> dict:
    """The attrs an ``adam_step_`` kernel receives (plugtorch.compile's replays recompute them)."""
    return {"lr": float(lr), "beta1": float(beta1), "beta2": float(beta2), "eps": float(eps),
            "weight_decay": float(weight_decay), "step": int(step), "maximize": bool(maximize),
            "decoupled_weight_decay": bool(decoupled_weight_decay)}


def sgd_attrs(lr, momentum, dampening, weight_decay, nesterov, maximize, first_step) -> dict:
    """The attrs an ``sgd_step_`` kernel receives."""
    return {"lr": float(lr), "momentum": float(momentum), "dampening": float(dampening),
            "weight_decay": float(weight_decay), "nesterov": bool(nesterov), "maximize": bool(maximize),
            "first_step": bool(first_step)}


def _sgd_front(name):
    def sgd_step_(param, grad, momentum_buffer=None, *, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
                  nesterov=False, maximize=False, first_step=False):
        tensors = {"param": param, "grad": grad}
        if momentum_buffer is not None:
            tensors["momentum_buffer"] = momentum_buffer
        _check_operands(name, param, tensors)
        if nesterov and momentum_buffer is None:
            raise ValueError(f"{name}(): Nesterov momentum needs a momentum_buffer")
        call_op(name, (param, grad, momentum_buffer),
                sgd_attrs(lr, momentum, dampening, weight_decay, nesterov, maximize, first_step))
        for t in (param, momentum_buffer):
            if t is not None:
                t._vc[0] += 1
        return param
    sgd_step_.__qualname__ = name
    return sgd_step_


@op(front=_sgd_front, exposed=(), dtypes="floating; every tensor of the parameter's dtype, shape and backend")
def sgd_step_(param, grad, momentum_buffer, *, lr, momentum, dampening, weight_decay, nesterov, maximize,
              first_step):
    """One SGD update of ``param`` in place, as torch.optim.SGD's single-tensor step.

    With momentum, ``momentum_buffer`` is updated in place (``first_step``: set to the
    gradient, as torch's buffer starts as a copy of it); without, pass None. Returns
    ``param``.

    A kernel receives param, grad and momentum_buffer (or None), arrays of one floating
    dtype and shape, and lr, momentum, dampening, weight_decay (floats), nesterov, maximize
    and first_step (bools) by name; it updates param and momentum_buffer in place and
    returns param.
    """
    d_p = -grad if maximize else grad
    if weight_decay != 0:
        d_p = d_p.add(param, alpha=weight_decay)
    if momentum_buffer is not None:
        if first_step:
            momentum_buffer.copy_(d_p)
        else:
            momentum_buffer.mul_(momentum).add_(d_p, alpha=1 - dampening)
        d_p = d_p.add(momentum_buffer, alpha=momentum) if nesterov else momentum_buffer
    return param.add_(d_p, alpha=-lr)


def _fused_lists_check(name, params, lists):
    """Lists of equal length, every tensor of params[0]'s dtype and backend (one kernel serves them)."""
    n = len(params)
    for what, ts in lists.items():
        if len(ts) != n:
            raise ValueError(f"{name}(): {what} has {len(ts)} tensors, but params has {n}: "
                             "pass one of each per parameter")
    if n:
        dtype, backend = params[0].dtype, params[0]._backend
        for i, p in enumerate(params):
            if not isinstance(p, Tensor) or p.dtype is not dtype or p._backend is not backend:
                got = f"{p.dtype.name} on {p.device}" if isinstance(p, Tensor) else type(p).__name__
                raise RuntimeError(f"{name}(): params[{i}] is {got}, but every tensor must be "
                                   f"{dtype.name} on {params[0].device}, as params[0] is")


def _fused_sgd_front(name):
    def _fused_sgd_(params, grads, momentum_buffers=None, *, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
                    nesterov=False, maximize=False, first_step=False):
        lists = {"grads": grads} if momentum_buffers is None else {"grads": grads, "momentum_buffers": momentum_buffers}
        _fused_lists_check(name, params, lists)
        if nesterov and momentum_buffers is None:
            raise ValueError(f"{name}(): Nesterov momentum needs momentum_buffers")
        for i, p in enumerate(params):
            _check_operands(name, p, {"param": p, **{what[:-1]: ts[i] for what, ts in lists.items()}})
        if not params:
            return
        call_op(name, (*params, *grads, *(momentum_buffers or ())),
                {**sgd_attrs(lr, momentum, dampening, weight_decay, nesterov, maximize, first_step),
                 "momentum_buffers": momentum_buffers is not None})
        for ts in (params, momentum_buffers or ()):
            for t in ts:
                t._vc[0] += 1
    _fused_sgd_.__qualname__ = name
    return _fused_sgd_


@op(front=_fused_sgd_front, variadic=True, exposed=(),
    dtypes="floating; every tensor of params[0]'s dtype and backend, and of its own parameter's shape")
def _fused_sgd_(tensors, *, lr, momentum, dampening, weight_decay, nesterov, maximize, first_step,
                momentum_buffers):
    """``sgd_step_`` on every parameter of a list at once, in place: torch.optim.SGD's
    multi-tensor (``foreach``/``fused``) step, computed as its single-tensor step is. Returns
    None.

    The public function takes torch's lists (``params, grads`` and ``momentum_buffers`` or
    None). A kernel receives those lists concatenated in that order (2 or, with
    ``momentum_buffers``, 3 runs of equal length) and the attrs of ``sgd_step_`` plus
    ``momentum_buffers`` by name; it updates the parameters and buffers in place and returns
    the first parameter.
    """
    lists = 3 if momentum_buffers else 2
    n = len(tensors) // lists
    attrs = {"lr": lr, "momentum": momentum, "dampening": dampening, "weight_decay": weight_decay,
             "nesterov": nesterov, "maximize": maximize, "first_step": first_step}
    for i in range(n):  # the per-parameter op
        call_op("sgd_step_", (*tensors[i:len(tensors):n], *(() if momentum_buffers else (None,))), attrs)
    return tensors[0]
