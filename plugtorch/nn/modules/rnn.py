"""Recurrent layers: ``RNN``, ``LSTM``, ``GRU`` (stacked, bidirectional, dropout between layers,
LSTM projections) and the single-step ``RNNCell``, ``LSTMCell``, ``GRUCell``.

Parameters carry torch's names (``weight_ih_l0``, ``bias_hh_l1_reverse``, ``weight_hr_l0``...),
shapes, gate order (LSTM: input, forget, cell, output; GRU: reset, update, new) and
initialisation (every parameter U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))), so a torch
``state_dict`` loads and gives torch's outputs.

Each layer computes the input projection of the whole sequence as one matmul, then steps
through time for the recurrent part only: an LSTM layer without projections as one op,
``lstm_layer`` (a backend may run its time loop as one call), a GRU layer as ``gru_layer``, the
others step by step.
``generator`` (not in torch) seeds the initialisation and the dropout masks between layers.
A ``PackedSequence`` input steps every layer through time with the batch shrinking as the
packed layout does (``_packed_direction``); its output is packed the same way.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import plugtorch

from ...core.ops.recurrent import gru_layer, lstm_layer
from ...core.tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import Module

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _rnn_step(nonlinearity):
    act = plugtorch.tanh if nonlinearity == "tanh" else plugtorch.relu

    def step(xw, h, c, w_hh, b_hh):
        gh = F.linear(h, w_hh, b_hh)
        return act(xw + gh), None
    return step


def _lstm_step(w_hr):
    def step(xw, h, c, w_hh, b_hh):
        i, f, g, o = (xw + F.linear(h, w_hh, b_hh)).chunk(4, -1)
        c = plugtorch.sigmoid(f) * c + plugtorch.sigmoid(i) * plugtorch.tanh(g)
        h = plugtorch.sigmoid(o) * plugtorch.tanh(c)
        return (h if w_hr is None else F.linear(h, w_hr)), c
    return step


def _gru_step(xw, h, c, w_hh, b_hh):
    xr, xz, xn = xw.chunk(3, -1)
    hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r = plugtorch.sigmoid(xr + hr)
    z = plugtorch.sigmoid(xz + hz)
    n = plugtorch.tanh(xn + r * hn)
    return (1 - z) * n + z * h, None


class RNNBase(Module):
    """The shared machinery of RNN, LSTM and GRU; ``mode`` is 'RNN_TANH', 'RNN_RELU', 'LSTM' or 'GRU'."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None, generator=None) -> None:
        super().__init__()
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", stacklevel=2)
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError("hidden_size must be an integer greater than zero")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError("num_layers must be an integer greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        self.generator = generator
        directions = 2 if bidirectional else 1
        out_size = proj_size or hidden_size
        gate_size = _GATES[mode] * hidden_size
        self._flat_weights_names: list[str] = []
        for layer in range(num_layers):
            layer_in = input_size if layer == 0 else out_size * directions
            for d in range(directions):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                shapes: list[tuple[str, tuple[int, ...]]] = [("weight_ih", (gate_size, layer_in)),
                                                            ("weight_hh", (gate_size, out_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, name + sfx, Parameter(plugtorch.empty(*shape, device=device, dtype=dtype)))
                    self._flat_weights_names.append(name + sfx)
        self.reset_parameters(generator)

    def reset_parameters(self, generator=None) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv, generator=generator)

    def flatten_parameters(self) -> None:
        """A no-op kept for torch code that calls it (there are no fused cuDNN buffers here)."""

    @property
    def all_weights(self) -> list[list[Parameter]]:
        per = len(self._flat_weights_names) // (self.num_layers * (2 if self.bidirectional else 1))
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[i:i + per]] for i in range(0, len(names), per)]

    # -- forward ---------------------------------------------------------------------------

    def _cell(self, sfx):
        w = lambda name: getattr(self, name + sfx) if hasattr(self, name + sfx) else None
        if self.mode == "LSTM":
            step = _lstm_step(w("weight_hr"))
        elif self.mode == "GRU":
            step = _gru_step
        else:
            step = _rnn_step("tanh" if self.mode == "RNN_TANH" else "relu")
        return w("weight_ih"), w("bias_ih"), w("weight_hh"), w("bias_hh"), step

    def _run_direction(self, x, h, c, sfx, reverse):
        """One layer in one direction over x (L, N, F): outputs (L, N, H_out), last h, last c."""
        w_ih, b_ih, w_hh, b_hh, step = self._cell(sfx)
        xw = F.linear(x, w_ih, b_ih)                        # every time step's input projection at once
        if self.mode == "LSTM" and not self.proj_size and x.shape[0]:
            # the time loop as one op (a backend runs it as one call); state[0] is the output
            state = lstm_layer(xw, h, c, w_hh, b_hh, reverse=reverse)
            last = 0 if reverse else -1
            return state[0], state[0, last], state[1, last]
        if self.mode == "GRU" and x.shape[0]:
            state = gru_layer(xw, h, w_hh, b_hh, reverse=reverse)
            return state[0], state[0, 0 if reverse else -1], c
        steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
        outs = []
        for t in steps:
            h, c_new = step(xw[t], h, c, w_hh, b_hh)
            c = c_new if c_new is not None else c
            outs.append(h)
        if reverse:
            outs.reverse()  # in time order
        out = plugtorch.stack(outs, 0) if outs else plugtorch.zeros(0, x.shape[1], h.shape[-1], dtype=x.dtype,
                                                                   device=x.device)
        return out, h, c

    def _packed_direction(self, data, sizes, h0, c0, sfx, reverse):
        """One layer in one direction over packed ``data``: packed outputs, last valid h and c per
        sequence. Step t runs the first sizes[t] rows; a sequence's state stops at its last step."""
        w_ih, b_ih, w_hh, b_hh, step = self._cell(sfx)
        xw = F.linear(data, w_ih, b_ih)
        starts = [0]
        for bs in sizes[:-1]:
            starts.append(starts[-1] + bs)
        order = range(len(sizes) - 1, -1, -1) if reverse else range(len(sizes))
        outs, done_h, done_c = [], [], []
        h = h0[:sizes[-1]] if reverse else h0
        c = None if c0 is None else (c0[:sizes[-1]] if reverse else c0)
        for t in order:
            bs = sizes[t]
            if reverse and bs > h.shape[0]:    # sequences that start (from their end) here
                h = plugtorch.cat([h, h0[h.shape[0]:bs]], 0)
                c = None if c is None else plugtorch.cat([c, c0[c.shape[0]:bs]], 0)
            elif not reverse and bs < h.shape[0]:  # sequences that ended at the step before
                done_h.append(h[bs:])
                h = h[:bs]
                if c is not None:
                    done_c.append(c[bs:])
                    c = c[:bs]
            h, c_new = step(xw[starts[t]:starts[t] + bs], h, c, w_hh, b_hh)
            c = c_new if c_new is not None else c
            outs.append(h)
        if reverse:
            outs.reverse()
        h_n = plugtorch.cat([h, *done_h[::-1]], 0)
        c_n = None if c is None else plugtorch.cat([c, *done_c[::-1]], 0)
        return plugtorch.cat(outs, 0), h_n, c_n

    def _forward_packed(self, input: PackedSequence, hx):
        data, sizes = input.data, [int(v) for v in input.batch_sizes.tolist()]
        if data.ndim != 2 or data.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{data.shape[-1]}")
        directions = 2 if self.bidirectional else 1
        layers, n = self.num_layers * directions, sizes[0]
        out_size = self.proj_size or self.hidden_size
        if hx is None:
            h0 = plugtorch.zeros(layers, n, out_size, dtype=data.dtype, device=data.device)
            c0 = plugtorch.zeros(layers, n, self.hidden_size, dtype=data.dtype, device=data.device) \
                if self.mode == "LSTM" else None
        else:
            if self.mode == "LSTM" and not (isinstance(hx, tuple) and len(hx) == 2):
                raise RuntimeError("LSTM: hx must be a tuple (h_0, c_0)")
            h0, c0 = hx if self.mode == "LSTM" else (hx, None)
            for what, s, size in (("hidden", h0, out_size), ("cell", c0, self.hidden_size)):
                if s is not None and tuple(s.shape) != (layers, n, size):
                    raise RuntimeError(f"Expected {what} size {(layers, n, size)}, got {list(s.shape)}")
            if input.sorted_indices is not None:  # the caller's batch order -> the packed order
                h0 = h0.index_select(1, input.sorted_indices)
                c0 = c0.index_select(1, input.sorted_indices) if c0 is not None else None
        x, h_n, c_n = self._layers(data, h0, c0, lambda x, h, c, sfx, reverse:
                                   self._packed_direction(x, sizes, h, c, sfx, reverse=reverse))
        output = PackedSequence(x, input.batch_sizes, input.sorted_indices, input.unsorted_indices)
        if input.unsorted_indices is not None:  # back to the caller's batch order
            h_n = h_n.index_select(1, input.unsorted_indices)
            c_n = c_n.index_select(1, input.unsorted_indices) if c_n is not None else None
        return output, ((h_n, c_n) if self.mode == "LSTM" else h_n)

    def _layers(self, x, h0, c0, run_direction):
        """Every layer and direction over x: ``run_direction(x, h, c, suffix, reverse)`` gives one
        direction's (output, last h, last c); dropout between layers. The last layer's output, h_n
        and c_n (None but for LSTM)."""
        directions = 2 if self.bidirectional else 1
        hs, cs = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(directions):
                k = layer * directions + d
                out, h, c = run_direction(x, h0[k], c0[k] if c0 is not None else None,
                                          f"_l{layer}" + ("_reverse" if d else ""), d == 1)
                outs.append(out)
                hs.append(h)
                cs.append(c)
            x = outs[0] if directions == 1 else plugtorch.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True, generator=self.generator)
        return x, plugtorch.stack(hs, 0), plugtorch.stack(cs, 0) if self.mode == "LSTM" else None

    def _check(self, input, hx):
        is_batched = input.ndim == 3
        if input.ndim not in (2, 3):
            raise ValueError(f"{self._get_name()}: Expected input to be 2D or 3D, got {input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{input.shape[-1]}")
        states = hx if isinstance(hx, tuple) else (hx,) if hx is not None else ()
        if self.mode == "LSTM" and hx is not None and not (isinstance(hx, tuple) and len(hx) == 2):
            raise RuntimeError("LSTM: hx must be a tuple (h_0, c_0)")
        for s in states:
            if s.ndim != (3 if is_batched else 2):
                raise RuntimeError(f"For {'batched 3-D' if is_batched else 'unbatched 2-D'} input, hx should also "
                                   f"be {'3-D' if is_batched else '2-D'} but got {s.ndim}-D tensor")
        return is_batched

    def forward(self, input: Tensor | PackedSequence, hx=None) -> tuple[Any, Any]:
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        is_batched = self._check(input, hx)
        x = input if is_batched else input.unsqueeze(1)
        if is_batched and self.batch_first:
            x = x.transpose(0, 1)
        if x.shape[0] == 0:  # as torch: no step to run, not an empty output
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        directions = 2 if self.bidirectional else 1
        n, out_size = x.shape[1], self.proj_size or self.hidden_size
        layers = self.num_layers * directions
        h0 = c0 = None
        if hx is not None:
            h0, c0 = hx if self.mode == "LSTM" else (hx, None)
            if not is_batched:
                h0 = h0.unsqueeze(1)
                c0 = c0.unsqueeze(1) if c0 is not None else None
            for what, s, size in (("hidden", h0, out_size), ("cell", c0, self.hidden_size)):
                if s is not None and tuple(s.shape) != (layers, n, size):
                    raise RuntimeError(f"Expected {what} size {(layers, n, size)}, got {list(s.shape)}")
        else:
            h0 = plugtorch.zeros(layers, n, out_size, dtype=x.dtype, device=x.device)
            if self.mode == "LSTM":
                c0 = plugtorch.zeros(layers, n, self.hidden_size, dtype=x.dtype, device=x.device)
        x, h_n, c_n = self._layers(x, h0, c0, self._run_direction)
        output = x.transpose(0, 1) if is_batched and self.batch_first else x
        if not is_batched:
            output, h_n = output.squeeze(1), h_n.squeeze(1)
            c_n = c_n.squeeze(1) if c_n is not None else None
        return output, ((h_n, c_n) if self.mode == "LSTM" else h_n)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """Elman RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None, generator=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size,
                         num_layers, bias, batch_first, dropout, bidirectional, 0, device, dtype, generator)
        self.nonlinearity = nonlinearity

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s if self.nonlinearity == "tanh" else s + f", nonlinearity={self.nonlinearity}"


class LSTM(RNNBase):
    """LSTM; with ``proj_size`` > 0 the hidden state is projected (weight_hr_l{k}) to that size."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None, generator=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype, generator)


