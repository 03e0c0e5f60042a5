"""The NumPy backend's native conv2d kernels (C im2col, then the decomposition's own matmuls)
equal the op's decomposition bit for bit: forward with bias, and the weight gradient with its
batch chunks (the direct kernel, which sums in another order, turned off), for every geometry,
groups, layout and dtype. (Against torch: the conformance
kit runs the ops' samples on the registered kernels.)"""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import native

import plugtorch as pt
from plugtorch.core import geometry as geo  # (tests here take a `geometry` parameter)
from plugtorch.core.ops.conv import _conv, _conv_weight_grad

KERNELS = native.kernels()
pytestmark = pytest.mark.skipif(not KERNELS, reason=native.status())

GEOMETRIES = [  # in channels, out channels, kernel, stride, padding, dilation, groups
    (1, 4, (3, 3), (1, 1), (1, 1), (1, 1), 1),    # MNIST's first layer
    (4, 6, (3, 3), (1, 1), (1, 1), (1, 1), 2),
    (3, 4, (2, 3), (2, 1), (0, 2), (1, 1), 1),
    (2, 2, (3, 2), (1, 3), (2, 1), (2, 1), 1),    # dilated, padding wider than a window's reach
    (6, 6, (1, 1), (2, 2), (0, 0), (1, 1), 3),
    (2, 3, (5, 4), (1, 1), (0, 0), (1, 1), 1),    # one window per row
]


def _data(geometry, dtype, seed=0):
    c, o, k, *_ , groups = geometry
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, c, 7, 6)) * 3
    w = rng.standard_normal((o, c // groups) + k) * 3
    b = rng.standard_normal(o)
    if np.dtype(dtype).kind in "iub":
        x, w, b = (np.round(a) > 0 if dtype is np.bool_ else np.round(a) for a in (x, w, b))
    return x.astype(dtype), w.astype(dtype), b.astype(dtype)


@pytest.fixture(autouse=True)
def _products(monkeypatch):
    """The weight gradient by the decomposition's products: the direct kernel sums in its own order
    (its tests, against torch: test_native_conv_weight_grad.py)."""
    from plugtorch_backends.numpy_backend.native import gemm
    monkeypatch.setattr(gemm, "conv2d_weight_grad", lambda *a: None)


def _attrs(geometry):
    _, _, _, stride, padding, dilation, groups = geometry
    return dict(stride=stride, padding=padding, dilation=dilation, groups=groups)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.float16])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_forward_is_the_decomposition_bit_for_bit(geometry, dtype):
    x, w, b = _data(geometry, dtype)
    for bias in (b, None):
        got = KERNELS["conv2d"](x, w, bias, **_attrs(geometry))
        want = _conv(pt.tensor(x), pt.tensor(w), None if bias is None else pt.tensor(bias), **_attrs(geometry))
        assert got.dtype == want.numpy().dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_weight_grad_is_the_decomposition_bit_for_bit(geometry, dtype, monkeypatch):
    monkeypatch.setattr(geo, "CHUNK_BYTES", 64)  # several batch chunks (both sides), summed in order
    x, w, _ = _data(geometry, dtype)
    y = _conv(pt.tensor(x), pt.tensor(w), None, **_attrs(geometry))
    g = np.random.default_rng(1).standard_normal(y.shape).round().astype(dtype)
    got = KERNELS["conv2d_weight_grad"](g, x, weight_shape=w.shape, **_attrs(geometry))
    want = _conv_weight_grad(pt.tensor(g), pt.tensor(x), weight_shape=w.shape, **_attrs(geometry)).numpy()
    assert got.dtype == want.dtype and got.shape == w.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("chunk_bytes", [geo.CHUNK_BYTES, 20_000])
