"""lstm_layer and lstm_layer_backward on the GPU as cuDNN runs a layer: per time step one GEMM
(``xp.matmul``: cuBLAS under CuPy) and one launch of ``kernels/lstm.cu`` for the gate
arithmetic (the step's adds, activations and cell update), the loop over time in Python.

``make_kernels(xp, load)`` gives the registered-op kernels with the NumPy backend's signatures
and packed layouts (``backends/numpy_backend/rnn.py``): ``state`` (6, T, N, H) holding per step
h, c, i, f, g, o, and the backward's (T + 1, N, 4H), the gates' gradients per step and, in row
T, those of h0 and c0. float16 runs in float32 and is rounded back once, as the loss kernels do.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy

from .modules import THREADS, as_operand, blocks, float_work_dtype, kernel_finder


def _work_dtype(op: str, dtype) -> numpy.dtype:
    return float_work_dtype(dtype, op + ": no CUDA kernel for {dtype}: it takes float16, float32 or float64")


def _steps(n: int, reverse: bool) -> range:
    return range(n - 1, -1, -1) if reverse else range(n)


def make_kernels(xp, load: Callable) -> dict[str, Callable]:
    """op name -> kernel over ``xp`` arrays (``cupy``, or NumPy with the CPU-built kernels)."""
    find = kernel_finder(load)
    i64 = numpy.int64

    def lstm_layer(input_gates, h0, c0, weight_hh, bias_hh, *, reverse):
        dtype = input_gates.dtype
        work = _work_dtype("lstm_layer", dtype)
        steps, batch, four_h = input_gates.shape
        hidden = four_h // 4
        ig = as_operand(input_gates, work)
        c = as_operand(c0, work)
        h = as_operand(h0, work)
        w_t = as_operand(weight_hh, work).T
        has_bias = bias_hh is not None
        bias = as_operand(bias_hh, work) if has_bias else ig  # never read without has_bias
        state = xp.empty((6, steps, batch, hidden), dtype=work)
        hw = xp.empty((batch, four_h), dtype=work)
        step = find("lstm", "lstm_forward_step", work)
        grid = (blocks(batch * hidden),)
        for t in _steps(steps, reverse):
            if batch * hidden:
                xp.matmul(h, w_t, out=hw)
                step(grid, (THREADS,), (hw, ig, bias, c, state, i64(t), i64(steps), i64(batch), i64(hidden),
                                        numpy.int32(has_bias)))
            h, c = state[0, t], state[1, t]
        return state if work == dtype else state.astype(dtype)

    def lstm_layer_backward(grad_state, c0, weight_hh, state, *, reverse):
        dtype = state.dtype
        work = _work_dtype("lstm_layer_backward", dtype)
        _, steps, batch, hidden = state.shape
        grad_state, state = as_operand(grad_state, work), as_operand(state, work)
        c0, w = as_operand(c0, work), as_operand(weight_hh, work)
        out = xp.zeros((steps + 1, batch, 4 * hidden), dtype=work)
        dh = xp.zeros((batch, hidden), dtype=work)
        dc = xp.zeros((batch, hidden), dtype=work)
        step = find("lstm", "lstm_backward_step", work)
        grid = (blocks(batch * hidden),)
        order = list(_steps(steps, reverse))
        if batch * hidden:
            for k in range(steps - 1, -1, -1):
                t = order[k]
                c_prev = state[1, order[k - 1]] if k else c0
                step(grid, (THREADS,), (grad_state, state, c_prev, dh, dc, out, i64(t), i64(steps), i64(batch),
                                        i64(hidden)))
                xp.matmul(out[t], w, out=dh)
        out[steps, :, :hidden] = dh
        out[steps, :, hidden:2 * hidden] = dc
        return out if work == dtype else out.astype(dtype)

    return {"lstm_layer": lstm_layer, "lstm_layer_backward": lstm_layer_backward}
