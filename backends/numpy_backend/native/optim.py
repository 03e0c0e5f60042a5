"""adam_step_ in one C pass per parameter (the NumPy kernel makes about a dozen), bit for bit
the NumPy kernel's values: the same float operations in the same order and precision."""
from __future__ import annotations

from .. import fused_optim
from . import _kernels
from .pool import FLOATS


def adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq=None, *, lr, beta1, beta2, eps,
               weight_decay, step, maximize, decoupled_weight_decay):
    arrays = (param, grad, exp_avg, exp_avg_sq) + (() if max_exp_avg_sq is None else (max_exp_avg_sq,))
    if param.dtype not in FLOATS or not all(a.dtype == param.dtype and a.shape == param.shape
                                            and a.flags.c_contiguous for a in arrays):
        return fused_optim.adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, lr=lr, beta1=beta1,
                                      beta2=beta2, eps=eps, weight_decay=weight_decay, step=step,
                                      maximize=maximize, decoupled_weight_decay=decoupled_weight_decay)
    # the constants as fused_optim.adam_step_ computes them; C rounds each to the dtype, as its dt() does
    weight = 1 - beta1
    _kernels.adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, 1 - lr * weight_decay, weight_decay,
                       weight, 1 - weight, beta2, 1 - beta2, (1 - beta2 ** step) ** 0.5, eps,
                       -(lr / (1 - beta1 ** step)), maximize, decoupled_weight_decay, abs(weight) < 0.5)
    return param
