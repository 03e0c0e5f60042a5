"""The CuPy backend's threshold_backward, tanh_backward and sigmoid_backward kernels, run on the
CPU from the same CUDA source (``cpu_load``), against the NumPy backend's kernels bit for bit
(the native ones where built, else the NumPy passes they equal): every layout the wrappers run
on flat memory, the ones they hand to the formula, both float dtypes, empty and 0-d arrays."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.cupy_backend import activation_kernels
from plugtorch_backends.numpy_backend import fused

FLOATS = [np.float32, np.float64]


@pytest.fixture(scope="module")
def kernels(cpu_load):
    return activation_kernels.make_kernels(np, cpu_load)


def _numpy_kernel(name, threshold):
    if name == "threshold_backward":  # the native kernel's values (typed.h): 0, not nan, below
        return lambda g, x: np.where(x <= threshold, np.zeros((), g.dtype), g)
    return getattr(fused, name)


def _layouts(rng, dtype):
    base = rng.uniform(-1, 1, (4, 3, 5, 6)).astype(dtype)
    yield "contiguous", base, True
    yield "channel-major", np.ascontiguousarray(base.swapaxes(0, 1)).swapaxes(0, 1), True
    yield "fortran", np.asfortranarray(base), True
    yield "0-d", base[0, 0, 0, 0].reshape(()), True
    yield "empty", base[:0], False  # (np.empty_like gives an empty array other strides)
    yield "strided", base[:, :, ::2], False
    yield "flipped", base[::-1], False


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ["threshold_backward", "tanh_backward", "sigmoid_backward"])
def test_the_kernels_equal_the_numpy_backend_bit_for_bit(kernels, name, dtype):
    rng = np.random.default_rng(0)
    for layout, x, flat in _layouts(rng, dtype):
        g = np.empty_like(x)
        g[...] = rng.standard_normal(x.shape)
        assert activation_kernels._flat(g, x) is flat, layout
        kwargs = {"threshold": 0.25} if name == "threshold_backward" else {}
        got = kernels[name](g, x, **kwargs)
        want = _numpy_kernel(name, 0.25)(g, x)
        assert got.dtype == want.dtype and got.shape == want.shape, layout
        np.testing.assert_array_equal(got, want, err_msg=layout)
        if flat and layout != "0-d":
            assert got.strides == x.strides, layout  # handed back in the operands' layout


def test_no_nan_below_the_threshold(kernels):
    x = np.array([-1.0, 0.0, 2.0], np.float32)
    g = np.array([np.inf, np.nan, np.inf], np.float32)
    np.testing.assert_array_equal(kernels["threshold_backward"](g, x, threshold=0), [0, 0, np.inf])


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_nan_input_passes_the_gradient_on(kernels, dtype):
    # torch's rule is "0 where input <= threshold": NaN is not, so its gradient flows
    x = np.array([np.nan, -1.0, 0.5, np.nan], dtype)
    g = np.array([3.0, 4.0, 5.0, -6.0], dtype)
    np.testing.assert_array_equal(kernels["threshold_backward"](g, x, threshold=0), [3, 0, 5, -6])
    np.testing.assert_array_equal(kernels["threshold_backward"](g[::-1], x[::-1], threshold=0), [-6, 5, 0, 3])


@pytest.mark.parametrize("name", ["tanh_backward", "sigmoid_backward"])
def test_float16_takes_the_formula(kernels, name):
    # (operands of two dtypes never reach a kernel: the ops promote them first)
    rng = np.random.default_rng(2)
    g, y = rng.standard_normal((3, 4)).astype(np.float16), rng.uniform(-1, 1, (3, 4)).astype(np.float16)
    got = kernels[name](g, y)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, getattr(fused, name)(g, y))
