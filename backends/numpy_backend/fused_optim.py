"""NumPy kernels for the optimizer-update ops: in-place ufuncs with ``out=``, one scratch array.

Each follows its op's decomposition operation for operation (``plugtorch/core/ops/
optimizer_updates.py``), with every Python number rounded to the arrays' dtype first, as
the decomposition's tensor-scalar ops do, so the two agree bit for bit. What it saves is
the ~15 dispatched ops and their temporaries per parameter.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class AdamConstants(NamedTuple):
    """The Python numbers one Adam update multiplies by, as the decomposition computes them
    (each is rounded to the arrays' dtype where it is used); the native kernel takes the same."""
    decay: float             # decoupled weight decay: param *= 1 - lr * weight_decay
    weight: float            # exp_avg.lerp_(grad, 1 - beta1)
    small_weight: bool       # which of torch's two lerp formulas
    one_minus_weight: float
    one_minus_beta2: float
    bias2: float             # sqrt(1 - beta2^t)
    step_size: float         # -lr / (1 - beta1^t)


def adam_constants(*, lr, beta1, beta2, weight_decay, step) -> AdamConstants:
    weight = 1 - beta1
    return AdamConstants(1 - lr * weight_decay, weight, abs(weight) < 0.5, 1 - weight, 1 - beta2,
                         (1 - beta2 ** step) ** 0.5, -(lr / (1 - beta1 ** step)))


def adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq=None, *, lr, beta1, beta2, eps,
               weight_decay, step, maximize, decoupled_weight_decay):
    dt = param.dtype.type
    k = adam_constants(lr=lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay, step=step)
    if maximize:
        grad = np.negative(grad)
    if weight_decay != 0:
        if decoupled_weight_decay:
            param *= dt(k.decay)
        else:
            grad = grad + param * dt(weight_decay)
    scratch = np.subtract(grad, exp_avg, out=np.empty_like(exp_avg))  # an array even when 0-d
    if k.small_weight:                         # exp_avg.lerp_(grad, 1 - beta1), torch's two formulas
        scratch *= dt(k.weight)
        exp_avg += scratch
    else:
        exp_avg -= grad
        exp_avg *= dt(k.one_minus_weight)
        exp_avg += grad
    exp_avg_sq *= dt(beta2)                    # exp_avg_sq * beta2 + (grad * (1 - beta2)) * grad
    np.multiply(grad, dt(k.one_minus_beta2), out=scratch)
    scratch *= grad
    exp_avg_sq += scratch
    second = exp_avg_sq
    if max_exp_avg_sq is not None:
        second = np.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
    np.sqrt(second, out=scratch)               # denom = sqrt(v) / sqrt(1 - beta2^t) + eps
    scratch /= dt(k.bias2)
    scratch += dt(eps)
    np.divide(exp_avg, scratch, out=scratch)   # param += -lr / (1 - beta1^t) * (exp_avg / denom)
    scratch *= dt(k.step_size)
    param += scratch
    return param


def sgd_step_(param, grad, momentum_buffer=None, *, lr, momentum, dampening, weight_decay, nesterov, maximize,
              first_step):
    dt = param.dtype.type
    d_p = np.negative(grad) if maximize else grad
    if weight_decay != 0:
        d_p = d_p + param * dt(weight_decay)
    if momentum_buffer is not None:
        if first_step:
            np.copyto(momentum_buffer, d_p)
        else:                                  # buf * momentum + d_p * (1 - dampening)
            momentum_buffer *= dt(momentum)
            momentum_buffer += d_p * dt(1 - dampening)
        d_p = d_p + momentum_buffer * dt(momentum) if nesterov else momentum_buffer
    param += d_p * dt(-lr)                     # param.add_(d_p, alpha=-lr)
    return param


def per_parameter(arrays, amsgrad: bool):
    """``_fused_adam_``'s operand list as (param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq or
    None) per parameter: the op concatenates 4 (5 with AMSGrad) lists of equal length."""
    lists = 5 if amsgrad else 4
    n = len(arrays) // lists
    runs = [arrays[k * n:(k + 1) * n] for k in range(lists)]
    if not amsgrad:
        runs.append([None] * n)
    return zip(*runs)


def _fused_adam_(arrays, *, amsgrad, **attrs):
    for param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq in per_parameter(arrays, amsgrad):
        adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, **attrs)
    return arrays[0]


def _fused_sgd_(arrays, *, momentum_buffers, **attrs):
    n = len(arrays) // (3 if momentum_buffers else 2)
    buffers = arrays[2 * n:] if momentum_buffers else [None] * n
    for param, grad, buf in zip(arrays[:n], arrays[n:2 * n], buffers):
        sgd_step_(param, grad, buf, **attrs)
    return arrays[0]


OPTIM_KERNELS = {"_fused_adam_": _fused_adam_, "_fused_sgd_": _fused_sgd_, "adam_step_": adam_step_,
                 "sgd_step_": sgd_step_}
