"""ONNX for the plugtorch.nn layers a trace keeps as one ``call_module`` node.

Most layers are their functional form with the layer's parameters (``Linear`` is ``linear``);
the recurrent layers map to ONNX's LSTM, GRU and RNN nodes, one per layer, with the gates
reordered from torch's layout to ONNX's.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import plugtorch
from plugtorch import nn

from ._builder import V, numpy_dtype
from ._functions import CONVERTERS, conv

# module type -> (function converter name, the module's arguments after the input(s))
_AS_FUNCTION: dict[type, tuple[str, Callable[[Any], dict]]] = {
    nn.Linear: ("linear", lambda m: {"weight": m.weight, "bias": m.bias}),
    nn.Embedding: ("embedding", lambda m: {"weight": m.weight, "max_norm": m.max_norm}),
    nn.LayerNorm: ("layer_norm", lambda m: {"normalized_shape": m.normalized_shape, "weight": m.weight,
                                            "bias": m.bias, "eps": m.eps}),
    nn.MaxPool1d: ("max_pool1d", lambda m: _pool(m, dilation=m.dilation, return_indices=m.return_indices)),
    nn.MaxPool2d: ("max_pool2d", lambda m: _pool(m, dilation=m.dilation, return_indices=m.return_indices)),
    nn.AvgPool1d: ("avg_pool1d", lambda m: _pool(m, count_include_pad=m.count_include_pad)),
    nn.AvgPool2d: ("avg_pool2d", lambda m: _pool(m, count_include_pad=m.count_include_pad,
                                                 divisor_override=m.divisor_override)),
    nn.AdaptiveAvgPool1d: ("adaptive_avg_pool1d", lambda m: {"output_size": m.output_size}),
    nn.AdaptiveAvgPool2d: ("adaptive_avg_pool2d", lambda m: {"output_size": m.output_size}),
    nn.ReLU: ("relu", lambda m: {}),
    nn.Sigmoid: ("sigmoid", lambda m: {}),
    nn.Tanh: ("tanh", lambda m: {}),
    nn.SiLU: ("silu", lambda m: {}),
    nn.ReLU6: ("relu6", lambda m: {}),
    nn.Hardtanh: ("hardtanh", lambda m: {"min_val": m.min_val, "max_val": m.max_val}),
    nn.ELU: ("elu", lambda m: {"alpha": m.alpha}),
    nn.GELU: ("gelu", lambda m: {"approximate": m.approximate}),
    nn.LeakyReLU: ("leaky_relu", lambda m: {"negative_slope": m.negative_slope}),
    nn.Softmax: ("softmax", lambda m: {"dim": m.dim}),
    nn.LogSoftmax: ("log_softmax", lambda m: {"dim": m.dim}),
    nn.Flatten: ("flatten", lambda m: {"start_dim": m.start_dim, "end_dim": m.end_dim}),
    nn.Identity: ("clone", lambda m: {}),
    nn.Dropout: ("dropout", lambda m: {"training": False}),
    nn.Dropout1d: ("dropout", lambda m: {"training": False}),
    nn.Dropout2d: ("dropout", lambda m: {"training": False}),
    nn.Dropout3d: ("dropout", lambda m: {"training": False}),
}


def _pool(m: Any, **extra: Any) -> dict:
    return {"kernel_size": m.kernel_size, "stride": m.stride, "padding": m.padding, "ceil_mode": m.ceil_mode, **extra}


def convert_module(cx: Any, m: Any, args: tuple, kwargs: dict) -> Any:
    """The ONNX of leaf layer ``m`` called with ``args``; raises where it has none."""
    kind = type(m)
    if kind in _AS_FUNCTION:
        name, attrs = _AS_FUNCTION[kind]
        params = {k: (cx.parameter(v) if isinstance(v, plugtorch.Tensor) else v) for k, v in attrs(m).items()}
        return CONVERTERS[name](cx, args[:1], {**params, **kwargs})
    if isinstance(m, nn.modules.conv._ConvNd) and kind.__name__.startswith("Conv") and "Transpose" not in kind.__name__:
        if m.padding_mode != "zeros":
            raise cx.unmapped(f"with padding_mode={m.padding_mode!r}")
        bias = cx.parameter(m.bias) if m.bias is not None else None
        return conv(cx, args[0], cx.parameter(m.weight), bias, m.stride, m.padding, m.dilation, m.groups)
    if kind.__name__.startswith("BatchNorm") and isinstance(m, nn.modules.batchnorm._BatchNorm):
        if m.training or m.running_mean is None:
            raise cx.unmapped("in training mode or without running statistics (batch statistics)")
        p = [cx.parameter(t) if t is not None else None for t in (m.weight, m.bias, m.running_mean, m.running_var)]
        return CONVERTERS["batch_norm"](cx, (args[0], p[2], p[3], p[0], p[1], False, 0.1, m.eps), {})
    if kind in (nn.LSTM, nn.GRU, nn.RNN):
        return _recurrent(cx, m, args[0], args[1] if len(args) > 1 else kwargs.get("hx"))
    raise cx.unmapped("(no ONNX mapping for this layer)")


# torch's gate blocks in the order ONNX wants them
_GATES = {"LSTM": [0, 3, 1, 2], "GRU": [1, 0, 2], "RNN": [0]}


def _recurrent(cx: Any, m: Any, x: V, hx: Any) -> tuple:
    if getattr(m, "proj_size", 0):
        raise cx.unmapped("with proj_size")
    b, mode = cx.b, type(m).__name__
    out_ex, h_ex = cx.ex
    dirs, H, L = 2 if m.bidirectional else 1, m.hidden_size, m.num_layers
    if m.batch_first:
        x = b.op("Transpose", [x], x.ex.transpose(0, 1), perm=[1, 0, 2])
    if hx is not None and mode == "LSTM":
        h0, c0 = hx
    else:
        h0, c0 = hx, None
    seq_ex = out_ex.transpose(0, 1) if m.batch_first else out_ex
    hs, cs = [], []
    for layer in range(L):
        w, r, bias = [], [], []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            w.append(_gates(getattr(m, "weight_ih" + sfx), mode))
            r.append(_gates(getattr(m, "weight_hh" + sfx), mode))
            if m.bias:
                bias.append(np.concatenate([_gates(getattr(m, "bias_ih" + sfx), mode),
                                            _gates(getattr(m, "bias_hh" + sfx), mode)]))
        dt = x.dtype
        inputs: list[V | None] = [x, cx.array(np.stack(w), dt, f"{cx.node_name}.W{layer}"),
                                  cx.array(np.stack(r), dt, f"{cx.node_name}.R{layer}"),
                                  cx.array(np.stack(bias), dt, f"{cx.node_name}.B{layer}") if m.bias else None, None]
        for state in (h0, c0) if mode == "LSTM" else (h0,):
            inputs.append(None if state is None else _layer_slice(cx, state, layer, dirs, h_ex))
        attrs: dict[str, Any] = {"hidden_size": H, "direction": "bidirectional" if dirs == 2 else "forward"}
        if mode == "GRU":
            attrs["linear_before_reset"] = 1  # torch applies the reset gate after the recurrent matmul
        if mode == "RNN":
            attrs["activations"] = ["Tanh" if m.nonlinearity == "tanh" else "Relu"] * dirs
        n_out = 3 if mode == "LSTM" else 2
        y_ex = seq_ex.reshape(seq_ex.shape[0], seq_ex.shape[1], dirs, H).transpose(1, 2)
        state_ex = h_ex[0] if mode == "LSTM" else h_ex
        outs = b.op_n(mode, inputs, [y_ex] + [state_ex[:dirs]] * (n_out - 1), mode.lower(), **attrs)
        y = b.op("Transpose", [outs[0]], y_ex.transpose(1, 2), perm=[0, 2, 1, 3])  # seq, batch, dirs, H
        x = b.op("Reshape", [y, b.ints([0, 0, -1])], seq_ex)
        hs.append(outs[1])
        if mode == "LSTM":
            cs.append(outs[2])
        if layer + 1 < L and m.dropout and m.training:
            raise cx.unmapped("with dropout between layers in training mode")
    out = b.op("Transpose", [x], out_ex, perm=[1, 0, 2]) if m.batch_first else x
    h = hs[0] if L == 1 else b.op("Concat", hs, h_ex[0] if mode == "LSTM" else h_ex, axis=0)
    if mode != "LSTM":
        return out, h
    c = cs[0] if L == 1 else b.op("Concat", cs, h_ex[1], axis=0)
    return out, (h, c)


def _gates(t: Any, mode: str) -> np.ndarray:
    a = t.detach().cpu().numpy()
    blocks = np.split(a, len(_GATES[mode]), axis=0)
    return np.concatenate([blocks[i] for i in _GATES[mode]], axis=0).astype(numpy_dtype(t.dtype))


def _layer_slice(cx: Any, state: V, layer: int, dirs: int, h_ex: Any) -> V:
    b = cx.b
    lo = layer * dirs
    return b.op("Slice", [state, b.ints([lo]), b.ints([lo + dirs]), b.ints([0])], state.ex[lo:lo + dirs])
