"""``Transformer`` and its encoder and decoder stacks and layers (torch's submodule names, so
torch state_dicts load).

An encoder layer is self-attention then a feed-forward block; a decoder layer puts attention
over the encoder's output (``memory``) between the two. Each block has dropout and a residual
connection, normalised after (post-norm, the default) or before (``norm_first``) the block.
torch's inference fast path (nested tensors, fused kernels) is not reproduced: evaluation
runs the same computation as training, minus dropout. Where torch's fast path returns
zeros for padded positions of ``src_key_padding_mask``, this returns the computed values
(the positions a model ignores either way).
"""
from __future__ import annotations

import copy

import plugtorch

from .. import functional as F
from .. import init
from .attention import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def _activation(activation):
    """A string names relu or gelu (torch's legacy spelling); anything else is the callable itself."""
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise RuntimeError(f"activation should be relu/gelu, not {activation}")
        return _ACTIVATIONS[activation]
    return activation


def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
    """A (sz, sz) float mask: 0 where j <= i, -inf above the diagonal (position i sees 0..i)."""
    dtype = dtype if dtype is not None else plugtorch.get_default_dtype()
    ones = plugtorch.ones(sz, sz, dtype=plugtorch.bool, device=device)
    return plugtorch.zeros(sz, sz, dtype=dtype, device=device).masked_fill(ones.triu(1), float("-inf"))


def _add_feed_forward_and_norms(layer, blocks, d_model, dim_feedforward, dropout, layer_norm_eps, bias, generator,
                                kw) -> None:
    """A layer's feed-forward (linear1, dropout, linear2), then the LayerNorm and Dropout of each of
    its ``blocks`` residual blocks (norm1.., dropout1..): torch's names, in the order torch registers
    them, which its state_dict keys follow."""
    layer.linear1 = Linear(d_model, dim_feedforward, bias=bias, generator=generator, **kw)
    layer.dropout = Dropout(dropout, generator=generator)
    layer.linear2 = Linear(dim_feedforward, d_model, bias=bias, generator=generator, **kw)
    for i in range(1, blocks + 1):
        setattr(layer, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
    for i in range(1, blocks + 1):
        setattr(layer, f"dropout{i}", Dropout(dropout, generator=generator))


class TransformerEncoderLayer(Module):
    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation=F.relu, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None, generator=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            generator=generator, **kw)
        _add_feed_forward_and_norms(self, 2, d_model, dim_feedforward, dropout, layer_norm_eps, bias, generator, kw)
        self.norm_first = norm_first
        self.activation = _activation(activation)

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


class TransformerDecoderLayer(Module):
    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation=F.relu, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None, generator=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias,
                                            generator=generator, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first,
                                                 bias=bias, generator=generator, **kw)
        _add_feed_forward_and_norms(self, 3, d_model, dim_feedforward, dropout, layer_norm_eps, bias, generator, kw)
        self.norm_first = norm_first
        self.activation = _activation(activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool = False, memory_is_causal: bool = False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=is_causal,
                           need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=is_causal, need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` (each with its own parameters), then ``norm``."""

    def __init__(self, decoder_layer, num_layers: int, norm=None):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal: bool = False):
        # torch compares tgt_mask with the causal mask when tgt_is_causal is None; the hint does not
        # change the result, so that host round trip is not made here (None reads as False)
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                        tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return self.norm(out) if self.norm is not None else out


class Transformer(Module):
    """An encoder stack and a decoder stack, each closed by a LayerNorm (``encoder.norm``,
    ``decoder.norm``); ``custom_encoder``/``custom_decoder`` replace either. Every parameter of
    more than one dim is re-drawn xavier-uniform, as torch's ``_reset_parameters`` does."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation=F.relu, custom_encoder=None, custom_decoder=None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True, device=None, dtype=None,
                 generator=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                      norm_first, bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(
                TransformerEncoderLayer(*layer_args, generator=generator, **kw), num_encoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(
                TransformerDecoderLayer(*layer_args, generator=generator, **kw), num_decoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        self.generator = generator
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal: bool = False):
        if src.dim() == 3 and src.size(0 if self.batch_first else 1) != tgt.size(0 if self.batch_first else 1):
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
        """A (sz, sz) float mask: 0 where j <= i, -inf above the diagonal (position i sees 0..i)."""
        return generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p, generator=self.generator)
