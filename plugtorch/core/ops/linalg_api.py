"""torch.linalg's factorisations and solvers, and torch's older top-level spellings of them.

The functions check torch's arguments, call the ops of ``decompositions`` and ``solvers``
and unpack their factors into torch's named tuples; gradients come from those ops' rules.
Failures torch reports (a matrix that is not positive-definite, a singular one) come back from
the kernels as inf/nan or in an ``info``; the functions without ``_ex`` read it and raise
``LinAlgError`` with torch's message where reading values is free (host-memory backends, or
debug mode: ``debug.checks_values``), as the design asks of every value check.
"""
from __future__ import annotations

from ..debug import checks_values
from ..dtypes import int32, int64, result_type
from ..optable import public
from ..return_types import return_type
from . import decompositions as dec
from . import solvers
from .decompositions import LinAlgError, check_matrix, fortran, mH

_EVERYWHERE = ("plugtorch", "Tensor")

CholeskyEx = return_type("linalg_cholesky_ex", ["L", "info"])
InvEx = return_type("linalg_inv_ex", ["inverse", "info"])
SolveEx = return_type("linalg_solve_ex", ["result", "info"])
Lstsq = return_type("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
QR = return_type("linalg_qr", ["Q", "R"])
SVD = return_type("linalg_svd", ["U", "S", "Vh"])
Eigh = return_type("linalg_eigh", ["eigenvalues", "eigenvectors"])
Eig = return_type("linalg_eig", ["eigenvalues", "eigenvectors"])
Slogdet = return_type("linalg_slogdet", ["sign", "logabsdet"])
LU = return_type("linalg_lu", ["P", "L", "U"])
LUFactor = return_type("linalg_lu_factor", ["LU", "pivots"])
LUFactorEx = return_type("linalg_lu_factor_ex", ["LU", "pivots", "info"])
OldSVD = return_type("svd", ["U", "S", "V"])
OldQR = return_type("qr", ["Q", "R"])
OldSlogdet = return_type("slogdet", ["sign", "logabsdet"])
TriangularSolve = return_type("triangular_solve", ["solution", "cloned_coefficient"])
LUUnpack = return_type("lu_unpack", ["P", "L", "U"])


def _first_failure(A, info, prefix, message) -> None:
    """Raise LinAlgError for the first nonzero ``info`` (``message(code)``), naming its batch
    element as torch does, where values can be read now."""
    if not (checks_values(A) and checks_values(info)):  # (info is batched under vmap, A may not be)
        return
    codes = info.reshape(-1).tolist()
    for i, code in enumerate(codes):
        if code:
            where = f"(Batch element {i}): " if info.ndim else ""
            raise LinAlgError(f"{prefix}: {where}{message(code)}")


def _first_true(bad):
    """1 + the index of the first True along the last dim, 0 where there is none (an info)."""
    n = bad.shape[-1]
    before = (bad.to(int32).cumsum(-1) == 0).sum(-1)  # the entries before the first True
    return ((before + 1) * (before < n).to(int64)).to(int32)


# -- Cholesky ----------------------------------------------------------------------------------

def cholesky_ex(A, *, upper=False, check_errors=False):
    """(L, info): the Cholesky factor, and per matrix 0 or the order of the first leading minor
    that is not positive-definite."""
    check_matrix("cholesky", A)
    L = mH(dec.cholesky_factor(mH(A))) if upper else dec.cholesky_factor(A)
    info = _first_true(L.diagonal(0, -2, -1).real.isnan().detach())
    if check_errors:
        _first_failure(A, info, "linalg.cholesky", _not_positive_definite)
    return CholeskyEx(fortran(L), info)


def _not_positive_definite(k):
    return ("The factorization could not be completed because the input is not positive-definite "
            f"(the leading minor of order {k} is not positive-definite).")


def cholesky(A, *, upper=False):
    """The Cholesky factor L (A = L L^H), or U = L^H with upper=True; LinAlgError for A that is not
    positive-definite."""
    return cholesky_ex(A, upper=upper, check_errors=True).L


@public(*_EVERYWHERE, name="cholesky")
def cholesky_old(input, upper=False):
    """torch.cholesky: linalg.cholesky's factor."""
    return cholesky(input, upper=upper)


def _cholesky_solve(B, L, upper):
    if upper:
        Y = dec.linalg_solve_triangular(mH(L), B, upper=False, left=True, unitriangular=False)
        return dec.linalg_solve_triangular(L, Y, upper=True, left=True, unitriangular=False)
    Y = dec.linalg_solve_triangular(L, B, upper=False, left=True, unitriangular=False)
    return dec.linalg_solve_triangular(mH(L), Y, upper=True, left=True, unitriangular=False)


@public(*_EVERYWHERE)
def cholesky_solve(input, input2, upper=False):
    """X with A X = B from A's Cholesky factor: ``cholesky_solve(B, L)``."""
    B, L = input, input2
    if B.shape[-2] != L.shape[-1]:
        raise RuntimeError(f"Incompatible matrix sizes for cholesky_solve: each A matrix is {L.shape[-2]} by "
                           f"{L.shape[-1]} but each b matrix is {B.shape[-2]} by {B.shape[-1]}")
    return fortran(_cholesky_solve(B, L, upper))


@public(*_EVERYWHERE)
def cholesky_inverse(input, upper=False):
    """The inverse of A from its Cholesky factor."""
    from .creation import eye
    n = input.shape[-1]
    identity = eye(n, dtype=input.dtype, device=input._backend.name).expand(input.shape)
    return fortran(_cholesky_solve(identity, input, upper))


# -- triangular solves -------------------------------------------------------------------------

def _equation_shapes(name, A, B, left, vector=False):
    n = A.shape[-1]
    rows = B.shape[-1] if vector else (B.shape[-2] if left else B.shape[-1])
    if rows != n:
        b = f"{B.shape[-1]}x1" if vector else f"{B.shape[-2]}x{B.shape[-1]}"
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({A.shape[-2]}x{n} and {b})")


def _promoted(A, B):
    dtype = result_type(A, B)
    return A.to(dtype), B.to(dtype)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with A X = B (left=True) or X A = B, A upper or lower triangular."""
    check_matrix("solve_triangular", A)
    if B.ndim < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor B must have at least 2 dimensions.")
    _equation_shapes("linalg.solve_triangular", A, B, left)
    A, B = _promoted(A, B)
    return fortran(dec.linalg_solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular))


@public(*_EVERYWHERE)
def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False):
    """torch.triangular_solve(b, A): (X, a copy of A) with op(A) X = b, op(A) = A or A^T."""
    M = A.mT if transpose else A
    X = solve_triangular(M, input, upper=upper != transpose, unitriangular=unitriangular)
    return TriangularSolve(X, fortran(A.clone()))


# -- LU, solve, inverse, determinants ----------------------------------------------------------

def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """(LU, pivots, info): getrf's factors; info is the 1-based index of U's first zero pivot, or 0."""
    check_matrix("lu_factor", A, square=False)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    LU_, piv, _ = solvers.lu_parts(A)
    info = _first_true(LU_.diagonal(0, -2, -1).detach() == 0)
    if check_errors:
        _first_failure(A, info, "torch.linalg.lu_factor", lambda k: (
            f"U[{k},{k}] is zero and using it on lu_solve would result in a division by zero. If you still "
            "want to perform the factorization, consider calling linalg.lu(A, pivot) or "
            "linalg.lu_factor_ex(A, pivot)"))
    return LUFactorEx(fortran(LU_), piv, info)


def lu_factor(A, *, pivot=True):
    """(LU, pivots): A = P L U packed as LAPACK's getrf packs it; an error for a singular A."""
    LU_, piv, _ = lu_factor_ex(A, pivot=pivot, check_errors=True)
    return LUFactor(LU_, piv)


def _perm_matrix(perm, dtype):
    from .creation import eye
    m = perm.shape[-1]
    # column r of P is e_perm[r], so that (P X)[perm[r]] = X[r]
    return eye(m, dtype=dtype, device=perm._backend.name)[perm].mT.contiguous()


def _unpacked(LU_, perm):
    m, n = LU_.shape[-2:]
    k = min(m, n)
    from .creation import eye
    Lm = LU_[..., :, :k].tril(-1) + eye(m, k, dtype=LU_.dtype, device=LU_._backend.name)
    return _perm_matrix(perm, LU_.dtype), Lm, LU_[..., :k, :].triu()


def lu(A, *, pivot=True):
    """(P, L, U) with A = P L U: L unit lower trapezoidal, U upper trapezoidal."""
    check_matrix("lu", A, square=False)
    if not pivot:
        raise RuntimeError("linalg.lu: LU without pivoting is not implemented on the CPU")
    LU_, _, perm = solvers.lu_parts(A)
    return LU(*_unpacked(LU_, perm))


def _perm_from_pivots(pivots, m):
    from .creation import arange
    perm = arange(m, device=pivots._backend.name).expand(*pivots.shape[:-1], m).clone()
    for i in range(pivots.shape[-1]):
        j = pivots[..., i:i + 1].to(int64) - 1
        old, new = perm[..., i:i + 1].clone(), perm.gather(-1, j)
        perm[..., i:i + 1] = new
        perm = perm.scatter_add(-1, j, old - new)
    return perm


@public("plugtorch", name="lu_unpack")
def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) from lu_factor's (LU, pivots)."""
    perm = _perm_from_pivots(LU_pivots, LU_data.shape[-2])
    return LUUnpack(*_unpacked(LU_data, perm))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """X with A X = B (or X A = B; adjoint: A^H in place of A) from lu_factor's (LU, pivots)."""
    _equation_shapes("linalg.lu_solve", LU, B, left)
    if not left:  # X A = B is A^H X^H = B^H
        return mH(lu_solve(LU, pivots, mH(B), left=True, adjoint=not adjoint))
    perm = _perm_from_pivots(pivots, LU.shape[-2])
    if not adjoint:
        return fortran(solvers.lu_solve_parts(LU, perm, B))
    # A^H = U^H L^H P^T: X = P L^{-H} U^{-H} B
    Y = dec.linalg_solve_triangular(mH(LU), B, upper=False, left=True, unitriangular=False)
    Y = dec.linalg_solve_triangular(mH(LU), Y, upper=True, left=True, unitriangular=True)
    return fortran(dec.unpermute_rows(Y, perm.to(Y.real.dtype)))