@pytest.mark.parametrize("groups", [1, 2])
def test_small_weights_sum_per_image_products(groups, chunk_bytes, monkeypatch):
    # MNIST's first layer at a real batch: the weight gradient as per-image products summed
    # over the batch (and over the chunks), on both sides, and the float64 answer within
    # float32 rounding
    monkeypatch.setattr(geo, "CHUNK_BYTES", chunk_bytes)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((16, 2, 28, 28)).astype(np.float32)
    g = rng.standard_normal((16, 4, 28, 28)).astype(np.float32)
    attrs = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=groups)
    shape = (4, 2 // groups, 3, 3)
    assert geo.weight_grad_product(4 // groups, 2 // groups * 9, 16, 28 * 28) == "per_image"
    got = KERNELS["conv2d_weight_grad"](g, x, weight_shape=shape, **attrs)
    want = _conv_weight_grad(pt.tensor(g), pt.tensor(x), weight_shape=shape, **attrs).numpy()
    np.testing.assert_array_equal(got, want)
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    exact = np.zeros(shape)
    for o in range(4):
        for ci in range(2 // groups):
            c = o // (4 // groups) * (2 // groups) + ci
            for i in range(3):
                for j in range(3):
                    exact[o, ci, i, j] = np.sum(g[:, o] * padded[:, c, i:i + 28, j:j + 28])
    np.testing.assert_allclose(got, exact, rtol=1e-4, atol=1e-3)


def test_layouts_do_not_change_the_values():
    # a pooled convolution output ((C, N, H, W) memory) and a strided slice feed the next layer
    geometry = GEOMETRIES[1]
    x, w, b = _data(geometry, np.float32)
    for view in (np.ascontiguousarray(x.swapaxes(0, 1)).swapaxes(0, 1),
                 np.pad(x, ((0, 0), (0, 0), (0, 0), (0, 3)))[..., :6]):
        np.testing.assert_array_equal(KERNELS["conv2d"](view, w, b, **_attrs(geometry)),
                                      KERNELS["conv2d"](x, w, b, **_attrs(geometry)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel, padding, dilation, width", [
    ((3, 3), (1, 1), (1, 1), 5),   # a "same" convolution: output rows as wide as the input's
    ((3, 3), (2, 1), (1, 1), 5),   # two output rows past each edge
    ((1, 3), (4, 1), (1, 1), 5),   # padding taller than the kernel: whole rows of zeros
    ((3, 3), (2, 2), (2, 2), 5),   # dilated
    ((1, 1), (1, 1), (1, 1), 7),   # a 5-wide input inside 7-wide rows, the output 7 wide
], ids=str)
def test_plane_spans_are_the_windows(kernel, padding, dilation, width, dtype):
    # stride-1 windows over input rows exactly one output row apart: im2col copies each
    # plane's valid rows as one span and zeroes what reaches into the padding
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, width)).astype(dtype)[..., :5]
    w = rng.standard_normal((4, 3) + kernel).astype(dtype)
    attrs = dict(stride=(1, 1), padding=padding, dilation=dilation, groups=1)
    got = KERNELS["conv2d"](x, w, None, **attrs)
    want = _conv(pt.tensor(np.ascontiguousarray(x)), pt.tensor(w), None, **attrs).numpy()
    assert got.shape[-1] == width  # the rows are as far apart as the output's
    np.testing.assert_array_equal(got, want)


def test_fewer_outputs_than_windows_use_the_first_ones():
    # conv_transpose2d's output_padding gives the weight gradient an input with spare windows
    x, w, _ = _data(GEOMETRIES[0], np.float32)
    g = np.random.default_rng(2).standard_normal((3, 4, 6, 5)).astype(np.float32)  # 7x6 input gives 7x6 windows
    got = KERNELS["conv2d_weight_grad"](g, x, weight_shape=w.shape, **_attrs(GEOMETRIES[0]))
    want = _conv_weight_grad(pt.tensor(g), pt.tensor(x), weight_shape=w.shape, **_attrs(GEOMETRIES[0])).numpy()
    np.testing.assert_array_equal(got, want)


def test_dispatch_runs_the_kernels(numpy_kernel_calls):
    calls = numpy_kernel_calls("conv2d", "conv2d_weight_grad")
    x = pt.randn(2, 3, 6, 6)
    w = pt.randn(4, 3, 3, 3, requires_grad=True)
    pt.nn.functional.conv2d(x, w, padding=1).sum().backward()
    assert calls == ["conv2d", "conv2d_weight_grad"] and w.grad.shape == w.shape


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_the_results_are_contiguous_as_torchs(geometry):
    # each image's patches multiplied on their own: (N, O, OH, OW) memory, no transposing copy
    x, w, b = _data(geometry, np.float32)
    y = KERNELS["conv2d"](x, w, b, **_attrs(geometry))
    gw = KERNELS["conv2d_weight_grad"](np.ones_like(y), x, weight_shape=w.shape, **_attrs(geometry))
    assert y.flags.c_contiguous and gw.flags.c_contiguous


def test_an_extension_built_before_per_image_patches_gives_the_same_values(monkeypatch):
    # an editable install's older build has im2col's (C*k, N*P) layout only: NumPy copies the
    # per-image patches instead, the same values
    from plugtorch_backends.numpy_backend.native import conv as native_conv
    geometry = GEOMETRIES[1]
    x, w, b = _data(geometry, np.float32)
    want = KERNELS["conv2d"](x, w, b, **_attrs(geometry))
    monkeypatch.setattr(native_conv, "_PER_IMAGE", 0)
    np.testing.assert_array_equal(KERNELS["conv2d"](x, w, b, **_attrs(geometry)), want)
