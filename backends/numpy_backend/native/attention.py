"""scaled_dot_product_attention and its backward op in C.

Without an attn_mask (minGPT's causal attention, a plain or dropped-out one), head by head
(``_kernels.attention_heads``, ``attention.h``): a head's scores, weights and gradients stay in a
scratch block while its products run, and the heads split over the native kernels' pool. The
kernels alone on minGPT's attention (64 heads of 64 x 32, causal, float32), forward + backward:
1.96 ms against 2.45 for the path below on one thread, 1.29 against 2.12 on two; on the encoder
layer's (the same heads, not causal, dropout, rows 8 KiB apart) 2.72 against 2.85 and 1.36
against 2.36.

Otherwise (an attn_mask) with the softmax over the weights' rows in C (``softmax_rows``,
``softmax_backward_rows``): the products stay NumPy's batched matmuls (``attention.py``), the
five to eight NumPy passes over the (..., L, S) weights between them become one call, each row in
cache while it is worked on, a causal row only as far as it sees (forward 1.44 -> 0.84 ms,
backward 2.57 -> 1.66 ms on the same attention). Both use those rows: float32 exponentials are a
vectorised polynomial (within 2 ulp), summed in double and scaled by the sum's reciprocal, so
values differ from the NumPy kernels' in the last bits (within the tests' tolerance of torch).
Other dtypes run the NumPy kernels."""
from __future__ import annotations

import numpy as np

from .. import attention
from . import FLOATS
from . import _kernels as _loaded

assert _loaded is not None, "imported by native.kernels() only once the extension has loaded"
_kernels = _loaded  # the package's name is None where the extension is off; here it is loaded


def _served(*arrays):
    dtype = arrays[0].dtype
    return dtype in FLOATS and all(a is None or a.dtype == dtype or a.dtype == bool for a in arrays)


def _as_heads(a):
    """``a`` (..., rows, entries) as a 4-d array (two lead dims) with its entries adjacent, as the C
    heads take it: unit lead dims put in front, or the lead dims before the last merged into one
    (views where the strides allow, NumPy's copy elsewhere)."""
    if a.ndim > 4:
        a = a.reshape((-1,) + a.shape[-3:])
    a = a.reshape((1,) * (4 - a.ndim) + a.shape)
    if (a.strides[-1] != a.itemsize and a.shape[-1] > 1) or any(st % a.itemsize for st in a.strides):
        a = np.ascontiguousarray(a)
    return a


def _heads(query, key, value, attn_mask, dropout_mask, grad=None):
    """The operands as 4-d arrays for the C heads (``_kernels.attention_heads``): float, without an
    attn_mask, no dim empty, a dropout mask of their dtype; None where they do not fit (the NumPy
    products around the C softmax rows then run)."""
    if (attn_mask is not None or getattr(_kernels, "attention_heads", None) is None
            or not _served(query, key, value, dropout_mask, grad) or dropout_mask is not None
            and dropout_mask.dtype != query.dtype or 0 in query.shape[-2:] + key.shape[-2:] + value.shape[-1:]):
        return None
    arrays = [None if a is None else _as_heads(a) for a in (query, key, value, dropout_mask, grad)]
    if arrays[3] is not None:
        arrays[3] = np.ascontiguousarray(arrays[3])
    return arrays


def scaled_dot_product_attention(query, key, value, attn_mask, dropout_mask, *, scale, is_causal):
    heads = _heads(query, key, value, attn_mask, dropout_mask)
    if heads is not None:
        q, k, v, drop, _ = heads
        out = np.empty(q.shape[:-1] + v.shape[-1:], q.dtype)
        _kernels.attention_heads(q, k, v, drop, out, scale, is_causal)
        return out.reshape(query.shape[:-1] + value.shape[-1:])
    rows = _kernels.softmax_rows if _served(query, key, value, attn_mask, dropout_mask) else None
    return attention.forward(query, key, value, attn_mask, dropout_mask, scale, is_causal, rows)


def scaled_dot_product_attention_backward(grad, query, key, value, attn_mask, dropout_mask, *, scale, is_causal):
    heads = _heads(query, key, value, attn_mask, dropout_mask, grad)
    if heads is not None:
        q, k, v, drop, g = heads
        out = np.empty(q.size + k.size + v.size, q.dtype)
        gq, gk, gv = out[:q.size], out[q.size:q.size + k.size], out[q.size + k.size:]
        _kernels.attention_heads_backward(g, q, k, v, drop, gq.reshape(q.shape), gk.reshape(k.shape),
                                          gv.reshape(v.shape), scale, is_causal)
        return out
    if not _served(query, grad, key, value, attn_mask, dropout_mask):
        return attention.backward(grad, query, key, value, attn_mask, dropout_mask, scale, is_causal)
    return attention.backward(grad, query, key, value, attn_mask, dropout_mask, scale, is_causal,
                              _kernels.softmax_backward_rows, _kernels.softmax_rows)


ATTENTION_KERNELS = {"scaled_dot_product_attention": scaled_dot_product_attention,
                     "scaled_dot_product_attention_backward": scaled_dot_product_attention_backward}
