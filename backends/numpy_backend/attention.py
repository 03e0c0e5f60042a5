"""The NumPy backend's kernels for ``scaled_dot_product_attention`` and its backward op: the
attention weights in one (..., L, S) buffer, masked, exponentiated and normalised in place,
where the op's decomposition makes a dozen ops and as many temporaries (and graph nodes). The
backward recomputes the weights from q and k rather than keeping them, as the op's rule does.
"""
from __future__ import annotations

import functools
import math

import numpy as np


@functools.lru_cache(maxsize=32)
def _causal(length, source, dtype):
    """0 where query i may see key j (j <= i, top-left aligned), -inf above: added to the scores."""
    above = np.triu(np.ones((length, source), dtype=bool), 1)
    out = np.where(above, -np.inf, 0).astype(dtype)
    out.flags.writeable = False
    return out


def _weights(q, k, mask, scale, is_causal):
    """softmax(q k^T * scale + mask) over the last dim, rows with no visible key all 0."""
    s = np.matmul(q, np.swapaxes(k, -1, -2))
    s *= s.dtype.type(scale)
    if is_causal:
        s += _causal(s.shape[-2], s.shape[-1], s.dtype)
    if mask is not None:
        if mask.dtype == bool:
            np.copyto(s, -np.inf, where=~mask)
        else:
            s += mask
    if not s.shape[-1]:
        return s
    top = s.max(-1, keepdims=True)
    dead = top == -np.inf
    masked = is_causal or mask is not None
    if masked:
        top[dead] = 0  # a row with no visible key: exp(-inf - 0) = 0 everywhere, no NaN
    s -= top
    np.exp(s, out=s)
    total = s.sum(-1, keepdims=True)
    if masked:
        total[dead] = 1
    s /= total
    return s


def scaled_dot_product_attention(query, key, value, attn_mask, dropout_mask, *, scale, is_causal):
    w = _weights(query, key, attn_mask, scale, is_causal)
    if dropout_mask is not None:
        w *= dropout_mask
    return np.matmul(w, value)


def scaled_dot_product_attention_backward(grad, query, key, value, attn_mask, dropout_mask, *, scale, is_causal):
    """The gradients of query, key and value, flattened one after another into one array."""
    lead = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    dtype = query.dtype
    sizes = [math.prod(lead) * a.shape[-2] * a.shape[-1] for a in (query, key, value)]
    out = np.empty(sum(sizes), dtype)
    gq, gk, gv = (out[a:a + n].reshape(*lead, *t.shape[-2:]) for a, n, t in
                  zip((0, sizes[0], sizes[0] + sizes[1]), sizes, (query, key, value)))
    w = _weights(query, key, attn_mask, scale, is_causal)
    gw = np.matmul(grad, np.swapaxes(value, -1, -2))
    if dropout_mask is not None:
        gw *= dropout_mask
        np.matmul(np.swapaxes(w * dropout_mask, -1, -2), grad, out=gv)
    else:
        np.matmul(np.swapaxes(w, -1, -2), grad, out=gv)
    row = np.multiply(gw, w).sum(-1, keepdims=True)
    gw -= row
    gw *= w  # the scores' gradient
    gw *= dtype.type(scale)
    np.matmul(gw, key, out=gq)
    np.matmul(np.swapaxes(gw, -1, -2), query, out=gk)
    return out


ATTENTION_KERNELS = {"scaled_dot_product_attention": scaled_dot_product_attention,
                     "scaled_dot_product_attention_backward": scaled_dot_product_attention_backward}
