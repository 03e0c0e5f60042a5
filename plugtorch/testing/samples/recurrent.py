"""Samples for the recurrent ops: ``lstm_layer``, ``gru_layer`` and their backward ops, against
the same loops written with torch's ops (torch has the layers only inside ``nn.LSTM``/``nn.GRU``)."""
from __future__ import annotations

from ._common import Sample, Waiver, is_torch


def _torch_lstm_layer(m, xw, h0, c0, w, b, reverse):
    """state (6, T, N, H) as lstm_layer gives it, from torch's ops."""
    hx, cx = h0, c0
    rows: list[list] = [[] for _ in range(6)]
    steps = range(xw.shape[0] - 1, -1, -1) if reverse else range(xw.shape[0])
    for t in steps:
        gates = xw[t] + hx @ w.T + (b if b is not None else 0)
        i, f, g, o = gates.chunk(4, 1)
        i, f, g, o = m.sigmoid(i), m.sigmoid(f), m.tanh(g), m.sigmoid(o)
        cx = f * cx + i * g
        hx = o * m.tanh(cx)
        for row, v in zip(rows, (hx, cx, i, f, g, o)):
            row.append(v)
    if reverse:
        for row in rows:
            row.reverse()
    return m.stack([m.stack(row) for row in rows])


def _lstm_layer(g):
    def call(reverse, bias=True):
        def f(m, xw, h0, c0, w, b):
            b = b if bias else None
            if is_torch(m):
                return _torch_lstm_layer(m, xw, h0, c0, w, b, reverse)
            from plugtorch.core.ops.recurrent import lstm_layer
            return lstm_layer(xw, h0, c0, w, b, reverse=reverse)
        return f

    def inputs(t, n, h):
        return (g.randn(t, n, 4 * h), g.randn(n, h), g.randn(n, h), g.randn(4 * h, h) * 0.5, g.randn(4 * h))
    return [
        Sample(inputs(3, 2, 2), call=call(False)),
        Sample(inputs(3, 2, 2), call=call(True), desc="reverse"),
        Sample(inputs(2, 1, 3), call=call(False, bias=False), desc="no bias_hh", grad_inputs=(0, 1, 2, 3)),
        Sample(inputs(2, 0, 2), call=call(False), desc="an empty batch"),
        Sample((*inputs(2, 2, 2)[:3], g.randn(6, 2), g.randn(8)), call=call(False), raises=RuntimeError,
               desc="weight_hh of the wrong shape"),
        Waiver("zero_dim", "a layer's operands are a sequence, states and weights: never 0-d"),
    ]


def _lstm_layer_backward(g):
    def call(reverse):
        def f(m, grad_state, xw, h0, c0, w, b):
            if is_torch(m):
                # the gradient is taken with respect to these, whether or not the kit's differ
                xw, h0, c0 = (v if v.requires_grad else v.detach().requires_grad_() for v in (xw, h0, c0))
                state = _torch_lstm_layer(m, xw, h0, c0, w, b, reverse)
                gx, gh, gc = m.autograd.grad(state, (xw, h0, c0), grad_state, create_graph=True)
                return m.cat([gx, m.cat([gh, gc, m.zeros_like(gh), m.zeros_like(gh)], 1).unsqueeze(0)], 0)
            from plugtorch.core.ops.recurrent import lstm_layer, lstm_layer_backward
            state = lstm_layer(xw, h0, c0, w, b, reverse=reverse)
            return lstm_layer_backward(grad_state, c0, w, state, reverse=reverse)
        return f

    def inputs(t, n, h):
        return (g.randn(6, t, n, h), g.randn(t, n, 4 * h), g.randn(n, h), g.randn(n, h), g.randn(4 * h, h) * 0.5,
                g.randn(4 * h))
    return [
        Sample(inputs(3, 2, 2), call=call(False), grad_inputs=(0, 2, 3)),
        Sample(inputs(2, 1, 2), call=call(True), desc="reverse", grad_inputs=(0, 1, 4)),
        Sample(inputs(2, 0, 2), call=call(False), desc="an empty batch", grad_inputs=(0, 2, 3)),
        Waiver("zero_dim", "a layer's operands are a sequence, states and weights: never 0-d"),
    ]