@public(*_EVERYWHERE, name="lu_solve")
def lu_solve_old(b, LU_data, LU_pivots):
    """torch.lu_solve(b, LU, pivots)."""
    return lu_solve(LU_data, LU_pivots, b)


@public(*_EVERYWHERE, name="lu")
def lu_old(A, pivot=True, get_infos=False):
    """torch.lu: (LU, pivots), and info with get_infos=True."""
    out = lu_factor_ex(A, pivot=pivot, check_errors=not get_infos)
    return tuple(out) if get_infos else (out.LU, out.pivots)


def _rhs(name, A, B, left):
    """B as matrices with A's batch dims (and whether it was a vector), torch's vector rule."""
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    _equation_shapes(name, A, B, left, vector)
    if vector:
        B = B.unsqueeze(-1) if left else B.unsqueeze(-2)
    from ._args import broadcast_shapes
    batch = tuple(broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2])))
    A, B = _promoted(A, B)
    return A.expand(*batch, *A.shape[-2:]), B.expand(*batch, *B.shape[-2:]), vector


def solve_ex(A, B, *, left=True, check_errors=False):
    """(X, info): the solution of A X = B (X A = B), and per matrix LU's info (0: solved)."""
    return _solve(A, B, left, check_errors, True)


def _solve(A, B, left, check_errors, want_info):
    check_matrix("solve", A)
    A2, B2, vector = _rhs("linalg.solve", A, B, left)
    X = solvers.linalg_solve(A2, B2, left=left)
    # the info costs a host read (or, on a device backend, a second factorisation): only where
    # it is returned or checked
    info = _singular_info(A2, X) if want_info or (check_errors and checks_values(X)) else None
    if check_errors and info is not None:
        _first_failure(A, info, "torch.linalg.solve",
                       lambda k: "The solver failed because the input matrix is singular.")
    if vector:
        X = X.squeeze(-1) if left else X.squeeze(-2)
    # torch's layouts: a left solve's matrices column by column (and a batch of vectors
    # likewise transposed), a right solve's row by row
    return SolveEx(fortran(X) if left and X.ndim >= 2 else X.contiguous(), info)


