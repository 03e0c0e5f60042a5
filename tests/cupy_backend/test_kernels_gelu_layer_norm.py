"""The CuPy backend's gelu, gelu_backward, layer_norm, layer_norm_backward,
layer_norm_weight_grad and layer_norm_gradients kernels, run on the CPU from the same CUDA source (``cpu_load``),
against the NumPy backend's kernels for the ops (the native C ones where built): float32 and
float64 within rounding (the kernels reduce in another order and call CUDA's erf/tanh/exp),
ragged shapes (rows not a multiple of a block, odd widths, widths past one block), strided
and float16 operands, and a training step through the registered ops."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.cupy_backend import activation_kernels, norm_kernels

import plugtorch as pt

TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}
NUMPY = pt.get_registry().backends["numpy"].kernels


@pytest.fixture(scope="module")
def kernels(cpu_load):
    return {**activation_kernels.make_kernels(np, cpu_load), **norm_kernels.make_kernels(np, cpu_load)}


def _close(got, want, dtype, what, scale=1.0):
    """Equal within rounding; ``scale`` the size of the terms that cancel to ``want`` (layer_norm's
    input gradient is a difference of terms of size rstd * g * w: 0 for a width of 1, where
    NumPy's order leaves ulps of those terms; the C kernel reduces in double, these in T)."""
    assert got.dtype == want.dtype and got.shape == want.shape, what
    np.testing.assert_allclose(got, want, err_msg=what, rtol=TOL[dtype]["rtol"], atol=TOL[dtype]["atol"] * scale)


# -- gelu ---------------------------------------------------------------------------------------

GELU_SHAPES = [(1,), (7,), (3, 5, 11), (300,), (2, 513)]  # 300, 1026: grids of two and five blocks


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_and_its_gradient_equal_the_numpy_backend(kernels, dtype, approximate):
    rng = np.random.default_rng(0)
    for shape in GELU_SHAPES:
        x = (rng.standard_normal(shape) * 3).astype(dtype)
        g = rng.standard_normal(shape).astype(dtype)
        _close(kernels["gelu"](x, approximate=approximate), NUMPY["gelu"](x, approximate=approximate), dtype,
               f"gelu {shape}")
        _close(kernels["gelu_backward"](g, x, approximate=approximate),
               NUMPY["gelu_backward"](g, x, approximate=approximate), dtype, f"gelu_backward {shape}")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_of_other_layouts_extremes_and_float16(kernels, approximate):
    rng = np.random.default_rng(1)
    base = rng.standard_normal((6, 4, 5))
    base[0, 0, :3] = [-40.0, 40.0, 0.0]  # the tails: 0 and x, no nan from exp or tanh
    g = rng.standard_normal((6, 4, 5))
    for x, gy in [(np.asfortranarray(base), np.asfortranarray(g)), (base[:, ::2], g[:, ::2]),
                  (base[::-1], g), (base[0, 0, 0].reshape(()), g[0, 0, 0].reshape(())), (base[:0], g[:0])]:
        _close(kernels["gelu"](x, approximate=approximate), NUMPY["gelu"](x, approximate=approximate),
               np.float64, f"gelu {x.shape} {x.strides}")
        _close(kernels["gelu_backward"](gy, x, approximate=approximate),
               NUMPY["gelu_backward"](gy, x, approximate=approximate), np.float64, f"gelu_backward {x.strides}")
    half, gh = base.astype(np.float16), g.astype(np.float16)
    got = kernels["gelu_backward"](gh, half, approximate=approximate)
    assert got.dtype == np.float16  # computed in float32, rounded once: within a float16 ulp or two
    want = NUMPY["gelu_backward"](gh.astype(np.float32), half.astype(np.float32), approximate=approximate)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-3)


def test_gelu_refuses_an_unknown_form_and_integers(kernels):
    with pytest.raises(ValueError, match="gelu: approximate must be 'none' or 'tanh', got 'fast'"):
        kernels["gelu"](np.zeros(3, np.float32), approximate="fast")
    with pytest.raises(TypeError, match="gelu: no CUDA kernel for int64"):
        kernels["gelu"](np.zeros(3, np.int64), approximate="none")


# -- layer_norm ---------------------------------------------------------------------------------

# (input shape, normalized_shape): one row; rows past one block of threads; a width of 1; odd
# widths under, at and past 256 threads (a thread walks several columns); 2-d normalized_shape
LN_CASES = [((1, 5), (5,)), ((37, 33), (33,)), ((3, 4, 1), (1,)), ((5, 256), (256,)), ((3, 777), (777,)),
            ((2, 3, 7, 9), (7, 9)), ((257, 3), (3,))]


