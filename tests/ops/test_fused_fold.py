"""The NumPy backend's fold kernel (col2im) adds each kernel offset's patches in place, in the
lowering's order, so it equals the op's lowering bit for bit, for any rank, stride, dilation
and dtype. (Against torch: the conformance kit runs fold's samples on the kernel.)"""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import fused, native

import plugtorch as pt
from plugtorch.core.ops.window import _lower_fold

# the native kernel takes two window dims in float32/float64 and hands the rest to the NumPy one
NATIVE_KERNELS = native.kernels()  # empty where the extension is not built (the cases skip, saying why)
FOLDS = [pytest.param(fused.fold, id="numpy"),
         pytest.param(NATIVE_KERNELS.get("fold"), id="native",
                      marks=pytest.mark.skipif(not NATIVE_KERNELS, reason=native.status()))]

GEOMETRIES = [  # lead shape, spatial size, window, strides, dilation
    ((2, 3), (9, 8), (3, 3), (1, 1), (1, 1)),
    ((4,), (10, 7), (2, 3), (2, 1), (1, 2)),
    ((1, 2), (11,), (3,), (3,), (2,)),
    ((2,), (6, 5, 4), (2, 2, 2), (1, 2, 1), (1, 1, 2)),
    ((3,), (4, 4), (2, 2), (2, 2), (1, 1)),      # disjoint windows
    ((2,), (5, 5), (5, 5), (1, 1), (1, 1)),      # one window
]


@pytest.mark.parametrize("fold", FOLDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_the_kernel_equals_the_lowering(geometry, dtype, fold):
    lead, size, window, strides, dilation = geometry
    counts = tuple((s - d * (w - 1) - 1) // st + 1 for s, w, st, d in zip(size, window, strides, dilation))
    rng = np.random.default_rng(0)
    cols = rng.standard_normal(lead + counts + window)
    cols = (cols > 0) if dtype is np.bool_ else (cols * 10).astype(dtype)
    attrs = dict(shape=lead + size, window=window, strides=strides, dilation=dilation)
    got = fold(cols, **attrs)
    want = _lower_fold(pt.get_registry().backends["numpy"], cols, **attrs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fold", FOLDS)
def test_a_transposed_patch_layout_gives_the_same_sums(fold):
    # conv2d_input_grad hands fold a permuted (C, N, oh, ow, kh, kw) view, offsets outermost in memory
    rng = np.random.default_rng(1)
    base = rng.standard_normal((3, 3, 2, 4, 6, 6)).astype(np.float32)
    cols = base.transpose(2, 3, 4, 5, 0, 1)
    attrs = dict(shape=(2, 4, 8, 8), window=(3, 3), strides=(1, 1), dilation=(1, 1))
    np.testing.assert_array_equal(fold(cols, **attrs), fold(np.ascontiguousarray(cols), **attrs))


def test_dispatch_runs_the_kernel(numpy_kernel_calls):
    calls = numpy_kernel_calls("fold")
    # torch's fold (col2im); conv2d's input gradient has a native kernel of its own on this backend
    cols = pt.randn(1, 2 * 3 * 3, 36)
    y = pt.nn.functional.fold(cols, (6, 6), 3, padding=1)
    assert calls and y.shape == (1, 2, 6, 6)