def _torch_gru_layer(m, xw, h0, w, b, reverse, hn_offset=None):
    """state (5, T, N, H) as gru_layer gives it, from torch's ops (torch's GRU cell); a zero
    ``hn_offset`` (T, N, H) added to each step's ``W_hn h + b_hn`` gives its gradient."""
    hx = h0
    rows: list[list] = [[] for _ in range(5)]
    steps = range(xw.shape[0] - 1, -1, -1) if reverse else range(xw.shape[0])
    for t in steps:
        hr, hz, hn = (hx @ w.T + (b if b is not None else 0)).chunk(3, 1)
        if hn_offset is not None:
            hn = hn + hn_offset[t]
        xr, xz, xn = xw[t].chunk(3, 1)
        r, z = m.sigmoid(xr + hr), m.sigmoid(xz + hz)
        n = m.tanh(xn + r * hn)
        hx = (hx - n) * z + n
        for row, v in zip(rows, (hx, r, z, n, hn)):
            row.append(v)
    if reverse:
        for row in rows:
            row.reverse()
    return m.stack([m.stack(row) for row in rows])


def _gru_layer(g):
    def call(reverse, bias=True):
        def f(m, xw, h0, w, b):
            b = b if bias else None
            if is_torch(m):
                return _torch_gru_layer(m, xw, h0, w, b, reverse)
            from plugtorch.core.ops.recurrent import gru_layer
            return gru_layer(xw, h0, w, b, reverse=reverse)
        return f

    def inputs(t, n, h):
        return (g.randn(t, n, 3 * h), g.randn(n, h), g.randn(3 * h, h) * 0.5, g.randn(3 * h))
    return [
        Sample(inputs(3, 2, 2), call=call(False)),
        Sample(inputs(3, 2, 2), call=call(True), desc="reverse"),
        Sample(inputs(2, 1, 3), call=call(False, bias=False), desc="no bias_hh", grad_inputs=(0, 1, 2)),
        Sample(inputs(2, 0, 2), call=call(False), desc="an empty batch"),
        Sample((*inputs(2, 2, 2)[:2], g.randn(4, 2), g.randn(6)), call=call(False), raises=RuntimeError,
               desc="weight_hh of the wrong shape"),
        Waiver("zero_dim", "a layer's operands are a sequence, states and weights: never 0-d"),
    ]


def _gru_layer_backward(g):
    def call(reverse):
        def f(m, grad_state, xw, h0, w, b):
            if is_torch(m):
                # the gradient is taken with respect to these, whether or not the kit's differ
                xw, h0 = (v if v.requires_grad else v.detach().requires_grad_() for v in (xw, h0))
                offset = m.zeros(*xw.shape[:2], h0.shape[1], dtype=xw.dtype, requires_grad=True)
                state = _torch_gru_layer(m, xw, h0, w, b, reverse, offset)
                gx, gh, goff = m.autograd.grad(state, (xw, h0, offset), grad_state, create_graph=True)
                last = m.cat([gh, m.zeros(gh.shape[0], 3 * gh.shape[1], dtype=gh.dtype)], 1)
                return m.cat([m.cat([gx, goff], 2), last.unsqueeze(0)], 0)
            from plugtorch.core.ops.recurrent import gru_layer, gru_layer_backward
            state = gru_layer(xw, h0, w, b, reverse=reverse)
            return gru_layer_backward(grad_state, h0, w, state, reverse=reverse)
        return f

    def inputs(t, n, h):
        return (g.randn(5, t, n, h), g.randn(t, n, 3 * h), g.randn(n, h), g.randn(3 * h, h) * 0.5, g.randn(3 * h))
    return [
        Sample(inputs(3, 2, 2), call=call(False), grad_inputs=(0, 2)),
        Sample(inputs(2, 1, 2), call=call(True), desc="reverse", grad_inputs=(0, 1, 3)),
        Sample(inputs(2, 0, 2), call=call(False), desc="an empty batch", grad_inputs=(0, 2)),
        Waiver("zero_dim", "a layer's operands are a sequence, states and weights: never 0-d"),
    ]


SAMPLES = dict(lstm_layer=_lstm_layer, lstm_layer_backward=_lstm_layer_backward, gru_layer=_gru_layer,
               gru_layer_backward=_gru_layer_backward)
