"""The linear-algebra primitives from the standard's ``linalg`` extension.

``cholesky``, ``qr``, ``svd`` and ``eigh`` are one call each (the extension has no UPLO: the
upper triangle of A is the lower one of its conjugate transpose). The extension defines no LU
factorisation and no triangular solve: both are built here, one column (row) per step.
``eig`` is served where the namespace has it (the 2025 revision's ``linalg.eig``). A Cholesky
factorisation the extension refuses (a matrix that is not positive-definite) is redone column
by column to mark the failing minor, as the contract asks.
"""
from __future__ import annotations

import numpy


def make_linalg(xp) -> dict:
    la = xp.linalg

    def conj(x):
        return xp.conj(x) if xp.isdtype(x.dtype, "complex floating") else x

    def mT(x):
        return xp.matrix_transpose(x)

    def column_cholesky(x):
        n = x.shape[-1]
        out = xp.zeros_like(x)
        failed = xp.zeros(x.shape[:-2], dtype=xp.bool)
        for j in range(n):
            row = out[..., j, :j]
            d = xp.real(x[..., j, j] - xp.sum(row * conj(row), axis=-1))
            failed = xp.logical_or(failed, xp.logical_not(d > 0))
            dj = xp.sqrt(xp.where(failed, xp.asarray(xp.nan, dtype=d.dtype), d))
            out[..., j, j] = xp.astype(dj, x.dtype)
            if j + 1 < n:
                below = x[..., j + 1:, j] - xp.matmul(out[..., j + 1:, :j], conj(row)[..., None])[..., 0]
                out[..., j + 1:, j] = below / xp.astype(dj, x.dtype)[..., None]
        return out

    def cholesky(x):
        try:
            with numpy.errstate(all="ignore"):
                return la.cholesky(x)
        except numpy.linalg.LinAlgError:
            return column_cholesky(x)

    def qr(x, complete):
        q, r = la.qr(x, mode="complete" if complete else "reduced")
        return q, r

    def svd(x, full_matrices, compute_uv):
        if not compute_uv:
            return la.svdvals(x)
        u, s, vh = la.svd(x, full_matrices=full_matrices)
        return u, s, vh

    def eigh(x, upper, compute_v):
        a = conj(mT(x)) if upper else x
        if not compute_v:
            return la.eigvalsh(a)
        w, v = la.eigh(a)
        return w, v

    def eig(x, compute_v):
        if not compute_v:
            return la.eigvals(x)
        w, v = la.eig(x)
        return w, v

    def solve_triangular(a, b, upper, unitriangular):
        n = a.shape[-1]
        dtype = xp.result_type(a.dtype, b.dtype)
        shape = tuple(numpy.broadcast_shapes(a.shape[:-2], b.shape[:-2])) + tuple(b.shape[-2:])
        out = xp.zeros(shape, dtype=dtype)
        for i in (range(n - 1, -1, -1) if upper else range(n)):
            lo, hi = (i + 1, n) if upper else (0, i)
            r = b[..., i, :] - xp.matmul(a[..., i:i + 1, lo:hi], out[..., lo:hi, :])[..., 0, :]
            out[..., i, :] = r if unitriangular else r / a[..., i, i][..., None]
        return out

    def lu_factor(x):
        # getf2's partial pivoting; the row swap is a where over row masks (the standard has no
        # writes at per-matrix indices)
        a = xp.asarray(x, copy=True)
        m, n = a.shape[-2:]
        k = min(m, n)
        rows = xp.reshape(xp.arange(m), (m, 1))
        pivots = []
        for j in range(k):
            col = a[..., j:, j]
            complex_ = xp.isdtype(col.dtype, "complex floating")
            size = xp.abs(xp.real(col)) + xp.abs(xp.imag(col)) if complex_ else xp.abs(col)
            p = xp.argmax(size, axis=-1) + j
            pivots.append(p + 1)
            row_j = a[..., j:j + 1, :]
            row_p = xp.take_along_axis(a, xp.broadcast_to(p[..., None, None], a.shape[:-2] + (1, n)), axis=-2)
            is_j, is_p = rows == j, rows == p[..., None, None]
            a = xp.where(is_j, row_p, xp.where(is_p, row_j, a))
            pivot = a[..., j, j]
            if j + 1 < m:
                scale = xp.where(pivot == 0, xp.ones_like(pivot), pivot)
                a[..., j + 1:, j] = a[..., j + 1:, j] / scale[..., None]
                if j + 1 < n:
                    a[..., j + 1:, j + 1:] = a[..., j + 1:, j + 1:] - a[..., j + 1:, j:j + 1] * a[..., j:j + 1, j + 1:]
        piv = xp.stack(pivots, axis=-1) if pivots else xp.zeros(a.shape[:-2] + (0,), dtype=xp.int64)
        return a, xp.astype(piv, xp.int32)

    table = {"cholesky": cholesky, "qr": qr, "svd": svd, "eigh": eigh, "solve_triangular": solve_triangular,
             "lu_factor": lu_factor}
    if hasattr(la, "eig"):
        table["eig"] = eig
    return table


__all__ = ["make_linalg"]
