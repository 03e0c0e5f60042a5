"""relu's gradient op, threshold_backward: the NumPy backend's native kernel equals the op's
decomposition for every layout and dtype (and gives 0, not nan, where the gradient is not
finite and the input is at or below the threshold, as torch does); relu's backward runs it.
(Against torch's aten::threshold_backward: the conformance kit runs the op's samples.)"""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch as pt
from plugtorch.core.ops.activation import _threshold_backward
from plugtorch_backends.numpy_backend import native

KERNELS = native.kernels()
pytestmark = pytest.mark.skipif(not KERNELS, reason=native.status())


def _layouts(rng, dtype):
    base = rng.standard_normal((4, 3, 5, 6)).astype(dtype)
    yield "contiguous", base
    yield "channel-major", np.ascontiguousarray(base.swapaxes(0, 1)).swapaxes(0, 1)
    yield "strided", base[:, :, ::2]
    yield "0-d", base[0, 0, 0, 0].reshape(())
    yield "empty", base[:0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threshold", [0, 0.25])
def test_the_kernel_is_the_decomposition(dtype, threshold):
    rng = np.random.default_rng(0)
    for name, x in _layouts(rng, dtype):
        g = np.empty_like(x)
        g[...] = rng.standard_normal(x.shape)
        got = KERNELS["threshold_backward"](g, x, threshold=threshold)
        want = _threshold_backward(pt.tensor(g), pt.tensor(x), threshold=threshold).numpy()
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_array_equal(got, want, err_msg=name)
        if name in ("contiguous", "channel-major"):  # handed back in the input's layout
            assert got.strides == x.strides, name


def test_mixed_layouts_and_dtypes_take_the_formula():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    for g in (np.asfortranarray(rng.standard_normal((5, 4)).astype(np.float32)),
              rng.standard_normal((5, 4))):
        np.testing.assert_array_equal(KERNELS["threshold_backward"](g, x, threshold=0),
                                      g * (x > 0).astype(g.dtype))


def test_no_nan_below_the_threshold():
    x = np.array([-1.0, 0.0, 2.0], np.float32)
    g = np.array([np.inf, np.nan, np.inf], np.float32)
    np.testing.assert_array_equal(KERNELS["threshold_backward"](g, x, threshold=0), [0, 0, np.inf])


def test_relu_backward_runs_the_kernel(numpy_kernel_calls):
    calls = numpy_kernel_calls("threshold_backward")
    x = pt.tensor([[-1.0, 2.0], [3.0, -4.0]], requires_grad=True)
    pt.relu(x).sum().backward()
    assert calls == ["threshold_backward"]
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1], [1, 0]])
