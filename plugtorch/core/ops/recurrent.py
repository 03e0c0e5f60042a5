"""Recurrent layers as ops: ``lstm_layer``, one LSTM layer in one direction over a whole
sequence, and ``lstm_layer_backward``, the op its derivative is written with; ``gru_layer`` and
``gru_layer_backward`` the same for a GRU layer.

A layer written from small ops records a dozen nodes per time step, and its backward sums a
full-size gradient of the input projection per step (a slice's gradient is a zero tensor the
size of the whole): on the word-language-model LSTM (35 steps, 2 layers) that was most of a
training step. As one op, a backend runs the time loop as one call (cuDNN's way: one GEMM and
one fused gate kernel a step, forward and backward), and the decompositions below - the loop
over time in plugtorch ops - stay what runs anywhere else.

The op returns one tensor (ops return one array), ``state`` of shape (6, T, N, H): per step
``h, c`` and the gate activations ``i, f, g, o`` (torch's gate order), which its derivative
reads instead of recomputing them (cuDNN's "reserve space"). ``nn.LSTM`` takes ``state[0]`` as
the layer's output and the last step's ``h``, ``c`` as its final state. ``gru_layer``'s state
is (5, T, N, H): ``h``, the gates ``r, z, n`` and ``W_hn h + b_hn`` (which ``n``'s reset gate
scales, so its derivative needs it too).
"""
from __future__ import annotations

import plugtorch

from ..optable import op
from ..tensor import Tensor
from . import elementwise as ew
from .activation import sigmoid

_ROWS = ("h", "c", "i", "f", "g", "o")  # state's first dim


def _steps(n, reverse):
    return range(n - 1, -1, -1) if reverse else range(n)


def _check(op_name, ok, what):
    if not ok:
        raise RuntimeError(f"{op_name}: {what}")


def _same_dtype(op_name, tensors):
    dtypes = {t.dtype for t in tensors if t is not None}
    backends = {t._backend.name for t in tensors if t is not None}
    _check(op_name, len(dtypes) == 1, "input and parameter tensors are not the same dtype, got "
           + ", ".join(sorted(d.name for d in dtypes)) + "; convert them to one with .to(dtype)")
    _check(op_name, len(backends) == 1, "tensors on different backends: " + ", ".join(sorted(backends)))
    _check(op_name, next(iter(dtypes)).is_floating_point, "expected floating point tensors, got "
           f"{next(iter(dtypes)).name}")


def _tensors(op_name, **named):
    for what, t in named.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"{op_name}(): argument '{what}' must be Tensor, not {type(t).__name__}")


def _layer_args(op_name, gates, input_gates, h0, weight_hh, bias_hh):
    """The checks ``lstm_layer`` and ``gru_layer`` share: ``input_gates`` (T, N, gates * H), ``h0``
    (N, H), ``weight_hh`` (gates * H, H), ``bias_hh`` None or (gates * H,); returns (N, H)."""
    _check(op_name, input_gates.ndim == 3 and input_gates.shape[2] % gates == 0,
           f"input_gates must be (T, N, {gates} * hidden_size), got {list(input_gates.shape)}")
    _, n, g = input_gates.shape
    h = g // gates
    _check(op_name, tuple(h0.shape) == (n, h), f"h0 must be (N, hidden_size) = {[n, h]}, got {list(h0.shape)}")
    _check(op_name, tuple(weight_hh.shape) == (g, h), f"weight_hh must be ({gates} * hidden_size, "
           f"hidden_size) = {[g, h]}, got {list(weight_hh.shape)}")
    _check(op_name, bias_hh is None or (isinstance(bias_hh, Tensor) and tuple(bias_hh.shape) == (g,)),
           f"bias_hh must be None or ({g},), got {getattr(bias_hh, 'shape', bias_hh)}")
    return n, h


