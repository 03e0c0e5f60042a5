"""adam_step_ and sgd_step_ as CUDA kernels: one launch per parameter, in place.

``make_kernels(xp, load)`` gives the registered-op kernels, with the NumPy backend's
signatures (``backends/numpy_backend/fused_optim.py``), over ``kernels/optim.cu``. The
scalars are the NumPy kernel's, computed in Python and rounded to the arrays' dtype as it
rounds them, and the kernel runs its operations in its order: the two agree bit for bit.

The kernel writes through the arrays it is given, so each state array that is not a
C-contiguous array of a kernel dtype runs on a contiguous copy that is written back into
it after the launch (``a[...] = copy``, on the device): the update still lands in the
caller's arrays. float16 runs that way in float32 (one rounding per step instead of one
per operation, as torch's fused optimizers do).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy

from .modules import THREADS, as_operand, blocks, float_work_dtype, kernel_finder


def _work_dtype(dtype) -> numpy.dtype:
    return float_work_dtype(dtype, "no CUDA optimizer kernel for {dtype}: parameters must be float16, float32 or "
                                   "float64")


def make_kernels(xp, load: Callable) -> dict[str, Callable]:
    """op name -> kernel over ``xp`` arrays (``cupy``, or NumPy with the CPU-built kernels)."""
    find = kernel_finder(load)
    operand = as_operand

    def in_place(arrays, work):
        """What the kernel writes through, for each of ``arrays``: itself, or a copy to write back."""
        return [operand(a, work) for a in arrays]

    def write_back(arrays, live):
        for a, b in zip(arrays, live):
            if a is not b:
                a[...] = b

    def adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq=None, *, lr, beta1, beta2, eps,
                   weight_decay, step, maximize, decoupled_weight_decay):
        work = _work_dtype(param.dtype)
        dt, i32 = work.type, numpy.int32
        amsgrad = max_exp_avg_sq is not None
        wd_mode = 0 if weight_decay == 0 else (2 if decoupled_weight_decay else 1)
        weight = 1 - beta1
        lerp_small = abs(weight) < 0.5
        updated = [param, exp_avg, exp_avg_sq] + ([max_exp_avg_sq] if amsgrad else [])
        decay = 1 - lr * weight_decay if wd_mode == 2 else 1
        scalars = (i32(maximize), i32(wd_mode), dt(weight_decay), dt(decay), i32(lerp_small),
                   dt(weight if lerp_small else 1 - weight), dt(beta2), dt(1 - beta2), i32(amsgrad),
                   dt((1 - beta2 ** step) ** 0.5), dt(eps), dt(-(lr / (1 - beta1 ** step))))
        n = param.size
        if n == 0:
            return param
        live = in_place(updated, work)
        most = live[3] if amsgrad else live[2]  # without amsgrad: any array, untouched
        find("optim", "adam_step", work)((blocks(n),), (THREADS,), (
            live[0], operand(grad, work), live[1], live[2], most, numpy.int64(n), *scalars))
        write_back(updated, live)
        return param

    def sgd_step_(param, grad, momentum_buffer=None, *, lr, momentum, dampening, weight_decay, nesterov,
                  maximize, first_step):
        work = _work_dtype(param.dtype)
        dt, i32 = work.type, numpy.int32
        has_buffer = momentum_buffer is not None
        updated = [param] + ([momentum_buffer] if has_buffer else [])
        n = param.size
        if n == 0:
            return param
        live = in_place(updated, work)
        buffer = live[1] if has_buffer else live[0]  # without a buffer: any array, untouched
        find("optim", "sgd_step", work)((blocks(n),), (THREADS,), (
            live[0], operand(grad, work), buffer, numpy.int64(n), i32(maximize), i32(weight_decay != 0),
            dt(weight_decay), i32(has_buffer), i32(first_step), dt(momentum), dt(1 - dampening),
            i32(nesterov), dt(-lr)))
        write_back(updated, live)
        return param

    return {"adam_step_": adam_step_, "sgd_step_": sgd_step_}
