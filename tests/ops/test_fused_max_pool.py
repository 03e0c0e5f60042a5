"""The NumPy backend's max_pool2d kernels: the backward routes each window's gradient exactly as
the op's decomposition does (first maximum, row-major; the last NaN where the maximum is NaN),
for every geometry, ties included, and
the forward (native only) computes the decomposition's running maximum. Each test
runs the NumPy kernel and the native (C) one. (Against torch: the conformance kit runs the op's
samples on whichever the backend registered.)"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import fused, native

import plugtorch as pt
from plugtorch.core.ops.pooling import _max_pool, _max_pool_backward

NATIVE_KERNELS = native.kernels()  # empty where the extension is not built (each use skips, saying why)
NATIVE = pytest.mark.skipif(not NATIVE_KERNELS, reason=native.status())
BACKWARDS = [pytest.param(fused.max_pool2d_backward, id="numpy"),
             pytest.param(NATIVE_KERNELS.get("max_pool2d_backward"), id="native", marks=NATIVE)]

GEOMETRIES = [  # kernel, stride, padding, dilation, ceil_mode
    ((2, 2), (2, 2), (0, 0), (1, 1), False),   # MaxPool2d(2) on an odd height: a row in no window
    ((2, 2), (2, 2), (0, 0), (1, 1), True),    # ... and with ceil_mode, a last window that overhangs
    ((3, 3), (1, 1), (1, 1), (1, 1), False),
    ((3, 2), (2, 1), (1, 0), (1, 1), True),
    ((2, 3), (3, 2), (0, 1), (2, 1), True),
    ((3, 3), (2, 2), (1, 1), (2, 2), False),
    ((2, 2), (3, 1), (0, 0), (1, 1), False),   # rows disjoint, columns overlapping
    ((2, 2), (4, 4), (0, 0), (2, 2), False),   # dilated and disjoint
]


@pytest.mark.parametrize("max_pool2d_backward", BACKWARDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ties", [False, True, "nans"], ids=["distinct", "ties", "nans"])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_the_kernel_routes_gradients_as_the_decomposition(dtype, ties, geometry, max_pool2d_backward):
    k, s, p, d, ceil = geometry
    rng = np.random.default_rng(0)
    x = rng.integers(0, 3, (2, 3, 9, 8)).astype(dtype) if ties else rng.standard_normal((2, 3, 9, 8)).astype(dtype)
    if ties == "nans":  # NaN maxima, many windows with two or more: the last NaN takes the gradient
        x[rng.random(x.shape) < 0.3] = np.nan
    out = pt.nn.functional.max_pool2d(pt.tensor(x), k, s, p, d, ceil)
    g = rng.standard_normal(out.shape).astype(dtype)
    attrs = dict(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=ceil)
    got = max_pool2d_backward(g, x, out.numpy(), **attrs)
    want = _max_pool_backward(pt.tensor(g), pt.tensor(x), out, **attrs).numpy()
    assert got.dtype == dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("max_pool2d_backward", BACKWARDS)
def test_a_channel_major_input_gives_the_same_gradient(max_pool2d_backward):
    # (C, N, H, W) memory viewed as NCHW (x.transpose(0, 1)): the kernel works in that order and
    # hands back torch's layout, contiguous
    rng = np.random.default_rng(2)
    x = np.ascontiguousarray(rng.standard_normal((3, 2, 8, 8)).astype(np.float32)).swapaxes(0, 1)
    out = pt.nn.functional.max_pool2d(pt.tensor(x), 2)
    g = rng.standard_normal(out.shape).astype(np.float32)
    attrs = dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1), ceil_mode=False)
    got = max_pool2d_backward(g, x, out.numpy(), **attrs)
    np.testing.assert_array_equal(got, max_pool2d_backward(g, np.ascontiguousarray(x), out.numpy(), **attrs))
    assert got.shape == x.shape and got.flags.c_contiguous


def test_dispatch_runs_the_kernel(numpy_kernel_calls):
    calls = numpy_kernel_calls("max_pool2d_backward")
    x = pt.randn(1, 2, 4, 4, requires_grad=True)
    pt.nn.functional.max_pool2d(x, 2).sum().backward()
    assert calls == ["max_pool2d_backward"] and list(itertools.chain(x.grad.numpy().reshape(-1))).count(1.0) == 8


@NATIVE
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("special", [False, True], ids=["plain", "nan-inf-zeros"])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_the_native_forward_is_the_decomposition(dtype, special, geometry):
    k, s, p, d, ceil = geometry
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, 3, 9, 8)) * 50).astype(dtype)
    if special and np.dtype(dtype).kind == "f":  # NaN propagates, infinities win and lose
        x.reshape(-1)[rng.choice(x.size, 40, replace=False)] = [np.nan, -np.inf, np.inf, -0.0, 0.0] * 8
    attrs = dict(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=ceil)
    got = NATIVE_KERNELS["max_pool2d"](x, **attrs)
    want = _max_pool(pt.tensor(x), **attrs).numpy()
    assert got.dtype == x.dtype and got.shape == want.shape
    # equal values, NaN where NaN; not bits: on a 0.0/-0.0 tie the C loop keeps the first, as torch
    # does, while NumPy's SIMD maximum may return either
    np.testing.assert_array_equal(got, want)


@NATIVE
def test_the_native_forward_of_a_channel_major_input_is_contiguous():
    x = np.ascontiguousarray(np.random.default_rng(3).standard_normal((4, 2, 6, 6)).astype(np.float32))
    x = x.swapaxes(0, 1)
    attrs = dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1), ceil_mode=False)
    got = NATIVE_KERNELS["max_pool2d"](x, **attrs)
    assert got.flags.c_contiguous  # torch's pooled output is contiguous for any non-channels-last input
    np.testing.assert_array_equal(got, NATIVE_KERNELS["max_pool2d"](np.ascontiguousarray(x), **attrs))


@NATIVE
def test_the_native_backward_gives_non_maxima_zero_where_grad_output_is_not_finite():
    # torch routes each window's gradient to one element; the others get exactly 0, not inf * 0
    x = np.array([[[[1.0, 2.0], [3.0, 4.0]]]], np.float32)
    attrs = dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1), ceil_mode=False)
    out = NATIVE_KERNELS["max_pool2d"](x, **attrs)
    got = NATIVE_KERNELS["max_pool2d_backward"](np.full((1, 1, 1, 1), np.inf, np.float32), x, out, **attrs)
    np.testing.assert_array_equal(got, [[[[0, 0], [0, np.inf]]]])