def _backward_args(op_name, rows, grad_state, first, weight_hh, state):
    """The checks the two ``*_layer_backward`` ops share: ``state``/``grad_state`` of one
    (rows, T, N, H) shape, ``first`` (h0 or c0) (N, H), ``weight_hh`` ((rows - 2) * H, H)."""
    _check(op_name, state.ndim == 4 and state.shape[0] == rows and tuple(grad_state.shape) == tuple(state.shape),
           f"state and grad_state must be one ({rows}, T, N, H) shape, got {list(state.shape)} and "
           f"{list(grad_state.shape)}")
    h, gates = state.shape[3], rows - 2
    _check(op_name, tuple(first.shape) == tuple(state.shape[2:]) and tuple(weight_hh.shape) == (gates * h, h),
           f"the initial state must be (N, H) and weight_hh ({gates}H, H) for state {list(state.shape)}, got "
           f"{list(first.shape)} and {list(weight_hh.shape)}")
    _same_dtype(op_name, (grad_state, first, weight_hh, state))


def _stacked(rows, reverse, h0):
    """The per-step values ``rows`` (one list per state row, in the order the steps ran) as one
    (len(rows), T, N, H) state in time order."""
    if not rows[0]:
        return plugtorch.zeros((len(rows), 0, *h0.shape), dtype=h0.dtype, device=h0.device)
    return plugtorch.stack([plugtorch.stack(row[::-1] if reverse else row, 0) for row in rows], 0)


def _lstm_layer_args(input_gates, h0, c0, weight_hh, bias_hh=None, *, reverse=False):
    name = "lstm_layer"
    _tensors(name, input_gates=input_gates, h0=h0, c0=c0, weight_hh=weight_hh)
    n, h = _layer_args(name, 4, input_gates, h0, weight_hh, bias_hh)
    _check(name, tuple(c0.shape) == (n, h), f"c0 must be (N, hidden_size) = {[n, h]}, got {list(c0.shape)}")
    _same_dtype(name, (input_gates, h0, c0, weight_hh, bias_hh))
    return (input_gates, h0, c0, weight_hh, bias_hh), {"reverse": bool(reverse)}


def _previous_h(state, h0, reverse):
    """The h each step started from, in time order: h0 for the first step processed."""
    hs = state[0]
    if reverse:
        return plugtorch.cat([hs[1:], h0.unsqueeze(0)], 0)
    return plugtorch.cat([h0.unsqueeze(0), hs[:-1]], 0)


def _lstm_layer_rule(ctx, grad):
    _, h0, c0, weight_hh, _ = ctx.saved
    state = ctx.output
    steps, n, h = state.shape[1], state.shape[2], state.shape[3]
    need = ctx.needs_input_grad
    packed = lstm_layer_backward(grad, c0, weight_hh, state, **ctx.attrs)
    gates = packed[:steps]
    g_gates = gates if need[0] else None
    g_h0 = packed[steps, :, :h] if need[1] else None
    g_c0 = packed[steps, :, h:2 * h] if need[2] else None
    g_w = None
    if need[3]:
        prev = _previous_h(state, h0, ctx.attrs["reverse"]).reshape(steps * n, h)
        g_w = gates.reshape(steps * n, 4 * h).t().matmul(prev)
    g_b = gates.sum((0, 1)) if need[4] else None
    return g_gates, g_h0, g_c0, g_w, g_b


@op(bind=_lstm_layer_args, derivative=_lstm_layer_rule, save=(1, 2, 3, "output"),
    dtypes="floating; all operands of one dtype")
def lstm_layer(input_gates, h0, c0, weight_hh, bias_hh, *, reverse):
    """One LSTM layer in one direction over a sequence: ``state`` (6, T, N, H) holding per step
    ``h, c, i, f, g, o``, from ``input_gates`` (T, N, 4H: the input projection with its bias),
    the initial ``h0``, ``c0`` (N, H) and the recurrent ``weight_hh`` (4H, H), ``bias_hh`` (4H,
    or None). Steps run from the last to the first with ``reverse`` (the layer's backward
    direction); ``state`` stays in time order either way.

    A backend kernel receives the five as arrays of one floating dtype (bias_hh may be None) and
    ``reverse`` by name, and returns ``state``.
    """
    steps, h = input_gates.shape[0], h0.shape[1]
    hx, cx = h0, c0
    rows: list[list[Tensor]] = [[] for _ in _ROWS]
    w_t = weight_hh.t()
    for t in _steps(steps, reverse):
        gates = input_gates[t] + hx.matmul(w_t)
        if bias_hh is not None:
            gates = gates + bias_hh
        i, f, g, o = (sigmoid(gates[:, :h]), sigmoid(gates[:, h:2 * h]), ew.tanh(gates[:, 2 * h:3 * h]),
                      sigmoid(gates[:, 3 * h:]))
        cx = f * cx + i * g
        hx = o * ew.tanh(cx)
        for row, v in zip(rows, (hx, cx, i, f, g, o)):
            row.append(v)
    return _stacked(rows, reverse, h0)


