"""(..., m, k) @ (k, n) runs as one GEMM over the folded leading dims (matmul's primitive and
linear's kernel on the NumPy backend): the same values as the stacked product for every layout
and size, empty ones included."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
import plugtorch.nn.functional as F

CASES = [
    ((35, 20, 16), False),
    ((2, 3, 4, 16), False),
    ((20, 35, 16), True),  # a transposed (non-contiguous) view: folded through a copy
    ((0, 5, 16), False),
    ((3, 0, 16), False),
]


def _input(shape, transposed, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    t = plugtorch.tensor(x)
    return (t.transpose(0, 1), x.swapaxes(0, 1)) if transposed else (t, x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("shape", "transposed"), CASES)
def test_matmul_and_linear_equal_the_stacked_product(shape, transposed, dtype):
    t, x = _input(shape, transposed, dtype)
    w = np.random.default_rng(1).standard_normal((7, 16)).astype(dtype)
    b = np.linspace(-1, 1, 7).astype(dtype)
    want = np.matmul(x, w.T)  # NumPy's stacked product, one GEMM per leading index
    tol = 1e-5 if dtype == np.float32 else 1e-12
    got = plugtorch.matmul(t, plugtorch.tensor(w.T.copy()))
    assert tuple(got.shape) == want.shape and got.is_contiguous()
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)
    lin = F.linear(t, plugtorch.tensor(w), plugtorch.tensor(b))
    np.testing.assert_allclose(lin.numpy(), want + b, rtol=tol, atol=tol)


def test_an_empty_inner_dim_gives_zeros():
    x = plugtorch.zeros(2, 3, 0)
    got = plugtorch.matmul(x, plugtorch.zeros(0, 4))
    np.testing.assert_array_equal(got.numpy(), np.zeros((2, 3, 4), np.float32))
