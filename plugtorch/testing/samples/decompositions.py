"""Samples for the matrix factorisations and solvers (``core/ops/decompositions.py``, ``solvers.py``).

The ops' results pack their factors, so each sample calls the public ``linalg`` function that
reaches the op. Where a factor is unique only up to signs (QR's, the SVD's, eigenvectors), a
call returns what is unique: the product of the factors, the singular values, the squared
entries of real eigenvectors. tests/linalg compares the factors themselves with torch's.
"""
from __future__ import annotations

from ._common import Sample, Waiver, empty, np, scalar

SAMPLES: dict = {}


def _spd(g, *shape):
    x = g.randn(*shape)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


def _sym(x, m):
    return x + x.mT


def _square(g):
    return g.randn(2, 3, 3) + 3 * np.eye(3)  # well away from singular, for finite differences


def _common(call, ref=None):
    """The 0-d refusal and an empty batch, for a function of one square matrix."""
    return [Sample((scalar(1.0),), call=call, raises=RuntimeError, desc="0-d: not a matrix"),
            Sample((empty(0, 3, 3),), call=call, ref=ref, grad=False, desc="empty batch")]


def _cholesky(g):
    call = lambda m, a: m.linalg.cholesky(a @ a.mT + 3 * m.eye(3, dtype=a.dtype, device=a.device))
    upper = lambda m, a: m.linalg.cholesky(a @ a.mT + 3 * m.eye(3, dtype=a.dtype, device=a.device), upper=True)
    return [Sample((g.randn(2, 3, 3),), call=call, ref=lambda a: np.linalg.cholesky(a @ np.swapaxes(a, -1, -2)
                                                                                    + 3 * np.eye(3))),
            Sample((g.randn(3, 3),), call=upper, desc="upper"),
            Sample((g.randn(2, 3),), call=lambda m, a: m.linalg.cholesky(a), raises=RuntimeError,
                   desc="not square"),
            *_common(call)]


def _solve_triangular(g):
    def call(m, a, b, **kw):
        return m.linalg.solve_triangular(a + 3 * m.eye(3, dtype=a.dtype, device=a.device), b, **kw)
    return [Sample((g.randn(3, 3), g.randn(2, 3, 2)), call=lambda m, a, b: call(m, a, b, upper=True),
                   ref=lambda a, b: np.linalg.solve(np.triu(a + 3 * np.eye(3)), b), desc="upper, broadcast"),
            Sample((g.randn(2, 3, 3), g.randn(2, 4, 3)),
                   call=lambda m, a, b: call(m, a, b, upper=False, left=False, unitriangular=True),
                   desc="lower, right, unit diagonal"),
            Sample((g.randn(3, 3), g.randn(2, 2)), call=lambda m, a, b: call(m, a, b, upper=True),
                   raises=RuntimeError, desc="shapes differ"),
            Sample((scalar(1.0), g.randn(3, 1)), call=lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True),
                   raises=RuntimeError, desc="0-d"),
            Sample((empty(0, 3, 3), empty(0, 3, 2)), call=lambda m, a, b: call(m, a, b, upper=True), grad=False,
                   desc="empty batch")]


def _qr(g):
    def call(m, a, mode="reduced"):
        q, r = m.linalg.qr(a, mode=mode)
        return q @ r, r.abs()
    return [Sample((g.randn(2, 4, 3),), call=call, desc="tall"),
            Sample((g.randn(3, 5),), call=call, desc="wide"),
            Sample((g.randn(3, 3),), call=lambda m, a: call(m, a, "complete"), desc="complete"),
            *_common(call)]


def _svd(g):
    def call(m, a):
        u, s, vh = m.linalg.svd(a, full_matrices=False)
        return (u * s.unsqueeze(-2)) @ vh, s
    return [Sample((g.randn(2, 4, 3),), call=call, desc="tall"), Sample((g.randn(3, 5),), call=call, desc="wide"),
            *_common(call)]


def _svdvals(g):
    call = lambda m, a: m.linalg.svdvals(a)
    return [Sample((g.randn(2, 4, 3),), call=call, ref=lambda a: np.linalg.svd(a, compute_uv=False)),
            *_common(call)]


def _eigh(g):
    def call(m, a):
        w, v = m.linalg.eigh(a + a.mT)
        return w, v * v
    return [Sample((g.randn(2, 3, 3),), call=call), *_common(call)]


def _eigvalsh(g):
    call = lambda m, a: m.linalg.eigvalsh(a + a.mT, UPLO="U")
    return [Sample((g.randn(2, 3, 3),), call=call, ref=lambda a: np.linalg.eigvalsh(a + np.swapaxes(a, -1, -2))),
            *_common(call)]


def _eig(g):
    def call(m, a):  # eigenvalues of a real matrix with real spectrum, sorted: real and unique
        s = a @ a.mT + m.eye(3, dtype=a.dtype, device=a.device)
        w = m.linalg.eigvals(s)
        return w.real.sort(-1).values, w.imag.abs()
    return [Sample((g.randn(2, 3, 3),), call=call, grad=False),
            Waiver("grad", "the kit's gradient checks run forward-mode AD, which complex tensors do not have; "
                   "tests/linalg compares eig's gradients with torch's"),
            *_common(call)]


def _lu(g):
    def call(m, a):
        p, lo, up = m.linalg.lu(a)
        return lo, up
    return [Sample((_square(g),), call=call), Sample((g.randn(4, 3),), call=call, grad=False, desc="tall"),
            Sample((g.randn(2, 4, 3),), call=lambda m, a: m.linalg.lu(a).P, grad=False, desc="permutation"),
            *_common(call)]


def _solve(g):
    call = lambda m, a, b: m.linalg.solve(a + 3 * m.eye(3, dtype=a.dtype, device=a.device), b)
    right = lambda m, a, b: m.linalg.solve(a + 3 * m.eye(3, dtype=a.dtype, device=a.device), b, left=False)
    return [Sample((g.randn(2, 3, 3), g.randn(2, 3, 2)), call=call,
                   ref=lambda a, b: np.linalg.solve(a + 3 * np.eye(3), b)),
            Sample((g.randn(2, 3, 3), g.randn(3)), call=call, desc="vector right-hand side"),
            Sample((g.randn(3, 3), g.randn(4, 3)), call=lambda m, a, b: right(m, a, b), desc="right"),
            Sample((g.randn(3, 3), g.randn(2, 2)), call=call, raises=RuntimeError, desc="shapes differ"),
            Sample((scalar(1.0), g.randn(3)), call=lambda m, a, b: m.linalg.solve(a, b), raises=RuntimeError,
                   desc="0-d"),
            Sample((empty(0, 3, 3), empty(0, 3, 1)), call=call, grad=False, desc="empty batch")]


def _square_op(fn, ref):
    def samples(g):
        call = lambda m, a: fn(m)(a)
        return [Sample((_square(g),), call=call, ref=ref), *_common(call)]
    return samples


SAMPLES.update(
    cholesky_factor=_cholesky, linalg_solve_triangular=_solve_triangular, qr_factors=_qr, svd_factors=_svd,
    svd_values=_svdvals, eigh_factors=_eigh, eigh_values=_eigvalsh, eig_factors=_eig, lu_factors=_lu,
    linalg_solve=_solve,
    linalg_inv=_square_op(lambda m: m.linalg.inv, np.linalg.inv),
    linalg_det=_square_op(lambda m: m.linalg.det, np.linalg.det),
    linalg_logabsdet=_square_op(lambda m: (lambda a: m.linalg.slogdet(a).logabsdet),
                                lambda a: np.linalg.slogdet(a)[1]),
)
