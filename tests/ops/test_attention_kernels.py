"""scaled_dot_product_attention and its backward op: the NumPy backend's kernels (the weights in
one buffer, masked and normalised in place; NumPy passes or the C softmax over rows) against the
ops' decompositions, for the layouts minGPT gives them (heads split by a transpose:
non-contiguous), broadcast batch dims, every kind of mask, dropout masks and rows that see no key;
the C softmax's rows against torch's softmax, NaN and fully masked rows included."""
from __future__ import annotations

import math

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import attention, native

import plugtorch
from plugtorch.core.ops import attention as ops

REG = plugtorch.get_registry().ops
_NO_C = pytest.mark.skipif(not native.enabled(), reason=f"the C kernels are not here: {native.status()}")
KERNELS = [pytest.param("numpy", id="numpy"), pytest.param("c", id="c", marks=_NO_C)]


def _module(kind):
    if kind == "numpy":
        return attention
    from plugtorch_backends.numpy_backend.native import attention as c_attention
    return c_attention


def _inputs(dtype, seed=0):
    rng = np.random.default_rng(seed)
    qkv = rng.standard_normal((2, 5, 3 * 8)).astype(dtype)  # (B, T, 3C), split into 2 heads of 4
    q, k, v = (qkv[..., i * 8:(i + 1) * 8].reshape(2, 5, 2, 4).transpose(0, 2, 1, 3) for i in range(3))
    return q, k, v


def _masks(kind, dtype, rng):
    shape = (2, 2, 5, 5)
    if kind == "bool":
        m = rng.random(shape) > 0.3
        m[0, 1, 2] = False  # a row with no visible key
        return m
    if kind == "float":
        m = rng.standard_normal(shape).astype(dtype)
        m[1, 0, 3] = -np.inf
        return m
    return None


CASES = [(None, False), (None, True), ("bool", False), ("float", False)]


def _tol(dtype):
    return dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("mask_kind", "causal"), CASES)
@pytest.mark.parametrize("dropout", [False, True])
@pytest.mark.parametrize("kind", KERNELS)
def test_kernels_equal_the_decompositions(dtype, mask_kind, causal, dropout, kind):
    kernels = _module(kind)
    rng = np.random.default_rng(1)
    q, k, v = _inputs(dtype)
    mask = _masks(mask_kind, dtype, rng)
    drop = (rng.random((2, 2, 5, 5)) > 0.2).astype(dtype) * dtype(1 / 0.8) if dropout else None
    scale = 1 / math.sqrt(4)
    t = [None if a is None else plugtorch.tensor(a) for a in (q, k, v, mask, drop)]

    got = kernels.scaled_dot_product_attention(q, k, v, mask, drop, scale=scale, is_causal=causal)
    want = REG["scaled_dot_product_attention"].decompose(*t, scale=scale, is_causal=causal)
    np.testing.assert_allclose(got, want.numpy(), **_tol(dtype))

    grad = rng.standard_normal(got.shape).astype(dtype)
    flat = kernels.scaled_dot_product_attention_backward(grad, q, k, v, mask, drop, scale=scale, is_causal=causal)
    want = REG["scaled_dot_product_attention_backward"].decompose(plugtorch.tensor(grad), *t, scale=scale,
                                                                  is_causal=causal)
    np.testing.assert_allclose(flat, want.numpy(), **_tol(dtype))
    assert np.isfinite(flat).all()


def test_broadcast_batch_dims_reach_the_kernels_as_zero_strides():
    rng = np.random.default_rng(2)
    q = plugtorch.tensor(rng.standard_normal((2, 1, 3, 4)), requires_grad=True)
    k = plugtorch.tensor(rng.standard_normal((1, 2, 4, 4)), requires_grad=True)
    v = plugtorch.tensor(rng.standard_normal((2, 4, 3)), requires_grad=True)
    out = plugtorch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.sum().backward()
    ref = [plugtorch.tensor(t.detach().numpy(), requires_grad=True) for t in (q, k, v)]
    b = (2, 2)
    want = REG["scaled_dot_product_attention"].decompose(
        ref[0].expand(*b, 3, 4), ref[1].expand(*b, 4, 4), ref[2].expand(*b, 4, 3), None, None,
        scale=0.5, is_causal=True)
    want.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    for a, r in zip((q, k, v), ref):
        np.testing.assert_allclose(a.grad.numpy(), r.grad.numpy(), rtol=1e-12, atol=1e-13)