class GRU(RNNBase):
    """GRU with torch's gate order (reset, update, new); the reset gate scales the recurrent term."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None, generator=None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         0, device, dtype, generator)


# -- cells ---------------------------------------------------------------------------------------

class RNNCellBase(Module):
    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None, dtype=None,
                 generator=None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        gate = num_chunks * hidden_size
        self.weight_ih = Parameter(plugtorch.empty(gate, input_size, device=device, dtype=dtype))
        self.weight_hh = Parameter(plugtorch.empty(gate, hidden_size, device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(plugtorch.empty(gate, device=device, dtype=dtype))
            self.bias_hh = Parameter(plugtorch.empty(gate, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters(generator)

    def reset_parameters(self, generator=None) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv, generator=generator)

    def _batched(self, input, hx):
        if input.ndim not in (1, 2):
            raise ValueError(f"{self._get_name()}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[-1]} expected {self.input_size}")
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        states = None
        if hx is not None:
            states = tuple(s if batched else s.unsqueeze(0) for s in (hx if isinstance(hx, tuple) else (hx,)))
        return x, states, batched

    def _zeros(self, x):
        return plugtorch.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        return s


class RNNCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None, generator=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype, generator)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, states, batched = self._batched(input, hx)
        h = states[0] if states else self._zeros(x)
        h, _ = _rnn_step(self.nonlinearity)(F.linear(x, self.weight_ih, self.bias_ih), h, None,
                                             self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None,
                 generator=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype, generator)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        x, states, batched = self._batched(input, hx)
        h, c = states if states else (self._zeros(x), self._zeros(x))
        h, c = _lstm_step(None)(F.linear(x, self.weight_ih, self.bias_ih), h, c, self.weight_hh, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None,
                 generator=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype, generator)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, states, batched = self._batched(input, hx)
        h = states[0] if states else self._zeros(x)
        h, _ = _gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, None, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
