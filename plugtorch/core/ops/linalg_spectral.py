"""torch.linalg's QR, SVD and eigen-decompositions, and what builds on them: least squares,
pseudo-inverses, ranks, condition numbers, the matrix exponential, ``multi_dot``,
``tensorinv``/``tensorsolve``, ``vander`` and ``householder_product``.

All are written with the ops of ``decompositions``/``solvers`` and ordinary ops, so their
gradients come through those.
"""
from __future__ import annotations

import math

from ..debug import checks_values
from ..dtypes import float32, int64
from ..optable import public
from . import decompositions as dec
from .decompositions import check_matrix, fortran, mH, unpack
from .linalg_api import QR, SVD, Eig, Eigh, Lstsq, OldQR, OldSVD, inv, solve

_EVERYWHERE = ("plugtorch", "Tensor")


def qr(A, mode="reduced"):
    """(Q, R) with A = QR; mode 'reduced' (k = min(m, n)), 'complete' (Q square) or 'r' (R only,
    Q empty)."""
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), "
                           "'r', or 'complete'")
    check_matrix("qr", A, square=False)
    m, n = A.shape[-2:]
    Q, R = unpack(dec.qr_factors(A, complete=mode == "complete"), dec.qr_shapes(m, n, mode == "complete"))
    if mode == "r":
        return QR(A.new_zeros(0), fortran(R))
    return QR(fortran(Q), fortran(R))


@public(*_EVERYWHERE, name="qr")
def qr_old(input, some=True):
    """torch.qr: linalg.qr with some=True as mode='reduced'."""
    return OldQR(*qr(input, "reduced" if some else "complete"))


def svd(A, full_matrices=True, *, driver=None):
    """(U, S, Vh) with A = U diag(S) Vh, S real and descending. Where singular values repeat (or
    are 0, for a non-square A), the singular vectors are not unique and their gradient is
    inf/nan, as torch's."""
    check_matrix("svd", A, square=False)
    m, n = A.shape[-2:]
    U, S, Vh = unpack(dec.svd_factors(A, full_matrices=full_matrices), dec.svd_shapes(m, n, full_matrices))
    return SVD(fortran(U), (S.real if A.dtype.is_complex else S).contiguous(), fortran(Vh))


def svdvals(A, *, driver=None):
    """The singular values of A, descending."""
    check_matrix("svdvals", A, square=False)
    return dec.svd_values(A)


@public(*_EVERYWHERE, name="svd")
def svd_old(input, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with V, not Vh; some=True gives the reduced factors. compute_uv=False
    gives zero U and V, as torch's."""
    if not compute_uv:
        m, n = input.shape[-2:]
        S = svdvals(input)
        return OldSVD(input.new_zeros(*input.shape[:-2], m, m), S, input.new_zeros(*input.shape[:-2], n, n))
    U, S, Vh = svd(input, full_matrices=not some)
    return OldSVD(U, S, mH(Vh))


def _uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO == "U"


def eigh(A, UPLO="L"):
    """(eigenvalues ascending, eigenvectors) of Hermitian A, reading its lower (UPLO='L') or upper
    triangle. Repeated eigenvalues make the eigenvectors' gradient inf/nan, as torch's."""
    check_matrix("eigh", A)
    n = A.shape[-1]
    w, V = unpack(dec.eigh_factors(A, upper=_uplo(UPLO)), ((n,), (n, n)))
    return Eigh((w.real if A.dtype.is_complex else w).contiguous(), fortran(V))


def eigvalsh(A, UPLO="L"):
    """The eigenvalues of Hermitian A, ascending."""
    check_matrix("eigvalsh", A)
    return dec.eigh_values(A, upper=_uplo(UPLO))


def eig(A):
    """(eigenvalues, eigenvectors) of square A, complex; eigenvectors of unit norm."""
    check_matrix("eig", A)
    n = A.shape[-1]
    w, V = unpack(dec.eig_factors(A), ((n,), (n, n)))
    return Eig(w.contiguous(), fortran(V))


def eigvals(A):
    """The eigenvalues of square A, complex."""
    return eig(A).eigenvalues


# -- least squares, pseudo-inverse, rank, conditioning --------------------------------------------

def lstsq(A, B, rcond=None, *, driver=None):
    """(solution, residuals, rank, singular_values) of min ||A X - B||. 'gels' solves through QR (A
    of full rank), 'gelsd' and 'gelss' through the SVD (any rank, with rcond), 'gelsy' (the
    default) through QR where A has full rank and the SVD where not; residuals, rank and singular
    values are filled as torch's CPU drivers fill them."""
    driver = driver or "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    check_matrix("lstsq", A, square=False)
    if B.ndim == A.ndim - 1:
        if B.shape[-1] != A.shape[-2]:
            raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-1)")
        out = lstsq(A, B.unsqueeze(-1), rcond, driver=driver)
        return Lstsq(out.solution.squeeze(-1), out.residuals.squeeze(-1) if out.residuals.numel() else
                     out.residuals, out.rank, out.singular_values)
    if B.shape[-2] != A.shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    A, B = _broadcast(A, B)
    m, n = A.shape[-2:]
    empty = A.real.new_zeros(0)
    rcond = rcond if rcond is not None else _eps(A) * max(m, n)
    if driver in ("gelsd", "gelss"):
        X, rank, S = _svd_solve(A, B, rcond)
        residuals = _residuals(A, B, X) if m > n and bool((rank == n).all()) else empty
        return Lstsq(fortran(X), residuals, rank, S)
    if m >= n:
        Q, R = qr(A)
        X = dec.linalg_solve_triangular(R, mH(Q) @ B, upper=True, left=True, unitriangular=False)
    else:  # the least-norm solution: A^H = QR, X = Q R^{-H} B
        Q, R = qr(mH(A))
        X = Q @ dec.linalg_solve_triangular(mH(R), B, upper=False, left=True, unitriangular=False)
    if driver == "gels":
        residuals = _residuals(A, B, X) if m > n else empty
        return Lstsq(fortran(X), residuals, empty.to(int64), empty)
    # gelsy: the least-norm solution of the numerical rank (a complete orthogonal factorisation),
    # which for a rank-deficient A is the SVD's; R's diagonal tells which matrices are
    rank = A.new_full(A.shape[:-2], min(m, n), dtype=int64)
    d = R.diagonal(0, -2, -1).abs().detach()
    if d.shape[-1]:
        deficient = ~(d > rcond * d.amax(-1, keepdim=True)).all(-1)
        if not checks_values(A) or bool(deficient.any()):
            Xs, rank_s, _ = _svd_solve(A, B, rcond)
            X = Xs.where(deficient.unsqueeze(-1).unsqueeze(-1), X)
            rank = rank_s.where(deficient, rank)
    return Lstsq(fortran(X), empty, rank, empty)


