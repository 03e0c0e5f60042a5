"""The NumPy backend's kernels for ``scaled_dot_product_attention`` and its backward op: the
attention weights in one (..., L, S) buffer, masked, exponentiated and normalised in place,
where the op's decomposition makes a dozen ops and as many temporaries (and graph nodes). The
backward recomputes the weights from q and k rather than keeping them, as the op's rule does.

Each product over the heads is one batched ``np.matmul`` (a BLAS call per head inside NumPy, no
Python loop). ``rows``, where the native kernels are built (``native/attention.py``), is the C
softmax over rows: scale, causal limit, max, exp, sum and divide in one pass per row, and the
softmax's backward in one more; the causal rows' masked halves are never computed (they are
written 0). Without it the same formulas run as NumPy passes over the whole buffer.
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


def _product(a, b):
    """a @ b into a C-contiguous array, which the C rows need (matmul's own result follows its
    inputs' layout in the batch dims)."""
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return np.matmul(a, b, out=np.empty((*lead, a.shape[-2], b.shape[-1]), np.result_type(a, b)))


def _mask_scores(s, mask):
    if mask.dtype == bool:
        np.copyto(s, -np.inf, where=~mask)
    else:
        s += mask


def _weights(q, k, mask, scale, is_causal, rows=None):
    """softmax(q k^T * scale + mask) over the last dim, rows with no visible key all 0."""
    s = _product(q, np.swapaxes(k, -1, -2))
    if not s.shape[-1]:
        return s
    if rows is not None and s.size:
        flat = s.reshape(-1, s.shape[-1])
        if mask is None:
            rows(flat, s.shape[-2], is_causal, scale, True, flat)
        else:  # (the op refuses a mask with is_causal)
            s *= s.dtype.type(scale)
            _mask_scores(s, mask)
            rows(flat, s.shape[-2], False, 1.0, True, flat)
        return s
    s *= s.dtype.type(scale)
    if is_causal:
        s += _causal(s.shape[-2], s.shape[-1], s.dtype)
    if mask is not None:
        _mask_scores(s, mask)
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


def forward(query, key, value, attn_mask, dropout_mask, scale, is_causal, rows=None):
    w = _weights(query, key, attn_mask, scale, is_causal, rows)
    if dropout_mask is not None:
        w *= dropout_mask
    return np.matmul(w, value)


def backward(grad, query, key, value, attn_mask, dropout_mask, scale, is_causal, rows_backward=None, rows=None):
    """The gradients of query, key and value, flattened one after another into one array."""
    lead = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    dtype = query.dtype
    sizes = [math.prod(lead) * a.shape[-2] * a.shape[-1] for a in (query, key, value)]
    out = np.empty(sum(sizes), dtype)
    gq, gk, gv = (out[a:a + n].reshape(*lead, *t.shape[-2:]) for a, n, t in
                  zip((0, sizes[0], sizes[0] + sizes[1]), sizes, (query, key, value)))
    w = _weights(query, key, attn_mask, scale, is_causal, rows)
    gw = _product(grad, np.swapaxes(value, -1, -2))
    if dropout_mask is not None:
        gw *= dropout_mask
        np.matmul(np.swapaxes(w * dropout_mask, -1, -2), grad, out=gv)
    else:
        np.matmul(np.swapaxes(w, -1, -2), grad, out=gv)
    if rows_backward is not None and w.size:  # the scores' gradient, in place, in one pass a row
        flat = gw.reshape(-1, gw.shape[-1])
        rows_backward(flat, w.reshape(flat.shape), w.shape[-2], is_causal and attn_mask is None, scale, flat)
    else:
        row = np.multiply(gw, w).sum(-1, keepdims=True)
        gw -= row
        gw *= w  # the scores' gradient
        gw *= dtype.type(scale)
    np.matmul(gw, key, out=gq)
    np.matmul(np.swapaxes(gw, -1, -2), query, out=gk)
    return out


def scaled_dot_product_attention(query, key, value, attn_mask, dropout_mask, *, scale, is_causal):
    return forward(query, key, value, attn_mask, dropout_mask, scale, is_causal)


def scaled_dot_product_attention_backward(grad, query, key, value, attn_mask, dropout_mask, *, scale, is_causal):
    return backward(grad, query, key, value, attn_mask, dropout_mask, scale, is_causal)


ATTENTION_KERNELS = {"scaled_dot_product_attention": scaled_dot_product_attention,
                     "scaled_dot_product_attention_backward": scaled_dot_product_attention_backward}