def _lstm_layer_backward_args(grad_state, c0, weight_hh, state, *, reverse=False):
    name = "lstm_layer_backward"
    _tensors(name, grad_state=grad_state, c0=c0, weight_hh=weight_hh, state=state)
    _backward_args(name, 6, grad_state, c0, weight_hh, state)
    return (grad_state, c0, weight_hh, state), {"reverse": bool(reverse)}


@op(bind=_lstm_layer_backward_args, dtypes="as lstm_layer's")
def lstm_layer_backward(grad_state, c0, weight_hh, state, *, reverse):
    """The gradient of ``lstm_layer`` through its state, packed as one (T + 1, N, 4H) tensor:
    rows 0..T-1 the gradient of each step's gates before their activations (= of
    ``input_gates``), row T the gradients of ``h0`` and ``c0`` in its first 2H columns (zeros
    after). ``lstm_layer``'s rule forms the weight and bias gradients from it with a matmul and a
    sum over the steps.

    A kernel receives the four arrays (one floating dtype) and ``reverse`` by name.
    """
    steps, n, h = state.shape[1], state.shape[2], state.shape[3]
    dh = plugtorch.zeros((n, h), dtype=state.dtype, device=state.device)
    dc = dh
    gates: list = [None] * steps  # by time step, filled last to first
    order = list(_steps(steps, reverse))
    for k in range(steps - 1, -1, -1):  # the forward's steps, last first
        t = order[k]
        c_prev = state[1, order[k - 1]] if k else c0
        c, i, f, g, o = (state[r, t] for r in range(1, 6))
        dh = dh + grad_state[0, t]
        tc = ew.tanh(c)
        dc = dc + grad_state[1, t] + dh * o * (1 - tc * tc)
        di = dc * g + grad_state[2, t]
        df = dc * c_prev + grad_state[3, t]
        dg = dc * i + grad_state[4, t]
        do = dh * tc + grad_state[5, t]
        d = plugtorch.cat([di * i * (1 - i), df * f * (1 - f), dg * (1 - g * g), do * o * (1 - o)], 1)
        gates[t] = d
        dh = d.matmul(weight_hh)
        dc = dc * f
    last = plugtorch.cat([dh, dc, plugtorch.zeros((n, 2 * h), dtype=state.dtype, device=state.device)], 1)
    return plugtorch.stack([*gates, last], 0)


def _gru_layer_args(input_gates, h0, weight_hh, bias_hh=None, *, reverse=False):
    name = "gru_layer"
    _tensors(name, input_gates=input_gates, h0=h0, weight_hh=weight_hh)
    _layer_args(name, 3, input_gates, h0, weight_hh, bias_hh)
    _same_dtype(name, (input_gates, h0, weight_hh, bias_hh))
    return (input_gates, h0, weight_hh, bias_hh), {"reverse": bool(reverse)}


def _gru_layer_rule(ctx, grad):
    _, h0, weight_hh, _ = ctx.saved
    state = ctx.output
    steps, n, h = state.shape[1], state.shape[2], state.shape[3]
    need = ctx.needs_input_grad
    packed = gru_layer_backward(grad, h0, weight_hh, state, **ctx.attrs)
    g_input = packed[:steps, :, :3 * h] if need[0] else None
    g_h0 = packed[steps, :, :h] if need[1] else None
    g_w = g_b = None
    if need[2] or need[3]:  # the hidden side's gates: r and z as the input's, n's before the reset gate
        hidden = plugtorch.cat([packed[:steps, :, :2 * h], packed[:steps, :, 3 * h:]], 2)
        if need[2]:
            prev = _previous_h(state, h0, ctx.attrs["reverse"]).reshape(steps * n, h)
            g_w = hidden.reshape(steps * n, 3 * h).t().matmul(prev)
        if need[3]:
            g_b = hidden.sum((0, 1))
    return g_input, g_h0, g_w, g_b


