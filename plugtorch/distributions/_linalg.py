"""Cholesky factorisation and lower-triangular solves written with plugtorch ops.

The op table has no cholesky or triangular solve yet. These loop over the (small) event dimension
with vectorised, differentiable ops, so MultivariateNormal gets gradients through autograd; the
cost is O(d) op calls, fine for the event sizes distributions use.
"""
from __future__ import annotations

import plugtorch as pt


def cholesky(a):
    """Lower Cholesky factor of a batch of symmetric positive-definite matrices (...,d,d).

    A matrix that is not positive definite gives NaN on its diagonal (the square root of a
    non-positive pivot), which callers check."""
    d = a.shape[-1]
    a = 0.5 * (a + a.transpose(-1, -2))  # read both triangles, so the gradient is symmetric as torch's
    cols: list = []
    for j in range(d):
        col = a[..., :, j]
        if cols:
            prev = pt.stack(cols, -1)  # (..., d, j)
            col = col - (prev * prev[..., j:j + 1, :]).sum(-1)
        pivot = col[..., j:j + 1]
        safe = pt.where(pivot > 0, pivot, pt.full_like(pivot, float("nan")))
        mask = (pt.arange(d, device=a.device) >= j).to(a.dtype)
        cols.append(col / safe.sqrt() * mask)
    return pt.stack(cols, -1)


def solve_lower(lower, b):
    """x with lower @ x = b for lower-triangular ``lower`` (...,d,d) and b (...,d,m), by forward substitution."""
    d = lower.shape[-1]
    rows: list = []
    for i in range(d):
        r = b[..., i, :]
        if rows:
            prev = pt.stack(rows, -2)  # (..., i, m)
            r = r - (lower[..., i, :i].unsqueeze(-1) * prev).sum(-2)
        rows.append(r / lower[..., i, i:i + 1])
    return pt.stack(rows, -2)


def diagonal(m):
    return pt.linalg.diagonal(m, dim1=-2, dim2=-1)
