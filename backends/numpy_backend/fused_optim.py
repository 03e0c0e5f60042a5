"""NumPy kernels for the optimizer-update ops: in-place ufuncs with ``out=``, one scratch array.

Each follows its op's decomposition operation for operation (``plugtorch/core/ops/
optimizer_updates.py``), with every Python number rounded to the arrays' dtype first, as
the decomposition's tensor-scalar ops do, so the two agree bit for bit. What it saves is
the ~15 dispatched ops and their temporaries per parameter.
"""
from __future__ import annotations

import numpy as np


def adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq=None, *, lr, beta1, beta2, eps,
               weight_decay, step, maximize, decoupled_weight_decay):
    dt = param.dtype.type
    if maximize:
        grad = np.negative(grad)
    if weight_decay != 0:
        if decoupled_weight_decay:
            param *= dt(1 - lr * weight_decay)
        else:
            grad = grad + param * dt(weight_decay)
    scratch = np.subtract(grad, exp_avg, out=np.empty_like(exp_avg))  # an array even when 0-d
    weight = 1 - beta1
    if abs(weight) < 0.5:                      # exp_avg.lerp_(grad, 1 - beta1), torch's two formulas
        scratch *= dt(weight)
        exp_avg += scratch
    else:
        exp_avg -= grad
        exp_avg *= dt(1 - weight)
        exp_avg += grad
    exp_avg_sq *= dt(beta2)                    # exp_avg_sq * beta2 + (grad * (1 - beta2)) * grad
    np.multiply(grad, dt(1 - beta2), out=scratch)
    scratch *= grad
    exp_avg_sq += scratch
    second = exp_avg_sq
    if max_exp_avg_sq is not None:
        second = np.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
    np.sqrt(second, out=scratch)               # denom = sqrt(v) / sqrt(1 - beta2^t) + eps
    scratch /= dt((1 - beta2 ** step) ** 0.5)
    scratch += dt(eps)
    np.divide(exp_avg, scratch, out=scratch)   # param += -lr / (1 - beta1^t) * (exp_avg / denom)
    scratch *= dt(-(lr / (1 - beta1 ** step)))
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


OPTIM_KERNELS = {"adam_step_": adam_step_, "sgd_step_": sgd_step_}