def _ln_operands(rng, shape, normalized_shape, dtype):
    x = (rng.standard_normal(shape) * 2 + 3).astype(dtype)  # an offset mean: a one-pass E[x^2] would lose it
    g = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(normalized_shape).astype(dtype)
    b = rng.standard_normal(normalized_shape).astype(dtype)
    return x, g, w, b


def _rstd(x, dims, eps):
    axes = tuple(range(x.ndim - dims, x.ndim))
    return float((1 / np.sqrt(x.astype(np.float64).var(axes) + eps)).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_and_its_gradients_equal_the_numpy_backend(kernels, dtype):
    rng = np.random.default_rng(2)
    for shape, ns in LN_CASES:
        x, g, w, b = _ln_operands(rng, shape, ns, dtype)
        attrs = dict(normalized_shape=ns, eps=1e-5)
        for weight, bias in [(w, b), (None, None), (w, None)]:
            _close(kernels["layer_norm"](x, weight, bias, **attrs), NUMPY["layer_norm"](x, weight, bias, **attrs),
                   dtype, f"layer_norm {shape} {weight is None}")
            _close(kernels["layer_norm_backward"](g, x, weight, **attrs),
                   NUMPY["layer_norm_backward"](g, x, weight, **attrs), dtype, f"layer_norm_backward {shape}",
                   scale=_rstd(x, len(ns), 1e-5) * float(np.abs(g).max()) * (1 if weight is None else float(
                       np.abs(weight).max())))
        # a sum over up to 257 rows: its rounding grows with them
        np.testing.assert_allclose(kernels["layer_norm_weight_grad"](g, x, **attrs),
                                   NUMPY["layer_norm_weight_grad"](g, x, **attrs),
                                   rtol=TOL[dtype]["rtol"] * 10, atol=TOL[dtype]["atol"] * 10,
                                   err_msg=f"layer_norm_weight_grad {shape}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_gradients_are_the_separate_kernels_in_two_passes(kernels, dtype):
    """The input and weight gradients are the separate kernels' bit for bit (the same arithmetic,
    the same chunks summed the same way); the bias gradient is the rows' sum, in chunks; all three
    equal the NumPy backend's layer_norm_gradients within rounding."""
    rng = np.random.default_rng(4)
    for shape, ns in LN_CASES + [((300, 16), (16,))]:  # 300 rows: five chunks of the column pass
        x, g, w, _ = _ln_operands(rng, shape, ns, dtype)
        attrs = dict(normalized_shape=ns, eps=1e-5)
        flat = kernels["layer_norm_gradients"](g, x, w, **attrs)
        size, n = x.size, w.size
        assert flat.dtype == dtype and flat.shape == (size + 2 * n,)
        np.testing.assert_array_equal(flat[:size].reshape(shape), kernels["layer_norm_backward"](g, x, w, **attrs))
        np.testing.assert_array_equal(flat[size:size + n].reshape(ns), kernels["layer_norm_weight_grad"](g, x, **attrs))
        lead = tuple(range(x.ndim - len(ns)))
        np.testing.assert_allclose(flat[size + n:].reshape(ns), g.astype(np.float64).sum(lead),
                                   rtol=TOL[dtype]["rtol"] * 10, atol=TOL[dtype]["atol"] * 10, err_msg=f"bias {shape}")
        want = NUMPY["layer_norm_gradients"](g, x, w, **attrs)
        scale = _rstd(x, len(ns), 1e-5) * float(np.abs(g).max()) * float(np.abs(w).max())
        _close(flat[:size], want[:size], dtype, f"layer_norm_gradients dx {shape}", scale=scale)
        np.testing.assert_allclose(flat[size:], want[size:], rtol=TOL[dtype]["rtol"] * 10,
                                   atol=TOL[dtype]["atol"] * 10, err_msg=f"layer_norm_gradients dw, db {shape}")


def test_layer_norm_gradients_of_strided_empty_and_float16_operands(kernels):
    rng = np.random.default_rng(5)
    x, g, w, _ = _ln_operands(rng, (6, 10), (6,), np.float64)
    attrs = dict(normalized_shape=(6,), eps=1e-3)
    xt, gt = x.T, g.T  # (10, 6) views, not C-contiguous
    np.testing.assert_allclose(kernels["layer_norm_gradients"](gt, xt, w[::-1], **attrs),
                               NUMPY["layer_norm_gradients"](gt, xt, w[::-1], **attrs), rtol=1e-12, atol=1e-12)
    empty = np.zeros((0, 6))
    np.testing.assert_array_equal(kernels["layer_norm_gradients"](empty, empty, w, **attrs), np.zeros(12))
    h, gh, wh = x.T.astype(np.float16), g.T.astype(np.float16), w.astype(np.float16)
    got = kernels["layer_norm_gradients"](gh, h, wh, **attrs)
    assert got.dtype == np.float16  # computed in float32, rounded once
    want = NUMPY["layer_norm_gradients"](gh.astype(np.float32), h.astype(np.float32), wh.astype(np.float32), **attrs)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-2)
    with pytest.raises(TypeError, match="layer_norm_gradients: no CUDA kernel for int64"):
        kernels["layer_norm_gradients"](np.zeros((2, 3), np.int64), np.zeros((2, 3), np.int64), np.ones(3, np.int64),
                                        normalized_shape=(3,), eps=1e-5)


def test_layer_norm_of_strided_empty_and_float16_operands(kernels):
    rng = np.random.default_rng(3)
    x, g, w, b = _ln_operands(rng, (6, 10), (6,), np.float64)
    attrs = dict(normalized_shape=(6,), eps=1e-3)
    xt, gt = x.T, g.T  # (10, 6) views, not C-contiguous
    _close(kernels["layer_norm"](xt, w, b, **attrs), NUMPY["layer_norm"](xt, w, b, **attrs), np.float64, "strided")
    _close(kernels["layer_norm_backward"](gt, xt, w[::-1], **attrs),
           NUMPY["layer_norm_backward"](gt, xt, w[::-1], **attrs), np.float64, "strided backward")
    empty = np.zeros((0, 6))
    assert kernels["layer_norm"](empty, w, b, **attrs).shape == (0, 6)
    np.testing.assert_array_equal(kernels["layer_norm_weight_grad"](empty, empty, **attrs), np.zeros(6))
    h = x.astype(np.float16)
    got = kernels["layer_norm"](h, w.astype(np.float16), None, **attrs)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), NUMPY["layer_norm"](h.astype(np.float64), w.astype(
        np.float16).astype(np.float64), None, **attrs), rtol=2e-3, atol=2e-3)
    with pytest.raises(TypeError, match="layer_norm: no CUDA kernel for int32"):
        kernels["layer_norm"](np.zeros((2, 3), np.int32), None, None, normalized_shape=(3,), eps=1e-5)