def _svd_solve(A, B, rcond):
    """The least-norm least-squares solution through the SVD, singular values at or below rcond
    times the largest counted as 0; with the rank and the singular values."""
    U, S, Vh = svd(A, full_matrices=False)
    keep = _tolerance(S, None, rcond) < S
    inv_s = (1 / S).where(keep, S.new_zeros(())).to(A.dtype)
    return mH(Vh) @ (inv_s.unsqueeze(-1) * (mH(U) @ B)), keep.sum(-1), S


def _broadcast(A, B):
    from ._args import broadcast_shapes
    from .linalg_api import _promoted
    batch = tuple(broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2])))
    A, B = _promoted(A, B)
    return A.expand(*batch, *A.shape[-2:]), B.expand(*batch, *B.shape[-2:])


def _residuals(A, B, X):
    r = A @ X - B
    return (r * r.conj()).real.sum(-2)


def _eps(A):
    return 1.1920928955078125e-07 if A.real.dtype is float32 else 2.220446049250313e-16


def _tolerance(S, atol, rtol):
    """max(atol, rtol * the largest singular value), per matrix, broadcast along S's last dim."""
    smax = S.amax(-1, keepdim=True) if S.shape[-1] else S.new_zeros(*S.shape[:-1], 1)
    tol = smax * rtol if rtol is not None else smax * 0
    if atol is not None:
        tol = tol.maximum(tol.new_full((), float(atol)) if not hasattr(atol, "shape") else atol.unsqueeze(-1))
    return tol


