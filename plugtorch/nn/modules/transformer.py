"""``TransformerEncoderLayer`` and ``TransformerEncoder`` (torch's submodule names, so torch
state_dicts load).

One layer is self-attention then a feed-forward block, each with dropout and a residual
connection, normalised after (post-norm, the default) or before (``norm_first``) each block.
torch's inference fast path (nested tensors, fused kernels) is not reproduced: evaluation
runs the same computation as training, minus dropout. Where torch's fast path returns
zeros for padded positions of ``src_key_padding_mask``, this returns the computed values
(the positions a model ignores either way).
"""
from __future__ import annotations

import copy

import plugtorch

from .. import functional as F
from .attention import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
    """A (sz, sz) float mask: 0 where j <= i, -inf above the diagonal (position i sees 0..i)."""
    dtype = dtype if dtype is not None else plugtorch.get_default_dtype()
    ones = plugtorch.ones(sz, sz, dtype=plugtorch.bool, device=device)
    return plugtorch.zeros(sz, sz, dtype=dtype, device=device).masked_fill(ones.triu(1), float("-inf"))


class TransformerEncoderLayer(Module):
    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation=F.relu, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None, generator=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            generator=generator, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, generator=generator, **kw)
        self.dropout = Dropout(dropout, generator=generator)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, generator=generator, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout, generator=generator)
        self.dropout2 = Dropout(dropout, generator=generator)
        if isinstance(activation, str):
            if activation not in _ACTIVATIONS:
                raise RuntimeError(f"activation should be relu/gelu, not {activation}")
            activation = _ACTIVATIONS[activation]
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` (each with its own parameters), then ``norm``.

    ``enable_nested_tensor`` and ``mask_check`` are accepted for torch's signature; they
    steer torch's inference fast path, which is not reproduced (see the module docstring).
    """

    def __init__(self, encoder_layer, num_layers: int, norm=None, enable_nested_tensor: bool = True,
                 mask_check: bool = True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        # is_causal is a hint that ``mask`` is the causal mask; the result is the same either way
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return self.norm(out) if self.norm is not None else out
