"""scaled_dot_product_attention and its backward op with the softmax over the weights' rows in C
(``softmax_rows``, ``softmax_backward_rows``): the products stay NumPy's batched matmuls
(``attention.py``), the five to eight NumPy passes over the (..., L, S) weights between them
become one call, each row in cache while it is worked on, a causal row only as far as it sees.
The float32 exponentials are a vectorised polynomial (within 2 ulp), summed in double and
scaled by the sum's reciprocal, so values differ from the NumPy kernels' in the last bits
(within the tests' tolerance of torch). Other dtypes run the NumPy kernels. On minGPT's
attention (64 heads of 64 x 32, causal, float32, one thread) the forward took 0.84 ms
instead of 1.44 and the backward 1.66 instead of 2.57 (best of 40, on a loaded machine)."""
from __future__ import annotations

from .. import attention
from . import FLOATS
from . import _kernels as _loaded

assert _loaded is not None, "imported by native.kernels() only once the extension has loaded"
_kernels = _loaded  # the package's name is None where the extension is off; here it is loaded


def _served(*arrays):
    dtype = arrays[0].dtype
    return dtype in FLOATS and all(a is None or a.dtype == dtype or a.dtype == bool for a in arrays)


def scaled_dot_product_attention(query, key, value, attn_mask, dropout_mask, *, scale, is_causal):
    rows = _kernels.softmax_rows if _served(query, key, value, attn_mask, dropout_mask) else None
    return attention.forward(query, key, value, attn_mask, dropout_mask, scale, is_causal, rows)


def scaled_dot_product_attention_backward(grad, query, key, value, attn_mask, dropout_mask, *, scale, is_causal):
    if not _served(query, grad, key, value, attn_mask, dropout_mask):
        return attention.backward(grad, query, key, value, attn_mask, dropout_mask, scale, is_causal)
    return attention.backward(grad, query, key, value, attn_mask, dropout_mask, scale, is_causal,
                              _kernels.softmax_backward_rows, _kernels.softmax_rows)


ATTENTION_KERNELS = {"scaled_dot_product_attention": scaled_dot_product_attention,
                     "scaled_dot_product_attention_backward": scaled_dot_product_attention_backward}
