"""The NumPy backend's add_at (the index_add primitive's accumulation, an embedding's gradient):
rows grouped and summed against NumPy's add.at, repeated and negative indices included, and the
cases it hands to add.at (several index arrays, broadcast values, other dtypes, out of range)."""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.numpy_backend.fused import add_at

import plugtorch


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize(("rows", "index_shape", "tail"), [(65, (16, 64), (128,)), (5, (7,), ()), (3, (2, 4), (2, 3))])
def test_rows_summed_as_add_at(dtype, rows, index_shape, tail):
    rng = np.random.default_rng(0)
    idx = rng.integers(-rows, rows, index_shape)
    values = rng.standard_normal(index_shape + tail).astype(dtype)
    base = rng.standard_normal((rows, *tail)).astype(dtype)
    got, want = base.copy(), base.copy()
    add_at(got, (idx,), values)
    np.add.at(want, (idx,), values)
    # (the base plus each row's sum, where add.at adds one by one: equal to rounding)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_other_indexing_goes_to_add_at():
    rng = np.random.default_rng(1)
    out, want = np.zeros((4, 3)), np.zeros((4, 3))
    index = (np.array([0, 0, 3]), np.array([1, 1, 2]))
    add_at(out, index, np.ones(3))
    np.add.at(want, index, np.ones(3))
    np.testing.assert_array_equal(out, want)
    out, want = np.zeros((4, 3)), np.zeros((4, 3))
    add_at(out, (np.array([1, 1]),), np.float64(2.0))  # broadcast values
    np.add.at(want, (np.array([1, 1]),), np.float64(2.0))
    np.testing.assert_array_equal(out, want)
    with pytest.raises(IndexError):
        add_at(np.zeros((4, 3)), (np.array([4]),), rng.standard_normal((1, 3)))


def test_an_embeddings_gradient_equals_torchs():
    torch = pytest.importorskip("torch", reason="torch is the oracle of this test")
    rng = np.random.default_rng(2)
    idx = rng.integers(0, 65, (16, 64))
    w = rng.standard_normal((65, 32)).astype(np.float32)
    g = rng.standard_normal((16, 64, 32)).astype(np.float32)
    pw = plugtorch.tensor(w, requires_grad=True)
    plugtorch.nn.functional.embedding(plugtorch.tensor(idx), pw).backward(plugtorch.tensor(g))
    tw = torch.tensor(w, requires_grad=True)
    torch.nn.functional.embedding(torch.tensor(idx), tw).backward(torch.tensor(g))
    np.testing.assert_allclose(pw.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-5)