def test_a_float_masks_gradient_still_flows():
    q, k, v = (plugtorch.tensor(a) for a in _inputs(np.float64))
    mask = plugtorch.tensor(np.random.default_rng(3).standard_normal((2, 2, 5, 5)), requires_grad=True)
    out = plugtorch.nn.functional.scaled_dot_product_attention(q, k, v, mask)
    (g,) = plugtorch.autograd.grad(out.sum(), mask)
    w = REG["scaled_dot_product_attention"].decompose(q, k, v, mask, None, scale=0.5, is_causal=False)
    (want,) = plugtorch.autograd.grad(w.sum(), mask)
    np.testing.assert_allclose(g.numpy(), want.numpy(), rtol=1e-12, atol=1e-13)


def test_the_backward_op_names_bad_shapes():
    q, k, v = (plugtorch.tensor(a) for a in _inputs(np.float64))
    with pytest.raises(RuntimeError, match="scaled_dot_product_attention_backward: expected query, key, value"):
        ops.scaled_dot_product_attention_backward(q[..., :3], q, k, v, scale=0.5, is_causal=False)


@_NO_C
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("L", "S"), [(64, 64), (5, 40), (40, 5), (3, 1)])
def test_the_c_softmax_rows_equal_torchs(dtype, L, S):
    torch = pytest.importorskip("torch", reason="torch is the oracle of these tests")
    from plugtorch_backends.numpy_backend.native import _kernels
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((3, L, S)) * 4).astype(dtype)
    x[0, 1, :] = -np.inf            # every key masked: zeros, as torch's attention gives
    x[1, 2, min(1, S - 1)] = np.nan  # a NaN: the row is NaN
    x[2, 0, -1] = -np.inf
    for causal in (False, True):
        want = torch.from_numpy(x) * 0.3
        if causal:
            want = want.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))
        dead = (want == float("-inf")).all(-1)
        want = torch.softmax(want, -1)
        want[dead] = 0.0
        assert torch.isnan(want[1, 2]).all()
        out = np.empty_like(x)
        _kernels.softmax_rows(x.reshape(-1, S), L, causal, 0.3, True, out.reshape(-1, S))
        np.testing.assert_allclose(out, want.numpy(), **_tol(dtype))

        y = np.nan_to_num(out)
        g = rng.standard_normal(x.shape).astype(dtype)
        ty = torch.from_numpy(y)
        want_g = (ty * (torch.from_numpy(g) - (torch.from_numpy(g) * ty).sum(-1, keepdim=True))) * 0.3
        got_g = np.empty_like(g)
        _kernels.softmax_backward_rows(g.reshape(-1, S), y.reshape(-1, S), L, causal, 0.3, got_g.reshape(-1, S))
        np.testing.assert_allclose(got_g, want_g.numpy(), **_tol(dtype))


def _lane_tree_sum(terms):
    """The C rows' double sum of ``terms``: 16 lanes (lane l takes terms l, l + 16, ...), the lanes
    combined l with l + 8, then l + 4, 2, 1, and the terms past the last whole 16 added apart."""
    whole = len(terms) // 16 * 16
    lanes = [0.0] * 16
    for j in range(whole):
        lanes[j % 16] += float(terms[j])
    for half in (8, 4, 2, 1):
        for lane in range(half):
            lanes[lane] += lanes[lane + half]
    tail = 0.0
    for t in terms[whole:]:
        tail += float(t)
    return tail + lanes[0]


@_NO_C
def test_the_c_softmax_rows_sum_in_their_documented_order():
    # The gradient's dot product of each row follows the lanes' order exactly: the same bits on
    # every machine and clone, whatever the vectors the tree runs on.
    from plugtorch_backends.numpy_backend.native import _kernels
    rng = np.random.default_rng(11)
    n = 40  # two whole blocks of 16 and a tail of 8
    y = (rng.random((64, n)) * 10.0 ** rng.integers(-6, 3, (64, n))).astype(np.float32)
    g = rng.standard_normal((64, n)).astype(np.float32)
    y[:, 3] = y[:, 20] = 1e30  # two products that cancel, in different lanes: whatever the other
    g[:, 20] = -g[:, 3]        # terms add before they meet is lost, so each order has its own sum
    got = np.empty_like(g)
    _kernels.softmax_backward_rows(g, y, 64, False, 0.5, got)
    reordered = 0
    for r in range(64):
        products = y[r] * g[r]  # each rounded to float32, as the C rows round them
        dot = np.float32(_lane_tree_sum(products))
        want = (y[r] * (g[r] - dot)) * np.float32(0.5)
        assert got[r].tobytes() == want.tobytes(), r
        in_turn = 0.0
        for t in products:
            in_turn += float(t)
        reordered += np.float32(in_turn) != dot
    assert reordered, "the data should tell the lanes' order from a sum taken in turn"