def test_a_constant_row_normalises_to_the_bias(kernels):
    """var 0: rstd = 1 / sqrt(eps), xhat 0 exactly (the centred values are exact zeros)."""
    x = np.full((3, 300), 7.25, np.float32)
    b = np.arange(300, dtype=np.float32)
    np.testing.assert_array_equal(kernels["layer_norm"](x, None, b, normalized_shape=(300,), eps=1e-5),
                                  np.broadcast_to(b, (3, 300)))


def test_the_ops_run_on_these_kernels_as_registered(kernels, monkeypatch):
    """A transformer-style block's training step through plugtorch's ops and autograd (keyword
    attrs as dispatch passes them) on these kernels gives what the NumPy kernels give. Its three
    layer norms take the three backward routes: on the input (only the weight needs a gradient),
    inside (input and weight: layer_norm_gradients) and without parameters (only the input)."""
    backend = pt.get_registry().backends["numpy"]

    def step():
        pt.manual_seed(0)
        model = pt.nn.Sequential(pt.nn.LayerNorm(6), pt.nn.Linear(6, 9), pt.nn.LayerNorm(9), pt.nn.GELU(),
                                 pt.nn.Linear(9, 5), pt.nn.LayerNorm(5, elementwise_affine=False),
                                 pt.nn.GELU(approximate="tanh"))
        out = model(pt.randn(4, 3, 6))
        (out * out).sum().backward()
        return [out.detach().numpy()] + [p.grad.numpy().copy() for p in model.parameters()]

    want = step()
    called = set()
    for name, fn in kernels.items():
        if name.startswith(("gelu", "layer_norm")):
            monkeypatch.setitem(backend.kernels, name, lambda *a, _f=fn, _n=name, **k: called.add(_n) or _f(*a, **k))
    got = step()
    assert called == {"gelu", "gelu_backward", "layer_norm", "layer_norm_backward", "layer_norm_weight_grad",
                      "layer_norm_gradients"}
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
