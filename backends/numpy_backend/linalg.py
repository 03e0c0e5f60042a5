"""The linear-algebra primitives (``cholesky``, ``qr``, ``svd``, ``eigh``, ``eig``, ``lu_factor``,
``solve_triangular``) over an array namespace ``xp``: NumPy's LAPACK through ``numpy.linalg``,
or CuPy's cuSOLVER through ``cupy.linalg``.

Every one takes a batch of matrices ``(..., m, n)`` and returns what the contract
(``plugtorch.core.primitives``) states. Two have no LAPACK call of their own in either library:
``solve_triangular`` is gesv on the (upper) triangular matrix, which pivots nowhere and so
substitutes as trsm does (a zero pivot falls back to a substitution loop, giving inf/nan), and
``lu_factor`` is getrf's recursion written out: column panels factored by a loop (each step
one vectorised operation over the whole batch), the rest a triangular solve and one product per
level. ``cholesky`` of a matrix that is not positive-definite is rerun as a column loop to find
the failing minor, which neither library reports.
"""
from __future__ import annotations

import math

import numpy


def make_linalg(xp) -> dict:
    """primitive name -> function for the linear-algebra primitives ``xp.linalg`` can serve (a
    namespace without ``eig``, as CuPy before 14, leaves that one out: the ops needing it then
    name the primitive and the backend)."""
    la = xp.linalg
    errors = tuple({numpy.linalg.LinAlgError, getattr(la, "LinAlgError", numpy.linalg.LinAlgError)})

    def batch_of(x):
        lead = x.shape[:-2]
        return lead, x.reshape((math.prod(lead),) + x.shape[-2:])

    def conj(x):
        return x.conj() if x.dtype.kind == "c" else x

    def column_cholesky(x):
        # potf2: column by column; from the first pivot that is not positive (or nan), nan on
        lead, a = batch_of(x)
        n = a.shape[-1]
        out = xp.zeros_like(a)
        failed = xp.zeros(a.shape[0], dtype=bool)
        for j in range(n):
            row = out[:, j, :j]
            d = (a[:, j, j] - (row * conj(row)).sum(-1)).real
            failed = failed | ~(d > 0)
            dj = xp.sqrt(xp.where(failed, xp.nan, d))
            out[:, j, j] = dj
            if j + 1 < n:
                below = a[:, j + 1:, j] - xp.matmul(out[:, j + 1:, :j], conj(row)[:, :, None])[:, :, 0]
                out[:, j + 1:, j] = below / dj[:, None]
        return out.reshape(x.shape)

    def cholesky(x):
        if x.size == 0:
            return xp.zeros_like(x)
        try:
            out = la.cholesky(x)
        except errors:  # NumPy refuses the whole batch without saying which minor failed
            return column_cholesky(x)
        if xp is not numpy:
            # cuSOLVER reports failure in an info flag CuPy ignores by default, leaving the failing
            # pivot not positive: mark it and what follows, as the column loop would (no host sync)
            d = xp.diagonal(out, axis1=-2, axis2=-1).real
            bad = xp.cumsum(~(d > 0), axis=-1) > 0
            eye = xp.eye(x.shape[-1], dtype=bool)
            out = xp.where(bad[..., None, :] & eye, xp.nan, out)
        return out

    def qr(x, complete):
        if x.size == 0:
            m, n = x.shape[-2:]
            k = m if complete else min(m, n)
            q = xp.broadcast_to(xp.eye(m, k, dtype=x.dtype), x.shape[:-2] + (m, k)).copy()
            return q, xp.zeros(x.shape[:-2] + (k, n), dtype=x.dtype)
        return la.qr(x, mode="complete" if complete else "reduced")

    def svd(x, full_matrices, compute_uv):
        if x.size == 0:
            m, n = x.shape[-2:]
            k = min(m, n)
            s = xp.zeros(x.shape[:-2] + (k,), dtype=x.real.dtype)
            if not compute_uv:
                return s
            mu, nv = (m, n) if full_matrices else (k, k)
            u = xp.broadcast_to(xp.eye(m, mu, dtype=x.dtype), x.shape[:-2] + (m, mu)).copy()
            vh = xp.broadcast_to(xp.eye(nv, n, dtype=x.dtype), x.shape[:-2] + (nv, n)).copy()
            return u, s, vh
        if not compute_uv:
            return la.svd(x, compute_uv=False)
        u, s, vh = la.svd(x, full_matrices=full_matrices)
        return u, s, vh

    def eigh(x, upper, compute_v):
        if x.size == 0:
            w = xp.zeros(x.shape[:-1], dtype=x.real.dtype)
            return (w, xp.zeros_like(x)) if compute_v else w
        if not compute_v:
            return la.eigvalsh(x, UPLO="U" if upper else "L")
        w, v = la.eigh(x, UPLO="U" if upper else "L")
        return w, v

    def eig(x, compute_v):
        cdtype = xp.result_type(x.dtype, xp.complex64)
        if x.size == 0:
            w = xp.zeros(x.shape[:-1], dtype=cdtype)
            return (w, xp.zeros(x.shape, dtype=cdtype)) if compute_v else w
        if not compute_v:
            return la.eigvals(x).astype(cdtype, copy=False)
        w, v = la.eig(x)
        return w.astype(cdtype, copy=False), v.astype(cdtype, copy=False)

    def upper_solve(u, b):
        # LAPACK's gesv on an upper-triangular matrix pivots nowhere (each column's largest entry
        # at or below the diagonal is the diagonal's: the rest are zeros), so its getrs is trsm's
        # back substitution; a zero pivot is refused (NumPy) and left to the row loop
        shape = tuple(numpy.broadcast_shapes(u.shape[:-2], b.shape[:-2]))
        u = xp.broadcast_to(u, shape + u.shape[-2:])
        b = xp.broadcast_to(b, shape + b.shape[-2:])
        if u.size == 0 or b.size == 0:
            return None
        try:
            return la.solve(u, b)
        except errors:
            return None

    def substitution(a, b, upper, unitriangular):
        # trsm's substitution, one row of the solution per step; a zero on the diagonal gives
        # inf/nan, as LAPACK's does, rather than an error
        n = a.shape[-1]
        out = xp.zeros(tuple(numpy.broadcast_shapes(a.shape[:-2], b.shape[:-2])) + b.shape[-2:],
                       dtype=xp.result_type(a.dtype, b.dtype))
        order = range(n - 1, -1, -1) if upper else range(n)
        for i in order:
            done = slice(i + 1, n) if upper else slice(0, i)
            r = b[..., i, :] - xp.matmul(a[..., i, None, done], out[..., done, :])[..., 0, :]
            out[..., i, :] = r if unitriangular else r / a[..., i, i, None]
        return out

    def solve_triangular(a, b, upper, unitriangular):
        n = a.shape[-1]
        t = xp.triu(a) if upper else xp.tril(a)
        if unitriangular:
            t = xp.where(xp.eye(n, dtype=bool), xp.ones((), dtype=t.dtype), t)
        if upper:
            out = upper_solve(t, b)
        else:  # reversing the rows and columns of a lower-triangular matrix makes it upper
            out = upper_solve(t[..., ::-1, ::-1], b[..., ::-1, :])
            out = None if out is None else out[..., ::-1, :]
        return substitution(t, b, upper, unitriangular) if out is None else out

    def lu_panel(a, c0, c1, pivots, rows):
        # getf2 on columns [c0, c1): at column j the row of largest |a| (LAPACK's i?amax: |re| +
        # |im| for complex, the first of ties) comes up, swapped across whole rows; a zero pivot
        # leaves its column unscaled, as LAPACK's does
        m = a.shape[1]
        for j in range(c0, c1):
            col = a[:, j:, j]
            size = xp.abs(col.real) + xp.abs(col.imag) if col.dtype.kind == "c" else xp.abs(col)
            p = xp.argmax(size, axis=-1) + j
            pivots[:, j] = p + 1
            top = a[:, j, :].copy()
            a[:, j, :] = a[rows, p, :]
            a[rows, p, :] = top
            pivot = a[:, j, j]
            if j + 1 < m:
                a[:, j + 1:, j] /= xp.where(pivot == 0, 1, pivot)[:, None]
                if j + 1 < c1:
                    a[:, j + 1:, j + 1:c1] -= a[:, j + 1:, j, None] * a[:, j, None, j + 1:c1]

    def unit_lower_solve(a, c0, c1, cols):
        # L11^{-1} A12 for the unit lower factor in rows/columns [c0, c1)
        lower = xp.tril(a[:, c0:c1, c0:c1], -1) + xp.eye(c1 - c0, dtype=a.dtype)
        return solve_triangular(lower, a[:, c0:c1, cols], False, True)

    def lu_columns(a, c0, c1, pivots, rows):
        # getrf2's recursion: the left half, then the right half's update by a triangular solve and
        # one product (BLAS), then the right half; the pivots are those of the column loop
        if c1 - c0 <= 16:
            lu_panel(a, c0, c1, pivots, rows)
            return
        h = c0 + (c1 - c0) // 2
        lu_columns(a, c0, h, pivots, rows)
        a[:, c0:h, h:c1] = unit_lower_solve(a, c0, h, slice(h, c1))
        a[:, h:, h:c1] -= xp.matmul(a[:, h:, c0:h], a[:, c0:h, h:c1])
        lu_columns(a, h, c1, pivots, rows)

    def lu_factor(x):
        lead, a = batch_of(x)
        a = a.copy()
        b, m, n = a.shape
        k = min(m, n)
        pivots = xp.zeros((b, k), dtype=xp.int32)
        if a.size:
            lu_columns(a, 0, k, pivots, xp.arange(b))
            if n > k:  # a wide matrix: the columns right of the square part are U's
                a[:, :k, k:] = unit_lower_solve(a, 0, k, slice(k, n))
        return a.reshape(x.shape), pivots.reshape(lead + (k,))

    table = {"cholesky": cholesky, "qr": qr, "svd": svd, "eigh": eigh, "lu_factor": lu_factor,
             "solve_triangular": solve_triangular}
    if hasattr(la, "eig"):
        table["eig"] = eig
    if xp is numpy:
        table = {name: _quiet(fn) for name, fn in table.items()}
    return table


def _quiet(fn):
    """``fn`` without NumPy's warnings for 1/0 and nan: torch returns those quietly (a singular
    triangular solve gives inf)."""
    def call(*args, **kwargs):
        with numpy.errstate(all="ignore"):
            return fn(*args, **kwargs)
    call.__name__ = call.__qualname__ = fn.__name__
    call.__doc__ = fn.__doc__
    return call