@_NO_C
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_c_softmax_kernel_equals_torchs(dtype):
    torch = pytest.importorskip("torch", reason="torch is the oracle of these tests")
    from plugtorch_backends.numpy_backend.native.activation import softmax
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 3, 7, 70)) * 5).astype(dtype)
    x[0, 0, 1] = -np.inf  # a row of -inf: NaN, as torch's
    x[0, 1, 2, 3] = np.nan
    x[1, 2, 3, ::2] = -np.inf
    for a, dim in ((x, 3), (x, 1), (x.transpose(0, 1, 3, 2), 3)):  # the C, then NumPy's passes
        want = torch.softmax(torch.from_numpy(np.ascontiguousarray(a)), dim).numpy()
        np.testing.assert_allclose(softmax(a, dim=dim), want, **_tol(dtype))


@_NO_C
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_c_log_softmax_kernels_equal_torchs(dtype):
    """log_softmax and its gradient op, the C rows (last dim, C-contiguous) and NumPy's passes
    (other dims and layouts), against torch's, special rows included: a row of -inf, a NaN or +inf
    (NaN throughout), -inf entries beside finite ones (-inf there)."""
    torch = pytest.importorskip("torch", reason="torch is the oracle of these tests")
    from plugtorch_backends.numpy_backend.native.activation import log_softmax, log_softmax_backward
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((2, 3, 7, 70)) * 5).astype(dtype)
    x[0, 0, 1] = -np.inf
    x[0, 1, 2, 3] = np.nan
    x[0, 2, 4, 5] = np.inf
    x[1, 2, 3, ::2] = -np.inf
    g = rng.standard_normal(x.shape).astype(dtype)
    y = (rng.standard_normal(x.shape) - 2).astype(dtype)  # any y: the gradient op is not only a rule's
    y[1, 1, 1, 1] = np.nan
    for a, b, c, dim in ((x, g, y, 3), (x, g, y, 1), (x.transpose(0, 1, 3, 2), g.transpose(0, 1, 3, 2),
                                                      y.transpose(0, 1, 3, 2), 3)):
        want = torch.log_softmax(torch.from_numpy(np.ascontiguousarray(a)), dim).numpy()
        np.testing.assert_allclose(log_softmax(a, dim=dim), want, **_tol(dtype))
        tg, ty = torch.from_numpy(np.ascontiguousarray(b)), torch.from_numpy(np.ascontiguousarray(c))
        want_g = torch.ops.aten._log_softmax_backward_data(tg, ty, dim, tg.dtype).numpy()
        np.testing.assert_allclose(log_softmax_backward(b, c, dim=dim), want_g, **_tol(dtype))


def test_softmaxs_gradient_op_has_second_derivatives():
    rng = np.random.default_rng(6)
    x = plugtorch.tensor(rng.standard_normal((2, 3, 5)), requires_grad=True)
    for dim in (-1, 1):
        assert plugtorch.autograd.gradcheck(lambda t, d=dim: plugtorch.softmax(t, d), (x,))
        assert plugtorch.autograd.gradgradcheck(lambda t, d=dim: plugtorch.softmax(t, d), (x,))


def _heads_module():
    from plugtorch_backends.numpy_backend.native import _kernels
    from plugtorch_backends.numpy_backend.native import attention as c_attention
    if getattr(_kernels, "attention_heads", None) is None:
        pytest.skip("the C extension was built from older sources: no attention_heads")
    return c_attention, _kernels


def _head_inputs(dtype, shape, seed, strided=False):
    b, h, L, S, D, Dv = shape
    rng = np.random.default_rng(seed)
    if strided:  # minGPT's heads: views of one (B, T, 3C) projection, split by a transpose
        qkv = rng.standard_normal((b, L, h * (2 * D + Dv))).astype(dtype)
        q = qkv[..., :h * D].reshape(b, L, h, D).transpose(0, 2, 1, 3)
        k = qkv[..., h * D:2 * h * D].reshape(b, L, h, D).transpose(0, 2, 1, 3)
        v = qkv[..., 2 * h * D:].reshape(b, L, h, Dv).transpose(0, 2, 1, 3)
    else:
        q, k, v = (rng.standard_normal((b, h, n, e)).astype(dtype) for n, e in ((L, D), (S, D), (S, Dv)))
    g = rng.standard_normal((b, h, L, Dv)).astype(dtype)
    drop = ((rng.random((b, h, L, S)) > 0.25) / 0.75).astype(dtype)
    return q, k, v, g, drop


HEAD_SHAPES = [(16, 4, 64, 64, 32, 32), (2, 3, 5, 7, 3, 20), (1, 2, 9, 4, 17, 33), (3, 1, 40, 40, 8, 8)]


