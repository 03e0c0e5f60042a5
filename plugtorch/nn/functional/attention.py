"""``multi_head_attention_forward``: torch's multi-head attention, step for step, on public ops.

Inputs are sequence-first, (L, N, E) (or unbatched (L, E)), as in torch. Masks follow
``nn.MultiheadAttention``'s convention: a bool mask is True where attention is *not*
allowed (the inverse of ``scaled_dot_product_attention``'s), a float mask is added.

With ``need_weights`` the weights are computed explicitly (and returned, averaged over
heads unless ``average_attn_weights=False``); a query row whose every key is masked then
gives NaN, as torch's does. Without it, the op ``scaled_dot_product_attention`` computes
the output (such rows give zeros there, again as torch).
"""
from __future__ import annotations

import math
import warnings

import plugtorch

from ...core.tensor import Tensor

__all__ = ["multi_head_attention_forward"]


def _canonical_mask(mask, name, other, other_name, dtype):
    """A float mask (-inf where a bool mask is True) in ``dtype``, or None."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a Tensor or None, not {type(mask).__name__}")
    if mask.dtype is not plugtorch.bool and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    if other is not None and (other.dtype is plugtorch.bool) != (mask.dtype is plugtorch.bool):
        warnings.warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same type for both "
                      "instead.", stacklevel=4)
    if mask.dtype is plugtorch.bool:
        return plugtorch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))
    return mask


def _in_projection(query, key, value, in_proj_weight, in_proj_bias, use_separate_proj_weight, q_proj_weight,
                   k_proj_weight, v_proj_weight):
    E = query.shape[-1]
    b_q = b_k = b_v = None
    if in_proj_bias is not None:
        b_q, b_k, b_v = in_proj_bias.chunk(3)
    if not use_separate_proj_weight:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        w_q, w_k, w_v = in_proj_weight.chunk(3)
    else:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is True but q_proj_weight, k_proj_weight or "
                                 "v_proj_weight is None")
        w_q, w_k, w_v = q_proj_weight, k_proj_weight, v_proj_weight
    if w_q.shape != (E, E):
        raise AssertionError(f"expecting query weights shape of {(E, E)}, but got {tuple(w_q.shape)}")
    lin = plugtorch.nn.functional.linear
    return lin(query, w_q, b_q), lin(key, w_k, b_k), lin(value, w_v, b_v)


def multi_head_attention_forward(query, key, value, embed_dim_to_check: int, num_heads: int, in_proj_weight,
                                 in_proj_bias, bias_k, bias_v, add_zero_attn: bool, dropout_p: float,
                                 out_proj_weight, out_proj_bias, training: bool = True, key_padding_mask=None,
                                 need_weights: bool = True, attn_mask=None, use_separate_proj_weight: bool = False,
                                 q_proj_weight=None, k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights: bool = True, is_causal: bool = False,
                                 generator=None):
    """Multi-head attention on (L, N, E) query and (S, N, E_k), (S, N, E_v) key and value.

    ``generator`` (not in torch) draws the dropout masks.
    """
    F = plugtorch.nn.functional
    batched = query.ndim == 3
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor, with key and value of the same "
                             f"rank, but received {query.ndim}-D query, {key.ndim}-D key and {value.ndim}-D value")
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if key.shape[:2] != value.shape[:2]:
        raise AssertionError(f"key shape {list(key.shape)} does not match value shape {list(value.shape)}")
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", attn_mask, "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # the op's own causal masking replaces the given (causal) mask
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype)
        is_causal = False if key_padding_mask is not None else is_causal

    q, k, v = _in_projection(query, key, value, in_proj_weight, in_proj_bias, use_separate_proj_weight,
                             q_proj_weight, k_proj_weight, v_proj_weight)
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {list(attn_mask.shape)}, but should be "
                                   f"{[tgt_len, src_len]}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {list(attn_mask.shape)}, but should be "
                                   f"{[bsz * num_heads, tgt_len, src_len]}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")

    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key or value.")
        k = plugtorch.cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = plugtorch.cat([v, bias_v.expand(1, bsz, embed_dim)])
        attn_mask = F.pad(attn_mask, (0, 1)) if attn_mask is not None else None
        key_padding_mask = F.pad(key_padding_mask, (0, 1)) if key_padding_mask is not None else None
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k and bias_v must both be given, or neither")

    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = (k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_k is None else static_k)
    v = (v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_v is None else static_v)
    for what, s in (("static_k", static_k), ("static_v", static_v)):
        if s is not None and (s.shape[0] != bsz * num_heads or s.shape[2] != head_dim):
            raise AssertionError(f"expecting {what} of shape ({bsz * num_heads}, *, {head_dim}), got "
                                 f"{list(s.shape)}")
    if add_zero_attn:
        k = plugtorch.cat([k, plugtorch.zeros(bsz * num_heads, 1, head_dim, dtype=k.dtype, device=k.device)], 1)
        v = plugtorch.cat([v, plugtorch.zeros(bsz * num_heads, 1, head_dim, dtype=v.dtype, device=v.device)], 1)
        attn_mask = F.pad(attn_mask, (0, 1)) if attn_mask is not None else None
        key_padding_mask = F.pad(key_padding_mask, (0, 1)) if key_padding_mask is not None else None
    src_len = k.shape[1]

    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                 f"{tuple(key_padding_mask.shape)}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len)
        kpm = kpm.reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0

    if need_weights:
        scores = (q * math.sqrt(1.0 / head_dim)) @ k.transpose(-2, -1)
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = plugtorch.softmax(scores, -1)
        if dropout_p > 0.0:
            weights = F.dropout(weights, dropout_p, generator=generator)
        out = (weights @ v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = F.linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, embed_dim)
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights

    if attn_mask is not None:
        attn_mask = (attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1
                     else attn_mask.reshape(bsz, num_heads, -1, src_len))
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, generator=generator)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = F.linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, embed_dim)
    return (out if batched else out.squeeze(1)), None
