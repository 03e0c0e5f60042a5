"""``MultiheadAttention``: attention over several heads with learned in- and out-projections.

torch's parameters and initialisation: ``in_proj_weight`` (3E, E) when key and value have
the query's size, else ``q_proj_weight``/``k_proj_weight``/``v_proj_weight``; ``in_proj_bias``
(3E) zero; ``out_proj`` a Linear whose bias is zeroed; ``bias_k``/``bias_v`` (1, 1, E) with
``add_bias_kv``. Projection weights are xavier-uniform, bias_k/bias_v xavier-normal.
"""
from __future__ import annotations

import plugtorch

from ...core.tensor import Tensor
from .. import init
from ..functional.attention import multi_head_attention_forward
from ..parameter import Parameter
from .linear import Linear
from .module import Module


class NonDynamicallyQuantizableLinear(Linear):
    """``out_proj``'s class in torch (a plain Linear here: there is no quantisation to avoid)."""


class MultiheadAttention(Module):
    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device=None, dtype=None,
                 generator=None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        # Optional plugtorch.Generator for the initialisation and the dropout masks (not in torch).
        self.generator = generator
        kw = {"device": device, "dtype": dtype}
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(plugtorch.empty(embed_dim, embed_dim, **kw))
            self.k_proj_weight = Parameter(plugtorch.empty(embed_dim, self.kdim, **kw))
            self.v_proj_weight = Parameter(plugtorch.empty(embed_dim, self.vdim, **kw))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(plugtorch.empty(3 * embed_dim, embed_dim, **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(plugtorch.empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, generator=generator, **kw)
        if add_bias_kv:
            self.bias_k: Parameter | None = Parameter(plugtorch.empty(1, 1, embed_dim, **kw))
            self.bias_v: Parameter | None = Parameter(plugtorch.empty(1, 1, embed_dim, **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        g = self.generator
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight, generator=g)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w, generator=g)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k, generator=g)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v, generator=g)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None = None,
                need_weights: bool = True, attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """(output, weights or None); inputs (L, N, E) — (N, L, E) with batch_first — or unbatched (L, E)."""
        batched = query.ndim == 3
        if self.batch_first and batched:
            # keep key is value (and query is key) so the projections see the same tensors
            if key is value:
                if query is key:
                    query = key = value = query.transpose(1, 0)
                else:
                    query, key = query.transpose(1, 0), key.transpose(1, 0)
                    value = key
            else:
                query, key, value = (x.transpose(1, 0) for x in (query, key, value))
        out, weights = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
            self.bias_k, self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal, generator=self.generator)
        return (out.transpose(1, 0) if self.batch_first and batched else out), weights