@_NO_C
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", HEAD_SHAPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dropout", [False, True])
def test_the_c_heads_give_the_products_values(dtype, shape, causal, dropout):
    """Without an attn_mask the C kernels run head by head (attention.h): the values of the NumPy
    products around the same C softmax rows, forward and backward, for whole and strided heads,
    widths that are and are not whole vectors, L != S."""
    c_attention, kernels = _heads_module()
    q, k, v, g, drop = _head_inputs(dtype, shape, seed=sum(shape), strided=shape[2] == shape[3])
    drop = drop if dropout else None
    assert c_attention._heads(q, k, v, None, drop, g) is not None
    got = c_attention.scaled_dot_product_attention(q, k, v, None, drop, scale=0.3, is_causal=causal)
    want = attention.forward(q, k, v, None, drop, 0.3, causal, kernels.softmax_rows)
    np.testing.assert_allclose(got, want, **_tol(dtype))
    got = c_attention.scaled_dot_product_attention_backward(g, q, k, v, None, drop, scale=0.3, is_causal=causal)
    want = attention.backward(g, q, k, v, None, drop, 0.3, causal, kernels.softmax_backward_rows,
                              kernels.softmax_rows)
    np.testing.assert_allclose(got, want, **_tol(dtype))


@_NO_C
def test_the_c_heads_keep_nan_and_inf_rows_as_the_rows_do():
    c_attention, kernels = _heads_module()
    q, k, v, g, _ = _head_inputs(np.float32, (1, 2, 6, 6, 4, 4), seed=3)
    q[0, 0, 2, 1] = np.nan
    q[0, 1, 4, 0] = np.inf
    for causal in (False, True):
        got = c_attention.scaled_dot_product_attention(q, k, v, None, None, scale=0.5, is_causal=causal)
        want = attention.forward(q, k, v, None, None, 0.5, causal, kernels.softmax_rows)
        np.testing.assert_allclose(got, want, **_tol(np.float32), equal_nan=True)
        assert np.isnan(got[0, 0, 2]).all() and np.isfinite(got[0, 0, 1]).all()


@_NO_C
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_c_heads_split_over_two_threads_give_the_same_bits(dtype, two_threads):
    from threadpoolctl import threadpool_limits
    c_attention, kernels = _heads_module()
    q, k, v, g, drop = _head_inputs(dtype, HEAD_SHAPES[0], seed=4, strided=True)

    def both():
        return (c_attention.scaled_dot_product_attention(q, k, v, None, drop, scale=0.2, is_causal=True),
                c_attention.scaled_dot_product_attention_backward(g, q, k, v, None, drop, scale=0.2, is_causal=True))

    with threadpool_limits(limits=1, user_api="blas"):
        one = both()
    with two_threads():
        calls = kernels.pool_info()[2]
        two = both()
        assert kernels.pool_info()[2] - calls == 2  # the heads split, forward and backward
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


@_NO_C
def test_an_attn_mask_or_an_empty_dim_keeps_the_products():
    c_attention, _ = _heads_module()
    q, k, v, g, drop = _head_inputs(np.float32, (1, 1, 4, 4, 2, 2), seed=5)
    assert c_attention._heads(q, k, v, np.ones((1, 1, 4, 4), bool), None) is None
    assert c_attention._heads(q[:, :, :0], k, v, None, None) is None
    assert c_attention._heads(q.astype(np.float16), k.astype(np.float16), v.astype(np.float16), None, None) is None
    assert c_attention._heads(q, k, v, None, drop.astype(bool)) is None  # a bool dropout mask: the products'
    assert c_attention._heads(q[None], k[None], v[None], None, None, g[None]) is not None  # three lead dims
    q3, k3, v3 = (np.stack([a, -a]) for a in (q, k, v))
    got = c_attention.scaled_dot_product_attention(q3, k3, v3, None, None, scale=0.5, is_causal=True)
    want = attention.forward(q3, k3, v3, None, None, 0.5, True)
    assert got.shape == want.shape == (2, 1, 1, 4, 2)
    np.testing.assert_allclose(got, want, **_tol(np.float32))


@_NO_C
def test_the_c_heads_refuse_operands_that_do_not_fit():
    _, kernels = _heads_module()
    q, k, v, g, drop = _head_inputs(np.float32, (1, 2, 4, 5, 3, 6), seed=6)
    out = np.empty((1, 2, 4, 6), np.float32)
    with pytest.raises(ValueError, match=r"attention heads: expected q \(B1, B2, L, D\), k \(B1, B2, S, D\)"):
        kernels.attention_heads(q, k[..., :2], v, None, out, 1.0, False)
    with pytest.raises(ValueError, match="attention heads: out must have its last dim's entries adjacent and be "
                                         "C-contiguous"):
        kernels.attention_heads(q, k, v, None, np.empty((1, 2, 6, 4), np.float32).transpose(0, 1, 3, 2), 1.0, False)
    with pytest.raises(TypeError, match="attention_heads: expected float32 or float64 arrays of one dtype"):
        kernels.attention_heads(q, k, v.astype(np.float64), None, out, 1.0, False)
