"""adam_step_ in one C pass per parameter (the NumPy kernel makes about a dozen), bit for bit
the NumPy kernel's values: the same float operations in the same order and precision (a NaN's
sign aside, which IEEE 754 leaves open and the vectorised loop may not keep); _fused_adam_
makes that pass for each parameter of its lists, with the step's constants computed once."""
from __future__ import annotations

from .. import fused_optim
from . import FLOATS
from . import _kernels as _loaded

assert _loaded is not None, "imported by native.kernels() only once the extension has loaded"
_kernels = _loaded  # the package's name is None where the extension is off; here it is loaded


def adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq=None, *, lr, beta1, beta2, eps,
               weight_decay, step, maximize, decoupled_weight_decay):
    # the op has checked that every array has the parameter's dtype and shape (the kernel's
    # contract); the loop also needs float32 or float64 in C order (the C side checks it again)
    if param.dtype not in FLOATS or not (param.flags.c_contiguous and grad.flags.c_contiguous
                                         and exp_avg.flags.c_contiguous and exp_avg_sq.flags.c_contiguous
                                         and (max_exp_avg_sq is None or max_exp_avg_sq.flags.c_contiguous)):
        return fused_optim.adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, lr=lr, beta1=beta1,
                                      beta2=beta2, eps=eps, weight_decay=weight_decay, step=step,
                                      maximize=maximize, decoupled_weight_decay=decoupled_weight_decay)
    k = fused_optim.adam_constants(lr=lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay, step=step)
    _kernels.adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, k.decay, weight_decay, k.weight,
                       k.one_minus_weight, beta2, k.one_minus_beta2, k.bias2, eps, k.step_size, maximize,
                       decoupled_weight_decay, k.small_weight)
    return param


def _fused_adam_(arrays, *, lr, beta1, beta2, eps, weight_decay, step, maximize, decoupled_weight_decay, amsgrad):
    k = fused_optim.adam_constants(lr=lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay, step=step)
    floats = arrays[0].dtype in FLOATS  # the op has checked that every array has params[0]'s dtype
    for p, g, m, v, vmax in fused_optim.per_parameter(arrays, amsgrad):
        if floats and p.flags.c_contiguous and g.flags.c_contiguous and m.flags.c_contiguous \
                and v.flags.c_contiguous and (vmax is None or vmax.flags.c_contiguous):
            _kernels.adam_step(p, g, m, v, vmax, k.decay, weight_decay, k.weight, k.one_minus_weight, beta2,
                               k.one_minus_beta2, k.bias2, eps, k.step_size, maximize, decoupled_weight_decay,
                               k.small_weight)
        else:
            fused_optim.adam_step_(p, g, m, v, vmax, lr=lr, beta1=beta1, beta2=beta2, eps=eps,
                                   weight_decay=weight_decay, step=step, maximize=maximize,
                                   decoupled_weight_decay=decoupled_weight_decay)
    return arrays[0]