def _singular_info(A, X):
    # a result with a non-finite entry may come from a zero pivot: only then factor again to say which
    bad = ~X.detach().isfinite().all(-1).all(-1)
    if checks_values(X) and not bool(bad.any()):
        return bad.to(int32)
    LU_, _, _ = solvers.lu_parts(A.detach())
    return _first_true(LU_.diagonal(0, -2, -1) == 0)


def solve(A, B, *, left=True):
    """X with A X = B (left=True) or X A = B, A square; LinAlgError for a singular A."""
    return _solve(A, B, left, True, False).result


def inv_ex(A, *, check_errors=False):
    """(inverse, info): per matrix, info is 0 or the 1-based index of U's first zero pivot."""
    return _inv(A, check_errors, True)


def _inv(A, check_errors, want_info):
    check_matrix("inv", A)
    X = solvers.linalg_inv(A)
    info = _singular_info(A, X) if want_info or (check_errors and checks_values(X)) else None
    if check_errors and info is not None:
        _first_failure(A, info, "linalg.inv", lambda k: (
            f"The diagonal element {k} is zero, the inversion could not be completed because the input "
            "matrix is singular."))
    return InvEx(fortran(X), info)


def inv(A):
    """The inverse of square A; LinAlgError for a singular A."""
    return _inv(A, True, False).inverse


@public(*_EVERYWHERE)
def inverse(input):
    """torch.inverse: linalg.inv."""
    return inv(input)


def det(A):
    """The determinant of square A (linalg.det)."""
    check_matrix("det", A)
    return solvers.linalg_det(A)


@public(*_EVERYWHERE, name="det")
def det_old(input):
    """torch.det: linalg.det."""
    return det(input)


def slogdet(A):
    """(sign, log |det A|): sign is -1, 0 or 1 (a unit complex number for complex A)."""
    check_matrix("slogdet", A)
    LU_, piv, _ = solvers.lu_parts(A.detach())
    d = LU_.diagonal(0, -2, -1)
    unit = (d / d.abs()).where(d != 0, d.new_zeros(()))
    sign = unit.prod(-1) * solvers.permutation_sign(piv).to(d.dtype)
    return Slogdet(sign, solvers.linalg_logabsdet(A))


@public(*_EVERYWHERE, name="slogdet")
def slogdet_old(input):
    """torch.slogdet: (sign, logabsdet)."""
    return OldSlogdet(*slogdet(input))


@public(*_EVERYWHERE)
def logdet(input):
    """log det A: nan where the determinant is negative, -inf where it is 0."""
    sign, logabs = slogdet(input)
    if input.dtype.is_complex:
        return logabs.to(input.dtype) + sign.log()
    return logabs.where(sign >= 0, logabs.new_full((), float("nan")))
