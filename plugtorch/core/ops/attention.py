"""scaled_dot_product_attention: softmax(q k^T * scale + mask) v, with dropout on the weights.

The op is pure: its bind draws the dropout mask (from ``generator``, a plugtorch extension
so tests can reproduce it) and passes it as an operand, so a backend kernel, the
decomposition and the derivative all see the same mask. The bind also broadcasts the
batch dims, expands grouped key/value heads (``enable_gqa``) and the mask, so the op
sees one batch shape (their views' backward sums the gradients back).

The derivative recomputes the attention weights from q and k instead of keeping the
(L, S) matrix alive until backward, as flash attention's backward does; it is written
with ops, so double backward works. Rows whose every key is masked out give zeros and
zero gradients, as torch's CPU kernels do (the reference formula in torch's docs would
give NaN there).
"""
from __future__ import annotations

import math

from ..optable import op
from ..tensor import Tensor
from . import elementwise as ew
from ._args import broadcast_shapes
from .activation import softmax
from .creation import arange, rand
from .reduce import amax
from .shape import cat

_NEG_INF = float("-inf")


def _weights(q, k, mask, scale, is_causal):
    """The attention weights softmax(q k^T * scale + mask), 0 on rows with no visible key."""
    s = (q @ k.mT) * scale
    if is_causal:  # top-left aligned: query i sees keys 0..i
        L, S = s.shape[-2], s.shape[-1]
        dev = s._backend.name
        s = ew.where(ew.le(arange(S, device=dev).reshape(1, S), arange(L, device=dev).reshape(L, 1)), s, _NEG_INF)
    if mask is not None:
        s = ew.where(mask, s, _NEG_INF) if mask.dtype.name == "bool" else s + mask
    if (mask is None and not is_causal) or s.shape[-1] == 0:
        return softmax(s, -1)
    dead = ew.eq(amax(s.detach(), -1, keepdim=True), _NEG_INF)
    return ew.where(dead, 0.0, softmax(ew.where(dead, 0.0, s), -1))


def _gradients(g, q, k, v, mask, drop, scale, is_causal):
    """The gradients of q, k, v and of the scores (what a float mask's gradient is)."""
    w = _weights(q, k, mask, scale, is_causal)
    wd = w if drop is None else w * drop
    gv = wd.mT @ g
    gw = g @ v.mT
    if drop is not None:
        gw = gw * drop
    gs = w * (gw - (gw * w).sum(-1, keepdim=True))
    return (gs @ k) * scale, (gs.mT @ q) * scale, gv, gs


def _sdpa_rule(ctx, g):
    q, k, v, mask, drop = ctx.saved
    need = ctx.needs_input_grad
    if need[3]:  # a float mask's gradient: the scores' gradient, which the fused op does not return
        gq, gk, gv, gs = _gradients(g, q, k, v, mask, drop, **ctx.attrs)
        return gq if need[0] else None, gk if need[1] else None, gv if need[2] else None, gs, None
    flat = scaled_dot_product_attention_backward(g, q, k, v, mask, drop, **ctx.attrs)
    grads, at = [], 0
    for t, wanted in zip((q, k, v), need):
        n = t.numel()
        grads.append(flat[at:at + n].view(t.shape) if wanted else None)
        at += n
    return (*grads, None, None)


def _check(query, key, value, attn_mask):
    for what, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"scaled_dot_product_attention(): argument '{what}' must be Tensor, not "
                            f"{type(t).__name__}")
    if min(query.ndim, key.ndim, value.ndim) < 2:
        raise RuntimeError(f"Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
                           f"{query.ndim} key.dim: {key.ndim} and value.dim: {value.ndim} instead.")
    if not (query.dtype is key.dtype is value.dtype):
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                           f"{query.dtype.name} key.dtype: {key.dtype.name} and value.dtype: {value.dtype.name} "
                           "instead.")
    if not query.dtype.is_floating_point:
        raise RuntimeError(f"scaled_dot_product_attention(): expected floating point query, key and value, got "
                           f"{query.dtype.name}")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention(): query {list(query.shape)} and key {list(key.shape)} "
                           f"need the same embedding size (last dim), key and value {list(value.shape)} the same "
                           "sequence length (dim -2)")
    if attn_mask is not None:
        if not isinstance(attn_mask, Tensor):
            raise TypeError(f"scaled_dot_product_attention(): attn_mask must be a Tensor or None, not "
                            f"{type(attn_mask).__name__}")
        if attn_mask.dtype.name != "bool" and attn_mask.dtype is not query.dtype:
            raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                               f"attn_mask.dtype: {attn_mask.dtype.name} and  query.dtype: {query.dtype.name} "
                               "instead.")