def _rtol(A, atol, rtol):
    if rtol is None:  # torch: eps * max(m, n) unless atol is given and positive
        positive_atol = atol is not None and (bool((atol > 0).any()) if hasattr(atol, "shape") else atol > 0)
        return 0.0 if positive_atol else _eps(A) * max(A.shape[-2:])
    return rtol


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse: singular values at or below max(atol, rtol * largest)
    count as 0."""
    check_matrix("pinv", A, square=False)
    rtol = _rtol(A, atol, rtol)
    if hermitian:
        w, V = eigh(A)
        keep = w.abs() > _tolerance(w.abs(), atol, rtol)
        inv_w = (1 / w).where(keep, w.new_zeros(())).to(A.dtype)
        return (V * inv_w.unsqueeze(-2)) @ mH(V)
    U, S, Vh = svd(A, full_matrices=False)
    keep = _tolerance(S, atol, rtol) < S
    inv_s = (1 / S).where(keep, S.new_zeros(())).to(A.dtype)
    return (mH(Vh) * inv_s.unsqueeze(-2)) @ mH(U)


@public(*_EVERYWHERE)
def pinverse(input, rcond=1e-15):
    """torch.pinverse: linalg.pinv with rtol=rcond."""
    return pinv(input, rtol=rcond)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    """The number of singular values above max(atol, rtol * the largest)."""
    check_matrix("matrix_rank", A, square=False)
    rtol = _rtol(A, atol, rtol)
    S = eigvalsh(A).abs() if hermitian else svdvals(A)
    return (_tolerance(S, atol, rtol) < S).sum(-1)


def cond(A, p=None):
    """The condition number of A in the norm p (None and 2: the ratio of the extreme singular
    values; -2 its inverse; 'fro', 'nuc', inf, -inf, 1, -1: norm(A) * norm(inv(A)))."""
    check_matrix("cond", A, square=False)
    if p in (None, 2, -2):
        S = svdvals(A)
        big, small = S[..., 0], S[..., -1]
        return big / small if p != -2 else small / big
    check_matrix("cond", A)
    from .linalg import linalg_matrix_norm
    from .linalg_api import inv_ex
    norm = lambda x: linalg_matrix_norm(x, ord=p, dim=(-2, -1), keepdim=False)
    return norm(A) * norm(inv_ex(A).inverse)


# -- built on products -------------------------------------------------------------------------

def linalg_matrix_exp(A):
    """exp(A) by scaling and squaring: a Taylor polynomial of A / 2**s (norm at most 1/2), squared s
    times; accurate to rounding in float64."""
    check_matrix("matrix_exp", A)
    from .creation import eye
    n = A.shape[-1]
    eye_n = eye(n, dtype=A.dtype, device=A._backend.name)
    if A.numel() == 0:
        return A + eye_n
    norm = float(A.detach().abs().sum(-2).amax())  # the 1-norm bounds the series' terms
    s = max(0, math.ceil(math.log2(norm)) + 1) if norm > 0 and math.isfinite(norm) else 0
    X = A / (2 ** s)
    terms = 18 if A.real.dtype is not float32 else 10
    out, term = eye_n + X, X
    for k in range(2, terms + 1):
        term = (term @ X) / k
        out = out + term
    for _ in range(s):
        out = out @ out
    return out


@public(*_EVERYWHERE)
def matrix_exp(input):
    """torch.matrix_exp: linalg.matrix_exp."""
    return linalg_matrix_exp(input)


def multi_dot(tensors):
    """The product of the matrices in order; the first may be a row vector (1-D) and the last a
    column vector (1-D)."""
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    mats = list(tensors)
    first, last = mats[0].ndim == 1, mats[-1].ndim == 1
    for i, t in enumerate(mats):
        if t.ndim != 2 and not ((i == 0 and first) or (i == len(mats) - 1 and last)):
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    if first:
        mats[0] = mats[0].unsqueeze(0)
    if last:
        mats[-1] = mats[-1].unsqueeze(-1)
    out = mats[0]
    for t in mats[1:]:
        out = out @ t
    if first:
        out = out.squeeze(0)
    if last:
        out = out.squeeze(-1)
    return out


def tensorinv(A, ind=2):
    """The inverse of A seen as a linear map from its first ``ind`` dims' product to the rest's."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    out_shape, in_shape = A.shape[:ind], A.shape[ind:]
    rows, cols = math.prod(out_shape), math.prod(in_shape)
    if rows != cols:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {cols} != {rows}")
    return inv(A.reshape(rows, cols)).reshape(*in_shape, *out_shape)


def tensorsolve(A, B, dims=None):
    """X with tensordot(A, X, X.ndim) = B."""
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        A = A.permute(*[d for d in range(A.ndim) if d not in dims], *dims)
    x_shape = A.shape[B.ndim:]
    n = math.prod(x_shape)
    rows = math.prod(B.shape)
    if rows != n:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {n} != {rows}")
    return solve(A.reshape(rows, n), B.reshape(rows)).reshape(*x_shape)


def vander(x, *, N=None):
    """The Vandermonde matrix of x: columns x**0, x**1, ..., x**(N - 1) (N defaults to x's size)."""
    if x.ndim < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension")
    n = x.shape[-1] if N is None else N
    if n <= 0:
        raise RuntimeError("N must be greater than 1.")
    from .creation import ones
    cols = [ones(*x.shape, dtype=x.dtype, device=x._backend.name)]
    for _ in range(1, n):
        cols.append(cols[-1] * x)
    from .shape import stack
    return stack(cols, -1)


def householder_product(A, tau):
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^H, v_i the i-th column of A below
    its diagonal with a 1 on it (LAPACK's orgqr)."""
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.householder_product: input must have at least 2 dimensions.")
    m, n = A.shape[-2:]
    k = tau.shape[-1]
    if m < n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-2] must be greater than or equal "
                           "to input.shape[-1]")
    if n < k:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-1] must be greater than or equal "
                           "to tau.shape[-1]")
    from .creation import eye
    eye_n = eye(m, n, dtype=A.dtype, device=A._backend.name)
    V = A.tril(-1) + eye(m, n, dtype=A.dtype, device=A._backend.name)
    Q = eye_n.expand(*A.shape[:-2], m, n)
    for i in range(k - 1, -1, -1):  # applied from the last reflector, as orgqr does
        v = V[..., :, i:i + 1]
        Q = Q - (tau[..., i, None, None] * v) @ (mH(v) @ Q)
    return fortran(Q)

