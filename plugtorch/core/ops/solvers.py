"""Solves, inverses and determinants on the LU factors (``decompositions.lu_factors``).

``linalg_solve``, ``linalg_inv``, ``linalg_det`` and ``linalg_logabsdet`` are ops whose body is
the computation on LU and whose derivative is their own (torch's): a solve's gradient is
another solve, a determinant's the inverse transposed, rather than the LU's derivative
chained through triangular solves. Singular input gives inf/nan here (but for det's gradient,
the adjugate, which the SVD gives finite); the public functions (``linalg_api``) raise torch's
errors where the values can be read for free.
"""
from __future__ import annotations

from ..dtypes import int64
from ..optable import op
from .decompositions import linalg_solve_triangular, lu_factors, lu_shapes, mH, unpack
from .index import gather

__all__ = ["lu_parts", "permutation_sign", "linalg_solve", "linalg_inv", "linalg_det", "linalg_logabsdet"]


def lu_parts(A):
    """(LU, pivots as int32, perm as int64) of square or rectangular A."""
    m, n = A.shape[-2:]
    LU, piv, perm = unpack(lu_factors(A), lu_shapes(m, n))
    return LU, piv.real.to(int64).int(), perm.real.to(int64)


def permutation_sign(pivots):
    """(-1) ** (the number of row swaps the pivots make), in the pivots' batch shape."""
    from .creation import arange
    k = pivots.shape[-1]
    swaps = (pivots != arange(1, k + 1, device=pivots._backend.name, dtype=pivots.dtype)).sum(-1)
    return 1 - 2 * (swaps % 2)


def lu_solve_parts(LU, perm, B):
    """X with A X = B from A's LU and row permutation (B's batch dims already A's)."""
    rows = perm.unsqueeze(-1).expand(*perm.shape, B.shape[-1])
    Y = linalg_solve_triangular(LU, gather(B, -2, rows), upper=False, left=True, unitriangular=True)
    return linalg_solve_triangular(LU, Y, upper=True, left=True, unitriangular=False)


def _solve_rule(ctx, g):
    A, _ = ctx.saved
    X = ctx.output
    left = ctx.attrs["left"]
    gB = linalg_solve(mH(A), g, left=left)
    gA = None
    if ctx.needs_input_grad[0]:
        gA = -(gB @ mH(X)) if left else -(mH(X) @ gB)
    return gA, gB


@op(operands=2, derivative=_solve_rule, save=("inputs", "output"))
def linalg_solve(A, B, *, left):
    """X with A X = B (left) or X A = B, through A's LU factors; A and B share batch dims."""
    if not left:
        return linalg_solve(A.mT, B.mT, left=True).mT
    LU, _, perm = lu_parts(A)
    return lu_solve_parts(LU, perm, B)


def _inv_rule(ctx, g):
    Xh = mH(ctx.output)
    return -(Xh @ g @ Xh)


@op(derivative=_inv_rule, save="output")
def linalg_inv(A):
    """The inverse of square A, a solve against the identity."""
    from .creation import eye
    n = A.shape[-1]
    return linalg_solve(A, eye(n, dtype=A.dtype, device=A._backend.name).expand(A.shape), left=True)


def _det_rule(ctx, g):
    A, = ctx.saved
    d = ctx.output
    if bool((d == 0).any()):
        # det A * A^-H is the adjugate's conjugate transpose, which stays finite at a singular A
        # (for rank n - 1 it is not even 0): from the SVD, as torch's
        return g.unsqueeze(-1).unsqueeze(-1) * _adjugate_h(A)
    return (g * d.conj()).unsqueeze(-1).unsqueeze(-1) * mH(linalg_inv(A))


def _adjugate_h(A):
    """adj(A)^H for square A: with A = U diag(S) Vh, conj(det U det Vh) U diag(p) Vh where p_i is
    the product of the singular values but the i-th (prefix and suffix products, no division)."""
    from .decompositions import svd_factors, svd_shapes
    from .shape import cat
    n = A.shape[-1]
    U, S, Vh = unpack(svd_factors(A, full_matrices=True), svd_shapes(n, n, True))
    S = S.real if A.dtype.is_complex else S
    one = S[..., :1] * 0 + 1
    before = cat([one, S[..., :-1]], -1).cumprod(-1)
    after = cat([S[..., 1:], one], -1).flip(-1).cumprod(-1).flip(-1)
    c = (linalg_det(U) * linalg_det(Vh)).conj().unsqueeze(-1).unsqueeze(-1)
    return c * ((U * (before * after).to(U.dtype).unsqueeze(-2)) @ Vh)


@op(derivative=_det_rule, save=("inputs", "output"))
def linalg_det(A):
    """The determinant of square A: the product of U's diagonal, signed by the row swaps."""
    LU, piv, _ = lu_parts(A)
    return LU.diagonal(0, -2, -1).prod(-1) * permutation_sign(piv).to(LU.dtype)


def _logabsdet_rule(ctx, g):
    A, = ctx.saved
    return g.unsqueeze(-1).unsqueeze(-1).to(A.dtype) * mH(linalg_inv(A))


@op(derivative=_logabsdet_rule, save="inputs")
def linalg_logabsdet(A):
    """log |det A|, summed from U's diagonal (no overflow where the determinant would)."""
    LU, _, _ = lu_parts(A)
    return LU.diagonal(0, -2, -1).abs().log().sum(-1)