def _expand_heads(query, key, value):
    """enable_gqa: repeat each key/value head so that dim -3 matches the query's heads."""
    hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
    if hq % hk or hq % hv:
        raise RuntimeError("Number of heads in key and value must divide the number of heads in query")
    return key.repeat_interleave(hq // hk, -3), value.repeat_interleave(hq // hv, -3)


def _sdpa_args(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False, *,
               generator=None):
    _check(query, key, value, attn_mask)
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    if enable_gqa and min(query.ndim, key.ndim, value.ndim) >= 3 and not (
            query.shape[-3] == key.shape[-3] == value.shape[-3]):
        key, value = _expand_heads(query, key, value)
    batch = broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    L, S = query.shape[-2], key.shape[-2]
    q = query.expand(*batch, L, query.shape[-1])
    k = key.expand(*batch, S, key.shape[-1])
    v = value.expand(*batch, S, value.shape[-1])
    mask = None if attn_mask is None else attn_mask.expand(broadcast_shapes(attn_mask.shape, (*batch, L, S)))
    if mask is not None and tuple(mask.shape) != (*batch, L, S):
        raise RuntimeError(f"scaled_dot_product_attention(): attn_mask of shape {list(attn_mask.shape)} does not "
                           f"broadcast to the attention weights' shape {[*batch, L, S]}")
    drop = None
    if dropout_p > 0.0:
        keep = ew.ge(rand(*batch, L, S, generator=generator, dtype=q.dtype, device=q._backend.name), dropout_p)
        drop = keep.to(q.dtype) * (1.0 / (1.0 - dropout_p)) if dropout_p < 1.0 else keep.to(q.dtype)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    return (q, k, v, mask, drop), {"scale": scale, "is_causal": bool(is_causal)}


@op(bind=_sdpa_args, derivative=_sdpa_rule, save="inputs", exposed=("nn.functional",))
def scaled_dot_product_attention(query, key, value, attn_mask, dropout_mask, *, scale, is_causal):
    """softmax(query @ key^T * scale + attn_mask) @ value, dropout applied to the weights.

    ``attn_mask``: bool (True = may attend) or float (added), broadcast to (..., L, S);
    ``is_causal``: query i attends to keys 0..i; ``scale`` defaults to 1/sqrt(E);
    ``enable_gqa``: key/value heads (dim -3) are shared by groups of query heads.
    ``dropout_p`` always applies (pass 0.0 in evaluation, as with torch); ``generator``
    (a plugtorch.Generator, not in torch) draws its mask. A backend kernel receives query,
    key, value of one batch shape, attn_mask (bool or float, of the full (..., L, S) shape,
    or None) and dropout_mask (the kept weights' scale, 0 or 1/(1-p), or None), and scale
    and is_causal by name.
    """
    w = _weights(query, key, attn_mask, scale, is_causal)
    return (w if dropout_mask is None else w * dropout_mask) @ value


def _sdpa_backward_args(grad, query, key, value, attn_mask=None, dropout_mask=None, *, scale, is_causal):
    for what, t in (("grad", grad), ("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"scaled_dot_product_attention_backward(): argument '{what}' must be Tensor, not "
                            f"{type(t).__name__}")
    _check(query, key, value, attn_mask)
    lead, L, S = tuple(query.shape[:-2]), query.shape[-2], key.shape[-2]
    if not (tuple(key.shape[:-2]) == tuple(value.shape[:-2]) == lead
            and tuple(grad.shape) == (*lead, L, value.shape[-1])
            and all(m is None or tuple(m.shape) == (*lead, L, S) for m in (attn_mask, dropout_mask))):
        raise RuntimeError(f"scaled_dot_product_attention_backward: expected query, key, value of one batch shape, "
                           f"grad of the output's shape and masks of the weights' shape, got query "
                           f"{list(query.shape)}, key {list(key.shape)}, value {list(value.shape)}, grad "
                           f"{list(grad.shape)}")
    return (grad, query, key, value, attn_mask, dropout_mask), {"scale": float(scale), "is_causal": bool(is_causal)}


@op(bind=_sdpa_backward_args, dtypes="as scaled_dot_product_attention's")
def scaled_dot_product_attention_backward(grad, query, key, value, attn_mask, dropout_mask, *, scale, is_causal):
    """The gradients of scaled_dot_product_attention's query, key and value for the gradient
    ``grad`` of its output, flattened and joined into one 1-D tensor in that order (ops return one
    tensor; the forward's rule takes views of it). The operands are the forward's, as its bind
    gave them to the kernel: one batch shape, masks of the weights' full shape.
    """
    gq, gk, gv, _ = _gradients(grad, query, key, value, attn_mask, dropout_mask, scale, is_causal)
    return cat([gq.reshape(-1), gk.reshape(-1), gv.reshape(-1)])
