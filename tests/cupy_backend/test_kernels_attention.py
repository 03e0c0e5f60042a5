"""The CuPy backend's scaled_dot_product_attention forward (``kernels/attention.cu``: flash
attention, one block per (batch-head, 64 queries), online softmax), run on the CPU from the
same CUDA source (``cpu_load``), against the NumPy backend's kernel: causal or not, float and
bool masks, dropout masks, query and key counts that are not multiples of the 64-query and
16-key tiles, L != S, E != Ev, rows with no visible key, float32/float64 within rounding,
float16, the wide-head formula, and the op dispatched through plugtorch."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.cupy_backend import attention_kernels

import plugtorch as pt

NUMPY = pt.get_registry().backends["numpy"].kernels["scaled_dot_product_attention"]
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


@pytest.fixture(scope="module")
def sdpa(cpu_load):
    return attention_kernels.make_kernels(np, cpu_load)["scaled_dot_product_attention"]


def _qkv(rng, batch, length, source, e, ev, dtype):
    return (rng.standard_normal((*batch, length, e)).astype(dtype),
            rng.standard_normal((*batch, source, e)).astype(dtype),
            rng.standard_normal((*batch, source, ev)).astype(dtype))


# (batch dims, L, S, E, Ev): one query; ragged tiles (L 70 > 64, S 37 not a multiple of 16);
# L < S and L > S under causal (S 150: the first query tile stops at key 64); odd head sizes; no
# batch dims
CASES = [((1,), 1, 1, 1, 1), ((2, 3), 70, 37, 8, 5), ((2,), 5, 33, 7, 3), ((1, 2), 40, 17, 16, 16),
         ((), 9, 9, 4, 6), ((1,), 70, 150, 4, 3)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_the_kernel_equals_the_numpy_backend(sdpa, dtype, is_causal):
    rng = np.random.default_rng(0)
    for batch, length, source, e, ev in CASES:
        q, k, v = _qkv(rng, batch, length, source, e, ev, dtype)
        attrs = dict(scale=1 / np.sqrt(e), is_causal=is_causal)
        got, want = sdpa(q, k, v, None, None, **attrs), NUMPY(q, k, v, None, None, **attrs)
        assert got.dtype == want.dtype and got.shape == want.shape == (*batch, length, ev)
        np.testing.assert_allclose(got, want, err_msg=f"{batch, length, source, e, ev}", **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_masks_dropout_and_rows_with_no_visible_key(sdpa, dtype):
    rng = np.random.default_rng(1)
    q, k, v = _qkv(rng, (2, 2), 67, 19, 6, 5, dtype)
    keep = rng.uniform(size=(2, 2, 67, 19)) > 0.3
    keep[0, 1, 3] = False  # a row that sees no key: zeros, not nan
    additive = np.where(keep, rng.standard_normal(keep.shape), -np.inf).astype(dtype)
    drop = ((rng.uniform(size=keep.shape) > 0.25) / 0.75).astype(dtype)
    for mask in (keep, additive):
        for dropout in (None, drop):
            got = sdpa(q, k, v, mask, dropout, scale=0.3, is_causal=False)
            want = NUMPY(q, k, v, mask, dropout, scale=0.3, is_causal=False)
            np.testing.assert_allclose(got, want, err_msg=f"{mask.dtype} {dropout is None}", **TOL[dtype])
            np.testing.assert_array_equal(got[0, 1, 3], 0)
    got = sdpa(q, k, v, None, drop, scale=0.3, is_causal=True)
    np.testing.assert_allclose(got, NUMPY(q, k, v, None, drop, scale=0.3, is_causal=True), **TOL[dtype])


def test_nan_empty_float16_and_wide_heads(sdpa):
    rng = np.random.default_rng(2)
    q, k, v = _qkv(rng, (2,), 5, 4, 3, 2, np.float64)
    q[1, 2, 0] = np.nan
    got = sdpa(q, k, v, None, None, scale=0.5, is_causal=True)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(NUMPY(q, k, v, None, None, scale=0.5, is_causal=True)))
    assert np.isnan(got[1, 2]).all() and not np.isnan(np.delete(got, 2, 1)).any()
    for shape in [(0, 4, 3), (5, 0, 3)]:  # no queries; no keys: zeros, as the weights' empty matmul
        qq, kk, vv = _qkv(rng, (2,), shape[0], shape[1], shape[2], 2, np.float64)
        np.testing.assert_array_equal(sdpa(qq, kk, vv, None, None, scale=1.0, is_causal=False),
                                      NUMPY(qq, kk, vv, None, None, scale=1.0, is_causal=False))
    h = [a.astype(np.float16) for a in _qkv(rng, (3,), 10, 7, 4, 4, np.float64)]
    got = sdpa(*h, None, None, scale=0.5, is_causal=True)
    assert got.dtype == np.float16  # computed in float32, rounded once
    want = NUMPY(*[a.astype(np.float32) for a in h], None, None, scale=0.5, is_causal=True)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-3)
    q, k, v = _qkv(rng, (1,), 6, 5, 130, 3, np.float64)  # wider than the kernel's 128: the formula
    mask = rng.uniform(size=(1, 6, 5)) > 0.5
    mask[0, 0] = False
    np.testing.assert_allclose(sdpa(q, k, v, mask, None, scale=0.1, is_causal=False),
                               NUMPY(q, k, v, mask, None, scale=0.1, is_causal=False), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(sdpa(q, k, v, None, None, scale=0.1, is_causal=True),
                               NUMPY(q, k, v, None, None, scale=0.1, is_causal=True), rtol=1e-12, atol=1e-13)


def test_the_op_runs_on_the_kernel_as_registered(sdpa, monkeypatch):
    """F.scaled_dot_product_attention with broadcast batch dims, grouped heads and dropout, and
    its gradients (the backward op's NumPy kernel), through dispatch on this kernel."""
    backend = pt.get_registry().backends["numpy"]

    def run():
        pt.manual_seed(0)
        q, k, v = pt.randn(2, 4, 9, 8), pt.randn(1, 2, 11, 8), pt.randn(1, 2, 11, 6)
        for t in (q, k, v):
            t.requires_grad_()
        out = pt.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.2, is_causal=True, enable_gqa=True)
        (out * out).sum().backward()
        return [out.detach().numpy()] + [t.grad.numpy() for t in (q, k, v)]

    want = run()
    called = []
    monkeypatch.setitem(backend.kernels, "scaled_dot_product_attention",
                        lambda *a, **kw: called.append(1) or sdpa(*a, **kw))
    got = run()
    assert called
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
