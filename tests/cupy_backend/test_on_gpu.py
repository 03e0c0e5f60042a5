"""Checks that need an NVIDIA GPU: the hand-written kernels compiled by NVRTC and run on the
device, against CuPy's own ufuncs, bit for bit. ``benchmarks/gpu_check.sh`` runs this module;
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
