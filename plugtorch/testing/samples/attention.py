"""Samples for scaled_dot_product_attention (dropout, which torch cannot reproduce, is checked in
tests/nn/test_attention.py against a mask rebuilt from the same generator)."""
from __future__ import annotations

from ._common import F, Sample, Waiver, empty, is_torch, np, scalar

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


def _backward(**kw):
    def f(m, grad, q, k, v, *mask):
        if is_torch(m):
            q, k, v = (t if t.requires_grad else t.detach().requires_grad_() for t in (q, k, v))
            out = m.nn.functional.scaled_dot_product_attention(q, k, v, *mask, **kw)
            grads = m.autograd.grad(out, (q, k, v), grad, create_graph=True)
            return m.cat([t.reshape(-1) for t in grads])
        from plugtorch.core.ops.attention import scaled_dot_product_attention_backward
        scale = kw.get("scale", 1 / np.sqrt(q.shape[-1]))
        return scaled_dot_product_attention_backward(grad, q, k, v, *mask, scale=scale,
                                                     is_causal=kw.get("is_causal", False))
    return f


def _scaled_dot_product_attention_backward(g):
    bool_mask = np.broadcast_to(g.bools(3, 4), (2, 2, 3, 4)).copy()
    bool_mask[:, :, 1] = False  # a query that sees no key
    q, k, v, grad = g.randn(2, 2, 3, 4), g.randn(2, 2, 4, 4), g.randn(2, 2, 4, 3), g.randn(2, 2, 3, 3)
    return [
        Sample((grad, q, k, v), call=_backward()),
        Sample((grad, q, k, v, bool_mask), call=_backward(), desc="bool mask, a fully masked row"),
        Sample((grad, q, k, v), call=_backward(is_causal=True, scale=0.3), desc="is_causal, scale"),
        Sample((empty(0, 3, 3), empty(0, 3, 4), empty(0, 2, 4), empty(0, 2, 3)), call=_backward(),
               desc="empty batch"),
        Sample((grad, q, k[..., :3, :], v), call=_backward(), raises=RuntimeError, desc="key and value lengths differ"),
        Waiver("zero_dim", "attention's operands are matrices (batched): never 0-d"),
    ]


SAMPLES.update(scaled_dot_product_attention=_scaled_dot_product_attention,
               scaled_dot_product_attention_backward=_scaled_dot_product_attention_backward)
