"""The NumPy backend's kernels for ``lstm_layer`` and ``lstm_layer_backward`` (and ``gru_layer``,
``gru_layer_backward``): the time loop as one call, one GEMM and one pass of gate arithmetic a
step, as cuDNN does it on a GPU.

Each step's gate arithmetic is ``forward_step``/``backward_step``: NumPy passes here, one C
pass where the native kernels are built (``native/rnn.py`` passes its own). Each step's GEMM
(batch x hidden rows: few) runs in the native product where it beats OpenBLAS
(``native/gemm.py``), NumPy's elsewhere; the weight and bias gradients are the op's rule's,
formed from this kernel's output with one matmul over every step at once.
"""
from __future__ import annotations

import numpy as np

from .native import gemm


def _steps(n, reverse):
    return range(n - 1, -1, -1) if reverse else range(n)


def _sigmoid(x, out):
    """1 / (1 + exp(-x)) as 0.5 + 0.5 * tanh(x / 2): no overflow for any x, three passes in place."""
    np.multiply(x, 0.5, out=out)
    np.tanh(out, out=out)
    np.multiply(out, 0.5, out=out)
    return np.add(out, 0.5, out=out)


def forward_step(gates, c_prev, state, t):
    """Step t's h, c, i, f, g, o into ``state`` (6, T, N, H) from its gates (N, 4H: i, f, g, o
    before their activations; overwritten) and the cell state it starts from."""
    h, c, i, f, g, o = state[:, t]
    n = i.shape[1]
    np.tanh(gates[:, 2 * n:3 * n], out=g)
    _sigmoid(gates[:, :n], i)
    _sigmoid(gates[:, n:2 * n], f)
    _sigmoid(gates[:, 3 * n:], o)
    np.multiply(f, c_prev, out=c)
    np.add(c, np.multiply(i, g, out=gates[:, :n]), out=c)
    np.tanh(c, out=h)
    np.multiply(h, o, out=h)


def backward_step(grad_state, state, t, c_prev, dh, dc, out):
    """Step t back: from the state's gradient and ``dh``, ``dc`` (N, H) flowing in from the later
    step, the gates' gradient before their activations into ``out`` (N, 4H), and ``dc`` becomes
    the gradient of ``c_prev`` (the caller's GEMM makes the next ``dh``)."""
    grad = grad_state[:, t]
    c, i, f, g, o = state[1:, t]
    n = i.shape[1]
    dh = np.add(dh, grad[0])
    tc = np.tanh(c)
    d = np.multiply(tc, tc)
    np.subtract(1, d, out=d)
    np.multiply(d, o, out=d)
    np.multiply(d, dh, out=d)
    np.add(dc, d, out=dc)
    np.add(dc, grad[1], out=dc)
    for k, (act, partner, extra) in enumerate(((i, g, grad[2]), (f, c_prev, grad[3]), (g, i, grad[4]),
                                               (o, None, grad[5]))):
        view = out[:, k * n:(k + 1) * n]
        np.multiply(dh if partner is None else dc, tc if partner is None else partner, out=view)
        np.add(view, extra, out=view)
        slope = np.subtract(1, np.multiply(g, g)) if act is g else np.multiply(act, np.subtract(1, act))
        np.multiply(view, slope, out=view)  # tanh' = 1 - g^2, sigmoid' = s (1 - s)
    np.multiply(dc, f, out=dc)


