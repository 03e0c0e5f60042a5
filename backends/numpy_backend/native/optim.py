"""adam_step_ in one C pass per parameter (the NumPy kernel makes about a dozen), bit for bit
the NumPy kernel's values: the same float operations in the same order and precision."""
from __future__ import annotations

from .. import fused_optim
from . import FLOATS, _kernels


def adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq=None, *, lr, beta1, beta2, eps,
               weight_decay, step, maximize, decoupled_weight_decay):
    arrays = (param, grad, exp_avg, exp_avg_sq) + (() if max_exp_avg_sq is None else (max_exp_avg_sq,))
    if param.dtype not in FLOATS or not all(a.dtype == param.dtype and a.shape == param.shape
                                            and a.flags.c_contiguous for a in arrays):
        return fused_optim.adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, lr=lr, beta1=beta1,
                                      beta2=beta2, eps=eps, weight_decay=weight_decay, step=step,
                                      maximize=maximize, decoupled_weight_decay=decoupled_weight_decay)
    k = fused_optim.adam_constants(lr=lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay, step=step)
    _kernels.adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, k.decay, weight_decay, k.weight,
                       k.one_minus_weight, beta2, k.one_minus_beta2, k.bias2, eps, k.step_size, maximize,
                       decoupled_weight_decay, k.small_weight)
    return param