@op(bind=_gru_layer_args, derivative=_gru_layer_rule, save=(1, 2, "output"),
    dtypes="floating; all operands of one dtype")
def gru_layer(input_gates, h0, weight_hh, bias_hh, *, reverse):
    """One GRU layer in one direction over a sequence: ``state`` (5, T, N, H) holding per step
    ``h, r, z, n`` and ``W_hn h_prev + b_hn``, from ``input_gates`` (T, N, 3H: the input
    projection with its bias, gates r, z, n as torch orders them), the initial ``h0`` (N, H),
    the recurrent ``weight_hh`` (3H, H) and ``bias_hh`` (3H, or None). As torch's cell:
    ``r = sigmoid(x_r + h_r)``, ``z = sigmoid(x_z + h_z)``, ``n = tanh(x_n + r * h_n)``,
    ``h' = (h - n) * z + n``. Steps run from the last to the first with ``reverse``; ``state``
    stays in time order either way.

    A backend kernel receives the four as arrays of one floating dtype (bias_hh may be None) and
    ``reverse`` by name, and returns ``state``.
    """
    steps, h = input_gates.shape[0], h0.shape[1]
    hx = h0
    rows: list[list[Tensor]] = [[] for _ in range(5)]
    w_t = weight_hh.t()
    for t in _steps(steps, reverse):
        gh = hx.matmul(w_t)
        if bias_hh is not None:
            gh = gh + bias_hh
        x = input_gates[t]
        r = sigmoid(x[:, :h] + gh[:, :h])
        z = sigmoid(x[:, h:2 * h] + gh[:, h:2 * h])
        hn = gh[:, 2 * h:]
        n = ew.tanh(x[:, 2 * h:] + r * hn)
        hx = (hx - n) * z + n
        for row, v in zip(rows, (hx, r, z, n, hn)):
            row.append(v)
    return _stacked(rows, reverse, h0)


def _gru_layer_backward_args(grad_state, h0, weight_hh, state, *, reverse=False):
    name = "gru_layer_backward"
    _tensors(name, grad_state=grad_state, h0=h0, weight_hh=weight_hh, state=state)
    _backward_args(name, 5, grad_state, h0, weight_hh, state)
    return (grad_state, h0, weight_hh, state), {"reverse": bool(reverse)}


@op(bind=_gru_layer_backward_args, dtypes="as gru_layer's")
def gru_layer_backward(grad_state, h0, weight_hh, state, *, reverse):
    """The gradient of ``gru_layer`` through its state, packed as one (T + 1, N, 4H) tensor:
    rows 0..T-1 per step the gradients of ``r`` and ``z`` before their sigmoids, of ``n``
    before its tanh (together: of ``input_gates``), and of ``W_hn h + b_hn``; row T the
    gradient of ``h0`` in its first H columns (zeros after). ``gru_layer``'s rule forms the
    weight and bias gradients from it with a matmul and a sum over the steps.

    A kernel receives the four arrays (one floating dtype) and ``reverse`` by name.
    """
    steps, n, h = state.shape[1], state.shape[2], state.shape[3]
    dh = plugtorch.zeros((n, h), dtype=state.dtype, device=state.device)
    gates: list = [None] * steps  # by time step, filled last to first
    order = list(_steps(steps, reverse))
    for k in range(steps - 1, -1, -1):  # the forward's steps, last first
        t = order[k]
        h_prev = state[0, order[k - 1]] if k else h0
        r, z, nn, hn = (state[row, t] for row in range(1, 5))
        dh = dh + grad_state[0, t]
        dn = dh * (1 - z) + grad_state[3, t]
        dz = dh * (h_prev - nn) + grad_state[2, t]
        dn_pre = dn * (1 - nn * nn)
        dr = dn_pre * hn + grad_state[1, t]
        dhn = dn_pre * r + grad_state[4, t]
        dr_pre, dz_pre = dr * r * (1 - r), dz * z * (1 - z)
        gates[t] = plugtorch.cat([dr_pre, dz_pre, dn_pre, dhn], 1)
        dh = dh * z + plugtorch.cat([dr_pre, dz_pre, dhn], 1).matmul(weight_hh)
    last = plugtorch.cat([dh, plugtorch.zeros((n, 3 * h), dtype=state.dtype, device=state.device)], 1)
    return plugtorch.stack([*gates, last], 0)
