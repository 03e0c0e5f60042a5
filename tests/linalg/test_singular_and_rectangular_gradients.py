"""Gradients where the textbook formulas break: det at a singular matrix (the adjugate, finite,
not det * A^-T = 0 * inf), and the LU factorisation of wide and tall matrices (torch's
linalg_lu_backward for m < n and m > n), against torch and the exact cofactors."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch

SINGULAR = [
    [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]],  # rank 2
    [[1.0, 2.0], [2.0, 4.0]],  # rank 1
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]],  # rank 2, a zero pivot
    [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]],  # rank 2
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]],  # rank 1: the adjugate is 0
    [[0.0, 0.0], [0.0, 0.0]],
]


def _cofactors(a):
    """d det / dA: the cofactor matrix, from the minors' determinants."""
    n = a.shape[-1]
    out = np.empty_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, 0), j, 1)
            out[i, j] = (-1) ** (i + j) * (np.linalg.det(minor) if n > 1 else 1.0)
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("i", range(len(SINGULAR)))
def test_det_gradient_at_a_singular_matrix_is_the_cofactor_matrix(torch, dtype, i):
    a = np.array(SINGULAR[i])
    x = plugtorch.tensor(a, dtype=getattr(plugtorch, dtype), requires_grad=True)
    det = plugtorch.linalg.det(x)
    (g,) = plugtorch.autograd.grad(det * 1.5, x)
    want = 1.5 * _cofactors(a)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(g.numpy(), want, rtol=tol, atol=tol * np.abs(a).max() ** 2)
    # torch takes its LU path where its determinant rounds to non-zero (the rank-2 3 x 3's do);
    # where it is exactly 0, torch gives 0 instead of the cofactors, which plugtorch keeps
    t = torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=True)
    tdet = torch.linalg.det(t)
    if tdet.item() != 0:
        (tg,) = torch.autograd.grad(tdet * 1.5, t)
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-4 if dtype == "float32" else 1e-9, atol=tol)
    # torch.det, and a batch mixing singular and invertible matrices (each by its own rule)
    batch = np.stack([a, a + np.eye(len(a))])
    xb = plugtorch.tensor(batch, dtype=getattr(plugtorch, dtype), requires_grad=True)
    (gb,) = plugtorch.autograd.grad(plugtorch.det(xb).sum(), xb)
    np.testing.assert_allclose(gb.numpy()[0], want / 1.5, rtol=tol, atol=tol * np.abs(a).max() ** 2)
    np.testing.assert_allclose(gb.numpy()[1], _cofactors(batch[1]), rtol=tol, atol=tol * 10)


def test_det_gradient_at_a_singular_complex_matrix_is_the_conjugate_cofactor_matrix(torch):
    rng = np.random.default_rng(0)
    u, v = rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2)), rng.standard_normal((2, 3))
    a = u @ v  # rank 2
    x = plugtorch.tensor(a, requires_grad=True)
    (g,) = plugtorch.autograd.grad(plugtorch.linalg.det(x).real, x)
    # torch's convention for a real loss L of complex A: the gradient is dL/d conj(A)-shaped, the
    # conjugate of the holomorphic derivative (the cofactors)
    np.testing.assert_allclose(g.numpy(), np.conj(_cofactors(a)), rtol=1e-10, atol=1e-10)
    t = torch.tensor(a, requires_grad=True)
    tdet = torch.linalg.det(t)
    if tdet.abs().item() != 0:
        (tg,) = torch.autograd.grad(tdet.real, t)
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-7, atol=1e-7)


SHAPES = [(3, 5), (5, 3), (2, 4, 3), (2, 3, 4), (1, 6), (6, 1), (4, 4)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
def test_lu_and_lu_factor_gradients_of_wide_and_tall_matrices_match_torch(torch, shape, dtype):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if dtype == "complex128" else 0)
    weights = [rng.standard_normal(shape) for _ in range(2)]
    results = []
    for lib in (plugtorch, torch):
        x = lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=True)
        _, L, U = lib.linalg.lu(x)
        LU, _ = lib.linalg.lu_factor(x)
        k = min(shape[-2:])
        w = [lib.tensor(wt, dtype=getattr(lib, dtype)) for wt in weights]
        loss = ((L * w[0][..., :k]).sum() + (U * w[1][..., :k, :]).sum() + (LU * w[0]).sum() * 0.5).abs()
        (g,) = lib.autograd.grad(loss, x)
        results.append(g.numpy())
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(results[0], results[1], rtol=tol, atol=tol)


def test_lu_gradient_of_a_wide_matrix_passes_gradcheck():
    rng = np.random.default_rng(2)
    x = plugtorch.tensor(rng.standard_normal((2, 3, 5)), requires_grad=True)
    assert plugtorch.autograd.gradcheck(lambda a: plugtorch.linalg.lu_factor(a)[0], (x,))
    y = plugtorch.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    assert plugtorch.autograd.gradcheck(lambda a: plugtorch.linalg.lu(a)[1:], (y,))
