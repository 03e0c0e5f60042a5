"""Samples for scaled_dot_product_attention (dropout, which torch cannot reproduce, is checked in
tests/nn/test_attention.py against a mask rebuilt from the same generator)."""
from __future__ import annotations

from ._common import F, Sample, empty, np, scalar

SAMPLES: dict = {}


def _sdpa(**kw):
    return lambda m, q, k, v, *mask: F(m).scaled_dot_product_attention(q, k, v, *mask, **kw)


def _scaled_dot_product_attention(g):
    bool_mask = g.bools(3, 4)
    bool_mask[1] = False  # a query that sees no key: zeros, as torch's CPU kernels give
    float_mask = g.randn(2, 1, 3, 4)
    float_mask[0, 0, 2] = -np.inf
    q, k, v = g.randn(2, 2, 3, 4), g.randn(2, 2, 4, 4), g.randn(2, 2, 4, 3)
    return [
        Sample((q, k, v), call=_sdpa()),
        Sample((q, k, v, bool_mask), call=_sdpa(), desc="bool mask, a fully masked row"),
        Sample((q, k, v, float_mask), call=_sdpa(), desc="float mask (differentiated), -inf entries"),
        Sample((q, k, v), call=_sdpa(is_causal=True), desc="is_causal"),
        Sample((q, k, v), call=_sdpa(scale=0.3), desc="scale"),
        Sample((g.randn(1, 4, 2, 3), g.randn(1, 2, 3, 3), g.randn(1, 2, 3, 2)), call=_sdpa(enable_gqa=True),
               desc="enable_gqa"),
        Sample((g.randn(2, 1, 2, 3), g.randn(1, 2, 3, 3), g.randn(2, 3, 2)), call=_sdpa(),
               desc="batch dims broadcast"),
        Sample((g.randn(2, 2), g.randn(2, 2), g.randn(2, 2)), call=_sdpa(is_causal=True), desc="2-D, small"),
        Sample((empty(0, 3, 4), empty(0, 2, 4), empty(0, 2, 3)), call=_sdpa(), desc="empty batch"),
        Sample((scalar(1.0), scalar(1.0), scalar(1.0)), call=_sdpa(), raises=RuntimeError, desc="0-d inputs"),
        Sample((q, k, v, bool_mask), call=_sdpa(is_causal=True), raises=RuntimeError, desc="mask and is_causal"),
        Sample((q, k[..., :3], v), call=_sdpa(), raises=RuntimeError, desc="embedding sizes differ"),
    ]


SAMPLES.update(scaled_dot_product_attention=_scaled_dot_product_attention)