def make_kernels(forward_step=forward_step, backward_step=backward_step, forward_layer=None, backward_layer=None):
    """The two kernels over the given step functions (the C ones or the NumPy ones above, which
    take the same arguments), and over whole-layer loops in C (``native/rnn.c``) where given: those
    run every step's product in the native kernel themselves, so they serve only the shapes whose
    products ``matmul`` gives that kernel (``gemm.takes``); the same values, without a return to
    Python between steps (~25 us a step, a fifth of an LSTM step's time on two threads)."""

    def lstm_layer(input_gates, h0, c0, weight_hh, bias_hh, *, reverse):
        steps, batch, four_h = input_gates.shape
        state = np.empty((6, steps, batch, four_h // 4), input_gates.dtype)
        # W_hh^T copied once for all steps: the native product takes B's rows whole (native/gemm.py)
        w_t = gemm.transposed(weight_hh)
        if forward_layer is not None and gemm.takes(batch, four_h // 4, four_h):
            bias = None if bias_hh is None else np.ascontiguousarray(bias_hh)
            forward_layer(np.ascontiguousarray(input_gates), np.ascontiguousarray(h0), np.ascontiguousarray(c0),
                          w_t, bias, state, reverse)
            return state
        gates = np.empty((batch, four_h), input_gates.dtype)
        h, c = h0, np.ascontiguousarray(c0)
        for t in _steps(steps, reverse):
            gemm.matmul(h, w_t, out=gates)
            np.add(gates, input_gates[t], out=gates)
            if bias_hh is not None:
                np.add(gates, bias_hh, out=gates)
            forward_step(gates, c, state, t)
            h, c = state[0, t], state[1, t]
        return state

    def lstm_layer_backward(grad_state, c0, weight_hh, state, *, reverse):
        _, steps, batch, hidden = state.shape
        grad_state, state = np.ascontiguousarray(grad_state), np.ascontiguousarray(state)
        out = np.empty((steps + 1, batch, 4 * hidden), state.dtype)
        c0 = np.ascontiguousarray(c0)
        if backward_layer is not None and gemm.takes(batch, 4 * hidden, hidden):
            backward_layer(grad_state, state, c0, np.ascontiguousarray(weight_hh), out, reverse)
            return out
        # every step writes its row whole; only the last row's tail past dh, dc needs zeros
        out[steps, :, 2 * hidden:] = 0
        dh = np.zeros((batch, hidden), state.dtype)
        dc = np.zeros((batch, hidden), state.dtype)
        order = list(_steps(steps, reverse))
        for k in range(steps - 1, -1, -1):
            t = order[k]
            backward_step(grad_state, state, t, state[1, order[k - 1]] if k else c0, dh, dc, out[t])
            gemm.matmul(out[t], weight_hh, out=dh)
        out[steps, :, :hidden] = dh
        out[steps, :, hidden:2 * hidden] = dc
        return out

    return {"lstm_layer": lstm_layer, "lstm_layer_backward": lstm_layer_backward}


def gru_layer(input_gates, h0, weight_hh, bias_hh, *, reverse):
    steps, batch, three_h = input_gates.shape
    hidden = three_h // 3
    state = np.empty((5, steps, batch, hidden), input_gates.dtype)
    gh = np.empty((batch, three_h), input_gates.dtype)
    w_t = gemm.transposed(weight_hh)  # once for all steps, as the LSTM's
    h_prev = h0
    for t in _steps(steps, reverse):
        h, r, z, n, hn = state[:, t]
        gemm.matmul(h_prev, w_t, out=gh)
        if bias_hh is not None:
            np.add(gh, bias_hh, out=gh)
        x = input_gates[t]
        _sigmoid(np.add(x[:, :hidden], gh[:, :hidden], out=r), r)
        _sigmoid(np.add(x[:, hidden:2 * hidden], gh[:, hidden:2 * hidden], out=z), z)
        np.copyto(hn, gh[:, 2 * hidden:])
        np.multiply(r, hn, out=n)
        np.tanh(np.add(n, x[:, 2 * hidden:], out=n), out=n)
        np.subtract(h_prev, n, out=h)            # h' = (h - n) * z + n, as torch's cell
        np.multiply(h, z, out=h)
        np.add(h, n, out=h)
        h_prev = h
    return state


def gru_layer_backward(grad_state, h0, weight_hh, state, *, reverse):
    _, steps, batch, hidden = state.shape
    out = np.zeros((steps + 1, batch, 4 * hidden), state.dtype)
    dh = np.zeros((batch, hidden), state.dtype)
    hidden_side = np.empty((batch, 3 * hidden), state.dtype)
    scratch = np.empty((batch, hidden), state.dtype)
    order = list(_steps(steps, reverse))
    for k in range(steps - 1, -1, -1):
        t = order[k]
        h_prev = state[0, order[k - 1]] if k else h0
        r, z, n, hn = state[1:, t]
        grad = grad_state[:, t]
        dr, dz, dn, dhn = (out[t][:, j * hidden:(j + 1) * hidden] for j in range(4))
        dh += grad[0]
        np.subtract(1, z, out=dn)                 # dn = dh (1 - z) + grad n, then through tanh
        np.multiply(dn, dh, out=dn)
        np.add(dn, grad[3], out=dn)
        np.multiply(n, n, out=scratch)
        np.subtract(1, scratch, out=scratch)
        np.multiply(dn, scratch, out=dn)
        np.subtract(h_prev, n, out=dz)            # dz = dh (h_prev - n) + grad z, then through sigmoid
        np.multiply(dz, dh, out=dz)
        np.add(dz, grad[2], out=dz)
        np.subtract(1, z, out=scratch)
        np.multiply(scratch, z, out=scratch)
        np.multiply(dz, scratch, out=dz)
        np.multiply(dn, hn, out=dr)               # dr = dn_pre hn + grad r, then through sigmoid
        np.add(dr, grad[1], out=dr)
        np.subtract(1, r, out=scratch)
        np.multiply(scratch, r, out=scratch)
        np.multiply(dr, scratch, out=dr)
        np.multiply(dn, r, out=dhn)               # d(W_hn h + b_hn) = dn_pre r + grad hn
        np.add(dhn, grad[4], out=dhn)
        hidden_side[:, :2 * hidden] = out[t][:, :2 * hidden]
        hidden_side[:, 2 * hidden:] = dhn
        np.multiply(dh, z, out=dh)
        dh += gemm.matmul(hidden_side, weight_hh)
    out[steps, :, :hidden] = dh
    return out


RNN_KERNELS = {**make_kernels(), "gru_layer": gru_layer, "gru_layer_backward": gru_layer_backward}
