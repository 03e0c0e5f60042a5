"""scaled_dot_product_attention's forward as a flash-attention CUDA kernel
(``kernels/attention.cu``): one block per (batch-head, 64 queries), the keys and values streamed
through shared memory and the softmax computed online, so the (L, S) weights are never stored.

``make_kernels(xp, load)`` gives the registered-op kernel with the NumPy backend's signature
(``backends/numpy_backend/attention.py``). Heads wider than the kernel's 128 run the NumPy
kernel's formula in ``xp`` (a batched GEMM, the weights in one buffer). A bool mask reaches the
kernel as an additive 0 / -inf one. The backward op keeps its decomposition on this backend
(its GEMMs are cuBLAS's). float16 runs in float32 and is rounded back once.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy

from .modules import as_operand, blocks, float_work_dtype, kernel_finder

QUERIES_PER_BLOCK = 64  # QTILE in attention.cu: the block size the kernel is written for
MAX_HEAD = 128  # EMAX in attention.cu


def make_kernels(xp, load: Callable) -> dict[str, Callable]:
    """op name -> kernel over ``xp`` arrays (``cupy``, or NumPy with the CPU-built kernels)."""
    find = kernel_finder(load)

    def formula(q, k, v, mask, drop, scale, is_causal):
        """The NumPy kernel's computation in ``xp``: rows with no visible key give zeros."""
        s = xp.matmul(q, xp.swapaxes(k, -1, -2)) * q.dtype.type(scale)
        length, source = s.shape[-2:]
        if is_causal:
            above = xp.arange(source).reshape(1, source) > xp.arange(length).reshape(length, 1)
            s = xp.where(above, q.dtype.type(-math.inf), s)
        if mask is not None:
            s = xp.where(mask, s, q.dtype.type(-math.inf)) if mask.dtype == numpy.bool_ else s + mask
        if not source:
            return xp.zeros((*s.shape[:-1], v.shape[-1]), dtype=q.dtype)
        top = s.max(-1, keepdims=True)
        dead = top == -math.inf
        e = xp.exp(s - xp.where(dead, q.dtype.type(0), top))
        w = e / xp.where(dead, q.dtype.type(1), e.sum(-1, keepdims=True))
        if drop is not None:
            w = w * drop
        return xp.matmul(w, v)

    def scaled_dot_product_attention(query, key, value, attn_mask, dropout_mask, *, scale, is_causal):
        dtype = query.dtype
        work = float_work_dtype(dtype, "scaled_dot_product_attention: no CUDA kernel for {dtype}: it takes "
                                "float16, float32 or float64")
        batch_shape = query.shape[:-2]
        length, e = query.shape[-2:]
        source, ev = value.shape[-2:]
        if e > MAX_HEAD or ev > MAX_HEAD:
            def cast(a):
                return a if a is None or a.dtype == numpy.bool_ else a.astype(work, copy=False)
            out = formula(cast(query), cast(key), cast(value), cast(attn_mask), cast(dropout_mask), scale, is_causal)
            return out if out.dtype == dtype else out.astype(dtype)
        batch = math.prod(batch_shape)
        out = xp.empty((*batch_shape, length, ev), dtype=work)
        if out.size:
            q, k, v = (as_operand(a, work) for a in (query, key, value))
            has_mask, has_drop = attn_mask is not None, dropout_mask is not None
            mask = q
            if has_mask:
                mask = attn_mask if attn_mask.dtype != numpy.bool_ else xp.where(
                    attn_mask, work.type(0), work.type(-math.inf))
                mask = as_operand(mask, work)
            drop = as_operand(dropout_mask, work) if has_drop else q  # never read without the flags
            tiles = batch * -(-length // QUERIES_PER_BLOCK)
            find("attention", "sdpa_forward", work)((blocks(tiles, 1),), (QUERIES_PER_BLOCK,), (
                q, k, v, mask, drop, out, numpy.int64(batch), numpy.int64(length), numpy.int64(source),
                numpy.int64(e), numpy.int64(ev), work.type(scale), numpy.int32(is_causal), numpy.int32(has_mask),
                numpy.int32(has_drop)))
        return out if out.dtype == dtype else out.astype(dtype)

    return {"scaled_dot_product_attention": scaled_dot_product_attention}
