"""The NumPy backend's max_pool2d_backward kernel routes each window's gradient exactly as the
op's decomposition does (first maximum, row-major), for every geometry, ties included.
(Against torch: the conformance kit runs the op's samples on the kernel's backend.)"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import plugtorch as pt
from plugtorch.core.ops.pooling import _max_pool_backward
from plugtorch_backends.numpy_backend.fused import max_pool2d_backward

GEOMETRIES = [  # kernel, stride, padding, dilation, ceil_mode
    ((2, 2), (2, 2), (0, 0), (1, 1), False),
    ((3, 3), (1, 1), (1, 1), (1, 1), False),
    ((3, 2), (2, 1), (1, 0), (1, 1), True),
    ((2, 3), (3, 2), (0, 1), (2, 1), True),
    ((3, 3), (2, 2), (1, 1), (2, 2), False),
    ((2, 2), (3, 1), (0, 0), (1, 1), False),   # rows disjoint, columns overlapping
    ((2, 2), (4, 4), (0, 0), (2, 2), False),   # dilated and disjoint
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_the_kernel_routes_gradients_as_the_decomposition(dtype, ties, geometry):
    k, s, p, d, ceil = geometry
    rng = np.random.default_rng(0)
    x = rng.integers(0, 3, (2, 3, 9, 8)).astype(dtype) if ties else rng.standard_normal((2, 3, 9, 8)).astype(dtype)
    out = pt.nn.functional.max_pool2d(pt.tensor(x), k, s, p, d, ceil)
    g = rng.standard_normal(out.shape).astype(dtype)
    attrs = dict(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=ceil)
    got = max_pool2d_backward(g, x, out.numpy(), **attrs)
    want = _max_pool_backward(pt.tensor(g), pt.tensor(x), out, **attrs).numpy()
    assert got.dtype == dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)


def test_a_channel_major_input_gives_the_same_gradient():
    # a convolution's output is (C, N, H, W) memory viewed as NCHW; the kernel follows that layout
    rng = np.random.default_rng(2)
    x = np.ascontiguousarray(rng.standard_normal((3, 2, 8, 8)).astype(np.float32)).swapaxes(0, 1)
    out = pt.nn.functional.max_pool2d(pt.tensor(x), 2)
    g = rng.standard_normal(out.shape).astype(np.float32)
    attrs = dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1), ceil_mode=False)
    got = max_pool2d_backward(g, x, out.numpy(), **attrs)
    np.testing.assert_array_equal(got, max_pool2d_backward(g, np.ascontiguousarray(x), out.numpy(), **attrs))
    assert got.shape == x.shape


def test_dispatch_runs_the_kernel(numpy_kernel_calls):
    calls = numpy_kernel_calls("max_pool2d_backward")
    x = pt.randn(1, 2, 4, 4, requires_grad=True)
    pt.nn.functional.max_pool2d(x, 2).sum().backward()
    assert calls == ["max_pool2d_backward"] and list(itertools.chain(x.grad.numpy().reshape(-1))).count(1.0) == 8
