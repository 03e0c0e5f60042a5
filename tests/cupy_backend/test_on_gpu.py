"""Checks that need an NVIDIA GPU: the hand-written kernels compiled by NVRTC and run on the
device, against CuPy's own ufuncs, bit for bit, and the fused-op kernels (gelu, layer_norm, the
LSTM step, attention) against the NumPy backend within rounding. ``benchmarks/gpu_check.sh`` runs this module;
on a machine without a GPU (CI) every test here is skipped, saying why."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.cupy_backend import binary_kernels

import plugtorch

_CUPY = plugtorch.get_registry().backends["cupy"]
if not _CUPY.available:
    pytest.skip(f"needs a GPU the CuPy backend can run on ({_CUPY.unavailable_reason}); "
                "benchmarks/gpu_check.sh runs these on one", allow_module_level=True)

import cupy  # noqa: E402  (only where the backend is available)

UFUNCS = {"add": cupy.add, "sub": cupy.subtract, "mul": cupy.multiply, "div": cupy.true_divide}
SPECIALS = [0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 1e-40, -3e-310, 1e38, 2.0 ** -1074]


def _bits(a):
    a = cupy.asnumpy(a)
    return a.view(f"u{a.itemsize}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", binary_kernels.OPS)
@pytest.mark.parametrize("extra", [0, 1, 2, 3, 5])
def test_wide_binary_kernels_equal_cupys_ufuncs(op, dtype, extra):
    n = binary_kernels.MIN_ELEMENTS * 3 + extra  # every tail length after the 16-byte packs
    rng = np.random.default_rng(extra)
    a, b = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    a[:len(SPECIALS)], b[:len(SPECIALS)] = SPECIALS, SPECIALS[::-1]
    x, y = cupy.asarray(a), cupy.asarray(b)
    assert binary_kernels.packable(x, y)
    got = _CUPY.primitives[op](x, y)
    np.testing.assert_array_equal(_bits(got), _bits(UFUNCS[op](x, y)))


def test_misaligned_and_broadcast_operands_fall_back_to_the_ufunc():
    base = cupy.arange(binary_kernels.MIN_ELEMENTS * 2 + 8, dtype=cupy.float32)
    x, y = base[1:binary_kernels.MIN_ELEMENTS * 2 + 1], base[:binary_kernels.MIN_ELEMENTS * 2]
    assert not binary_kernels.packable(x, y)  # x starts 4 bytes past a 16-byte boundary
    np.testing.assert_array_equal(cupy.asnumpy(_CUPY.primitives["add"](x, y)), cupy.asnumpy(x + y))
    row = base[:8]
    grid = base[: binary_kernels.MIN_ELEMENTS * 2].reshape(-1, 8)
    np.testing.assert_array_equal(cupy.asnumpy(_CUPY.primitives["mul"](grid, row)), cupy.asnumpy(grid * row))


def _host_kernel(name):
    return plugtorch.get_registry().backends["numpy"].kernels[name]


# the fused-op kernels on the device against the NumPy backend's on the host: within rounding,
# since the GPU contracts products into FMAs and has its own erf, tanh and exp
FUSED_CASES = {
    "gelu": lambda r: ((r.standard_normal((37, 301)),), dict(approximate="tanh")),
    "gelu_backward": lambda r: ((r.standard_normal((1000,)), r.standard_normal((1000,))), dict(approximate="none")),
    "layer_norm": lambda r: ((r.standard_normal((300, 777)) + 3, r.standard_normal(777), r.standard_normal(777)),
                             dict(normalized_shape=(777,), eps=1e-5)),
    "layer_norm_backward": lambda r: ((r.standard_normal((300, 65)), r.standard_normal((300, 65)),
                                       r.standard_normal(65)), dict(normalized_shape=(65,), eps=1e-5)),
    "layer_norm_weight_grad": lambda r: ((r.standard_normal((1000, 33)), r.standard_normal((1000, 33))),
                                         dict(normalized_shape=(33,), eps=1e-5)),
    "layer_norm_gradients": lambda r: ((r.standard_normal((1000, 65)), r.standard_normal((1000, 65)) + 3,
                                        r.standard_normal(65)), dict(normalized_shape=(65,), eps=1e-5)),
    "lstm_layer": lambda r: ((r.standard_normal((7, 5, 4 * 33)), r.standard_normal((5, 33)),
                              r.standard_normal((5, 33)), r.standard_normal((4 * 33, 33)) / 6,
                              r.standard_normal(4 * 33)), dict(reverse=True)),
    "scaled_dot_product_attention": lambda r: ((r.standard_normal((2, 3, 130, 64)), r.standard_normal((2, 3, 77, 64)),
                                                r.standard_normal((2, 3, 77, 40)), None, None),
                                               dict(scale=0.125, is_causal=True)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(FUSED_CASES))
def test_fused_op_kernels_on_the_device_equal_the_numpy_backend(name, dtype):
    args, attrs = FUSED_CASES[name](np.random.default_rng(0))
    args = [None if a is None else a.astype(dtype) for a in args]
    want = _host_kernel(name)(*args, **attrs)
    got = _CUPY.kernels[name](*[None if a is None else cupy.asarray(a) for a in args], **attrs)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-11)
    np.testing.assert_allclose(cupy.asnumpy(got), want, **tol)
