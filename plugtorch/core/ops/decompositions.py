"""Matrix factorisations: the ops on the backends' LAPACK-level primitives, and their derivatives.

Each op here computes with one primitive (``cholesky``, ``qr``, ``svd``, ``eigh``, ``eig``,
``lu_factor``, ``solve_triangular``) and has its derivative rule, written with plugtorch ops
(torch's formulas, FunctionsManual.cpp). A kernel returns one array, so a factorisation with
several factors is one op whose result *packs* them (each flattened over the matrix dims, cast
to one dtype, concatenated along the last axis); ``unpack`` cuts them out again, and the rule
receives the gradient of the packed result, zero where a factor was not used. The public
functions (``plugtorch.linalg.*``, ``solvers.py``) check torch's arguments and unpack.
"""
from __future__ import annotations

import math

from ..dtypes import complex64, complex128, float32, float64, int64, to_complex
from ..errors import MissingKernelError
from ..optable import op

__all__ = ["LinAlgError", "check_matrix", "unpack", "mH", "fortran", "cholesky_factor", "qr_factors", "svd_factors",
           "svd_values", "eigh_factors", "eigh_values", "eig_factors", "lu_factors",
           "linalg_solve_triangular"]

FLOATING = (float32, float64, complex64, complex128)


class LinAlgError(RuntimeError):
    """A factorisation or solve could not be completed (torch.linalg.LinAlgError)."""


LinAlgError.__module__ = "plugtorch.linalg"

_DTYPE_NAMES = {"float16": "Half", "bfloat16": "BFloat16", "int64": "Long", "int32": "Int", "int16": "Short",
                "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def check_matrix(name: str, A, square: bool = True) -> None:
    """torch's refusals of a non-matrix, a non-square or a non-floating ``A`` for ``linalg.<name>``."""
    if A.ndim < 2:
        raise RuntimeError(f"linalg.{name}: The input tensor A must have at least 2 dimensions.")
    if A.dtype not in FLOATING:
        dtype = str(A.dtype).rsplit(".", 1)[-1]
        if dtype in ("float16", "bfloat16"):
            raise NotImplementedError(f"linalg.{name}: low precision dtypes are not supported (got {A.dtype}); "
                                      "convert A to float32 or float64 first")
        raise RuntimeError(f"linalg.{name}: Expected a floating point or complex tensor as input. "
                           f"Got {_DTYPE_NAMES.get(dtype, dtype)}")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def fortran(x):
    """x with torch's layout for a LAPACK result: each matrix stored column by column."""
    return x.mT.contiguous().mT


def mH(x):
    """The conjugate transpose of the matrices in ``x``'s last two dims."""
    return x.mT.conj() if x.dtype.is_complex else x.mT


def _primitive(backend, prim: str, opname: str):
    fn = backend.primitives.get(prim)
    if fn is None:
        from ..plugins import get_registry
        raise MissingKernelError(opname, backend.name, get_registry().plugin_names(), f"the primitive '{prim}'")
    return fn


def _pack(backend, x, outs, dtype):
    """One array of ``outs`` (each with ``x``'s batch dims), flattened and cast to ``dtype``."""
    P = backend.primitives
    lead = tuple(x.shape[:-2])
    pieces = [P["cast"](P["reshape"](o, lead + (math.prod(o.shape[len(lead):]),)), dtype) for o in outs]
    return P["concatenate"](pieces, len(lead))


def unpack(p, shapes):
    """The factors a packed result holds, given their shapes without the batch dims."""
    lead, out, start = p.shape[:-1], [], 0
    for s in shapes:
        n = math.prod(s)
        out.append(p[..., start:start + n].reshape(*lead, *s))
        start += n
    return out


def _safe_div(num, den):
    """num / den, and 0 where both are 0: a factor whose gradient is zero (unused) contributes
    nothing where den is 0 (repeated singular values or eigenvalues), while a nonzero one gives
    inf/nan there, as torch's. Differentiable in num wherever den is not 0 (forward-mode AD
    differentiates the rule at a zero gradient)."""
    both = (den == 0) & (num == 0)
    return num / den.where(~both, den.new_ones(()))


def _solve_tri(A, B, upper, left=True, unitriangular=False):
    return linalg_solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)


# -- triangular solve --------------------------------------------------------------------------

def _lower_solve_triangular(backend, a, b, *, upper, left, unitriangular):
    fn = _primitive(backend, "solve_triangular", "linalg_solve_triangular")
    if left:
        return fn(a, b, upper, unitriangular)
    permute = backend.primitives["permute"]
    swap = lambda x: permute(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))
    return swap(fn(swap(a), swap(b), not upper, unitriangular))  # X A = B is A^T X^T = B^T


def _solve_triangular_rule(ctx, g):
    A, _ = ctx.saved
    X = ctx.output
    a = ctx.attrs
    upper, left = a["upper"], a["left"]
    gB = _solve_tri(mH(A), g, not upper, left, a["unitriangular"])
    gA = None
    if ctx.needs_input_grad[0]:
        gA = -(gB @ mH(X)) if left else -(mH(X) @ gB)
        shift = 1 if a["unitriangular"] else 0
        gA = gA.triu(shift) if upper else gA.tril(-shift)
    return gA, gB


@op(lower=_lower_solve_triangular, operands=2, derivative=_solve_triangular_rule, save=("inputs", "output"))
def linalg_solve_triangular(A, B, *, upper, left, unitriangular):
    """X with A X = B (left) or X A = B, A triangular; batch dims broadcast."""


# -- Cholesky ----------------------------------------------------------------------------------

def _cholesky_rule(ctx, g):
    L = ctx.output
    gA = (mH(L) @ g).tril()
    gA = 0.5 * (gA + mH(gA.tril(-1)))
    gA = _solve_tri(mH(L), gA, upper=True)
    return _solve_tri(L, gA, upper=False, left=False)


@op(primitive="cholesky", derivative=_cholesky_rule, save="output")
def cholesky_factor(A):
    """The lower Cholesky factor of A (its lower triangle read); nan on the diagonal from the first
    leading minor that is not positive-definite."""


# -- QR ----------------------------------------------------------------------------------------

def _lower_qr(backend, a, *, complete):
    q, r = _primitive(backend, "qr", "qr_factors")(a, complete)
    return _pack(backend, a, (q, r), backend.dtype_of(a))


def qr_shapes(m, n, complete):
    k = m if complete else min(m, n)
    return (m, k), (k, n)


def _qr_square_rule(gQ, gR, Q, R):
    # A = QR with R square (m >= n): gA = (gQ + Q copyltu(M)) R^{-H}, M = R gR^H - gQ^H Q
    M = R @ mH(gR) - mH(gQ) @ Q
    M = M.tril()
    M = M + mH(M)
    eye = M.new_ones(M.shape[-1]).diag_embed()
    M = M - 0.5 * M * eye
    return _solve_tri(mH(R), gQ + Q @ M, upper=False, left=False)


def _qr_rule(ctx, g):
    A, = ctx.saved
    m, n = A.shape[-2:]
    if ctx.attrs["complete"] and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    sq, sr = qr_shapes(m, n, ctx.attrs["complete"])
    Q, R = unpack(ctx.output, (sq, sr))
    gQ, gR = unpack(g, (sq, sr))
    if m >= n:
        return _qr_square_rule(gQ, gR, Q, R)
    # wide: A = [X | Y] with X = Q R[:, :m]; Y = Q R[:, m:] adds Y gR_Y^H to Q's gradient
    Y, gRY = A[..., m:], gR[..., m:]
    gX = _qr_square_rule(gQ + Y @ mH(gRY), gR[..., :m], Q, R[..., :m])
    from .shape import cat
    return cat([gX, Q @ gRY], -1)


@op(lower=_lower_qr, derivative=_qr_rule, save=("inputs", "output"))
def qr_factors(A, *, complete):
    """Q and R of A = QR, packed (``unpack`` with ``qr_shapes``)."""


# -- SVD ---------------------------------------------------------------------------------------

def svd_shapes(m, n, full_matrices):
    k = min(m, n)
    return ((m, m), (k,), (n, n)) if full_matrices else ((m, k), (k,), (k, n))


def _lower_svd(backend, a, *, full_matrices):
    u, s, vh = _primitive(backend, "svd", "svd_factors")(a, full_matrices, True)
    return _pack(backend, a, (u, s, vh), backend.dtype_of(a))


def _svd_backward(gU, gS, gVh, U, S, Vh):
    # torch's svd_backward, U (m, k), Vh (k, n): gA = U [(skew(U^H gU) S + S skew(V^H gV)) / E + diag(gS)] Vh
    # plus the parts of gU and gV outside the spans of U and V
    m, n = U.shape[-2], Vh.shape[-1]
    V, gV = mH(Vh), mH(gVh)
    UhgU = mH(U) @ gU
    UhgU = UhgU - mH(UhgU)
    VhgV = Vh @ gV
    VhgV = VhgV - mH(VhgV)
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1)
    eye = S.new_ones(S.shape[-1]).diag_embed()
    E = E + eye
    inner = _safe_div(UhgU * S.unsqueeze(-2) + S.unsqueeze(-1) * VhgV, E)
    inner = inner + gS.diag_embed()
    if U.dtype.is_complex:
        inner = inner + _safe_div(UhgU.diagonal(0, -2, -1), 2 * S).diag_embed()
    if m > n:
        gUS = _safe_div(gU, S.unsqueeze(-2))
        return (U @ inner + gUS - U @ (mH(U) @ gUS)) @ Vh
    if m < n:
        gVS = _safe_div(gV, S.unsqueeze(-2))
        return U @ (inner @ Vh + mH(gVS - V @ (Vh @ gVS)))
    return U @ inner @ Vh


def _svd_rule(ctx, g):
    A, = ctx.saved
    m, n = A.shape[-2:]
    k = min(m, n)
    shapes = svd_shapes(m, n, ctx.attrs["full_matrices"])
    U, S, Vh = unpack(ctx.output, shapes)
    gU, gS, gVh = unpack(g, shapes)
    # full matrices: the columns past k are not determined by A; torch differentiates the first k
    U, gU, Vh, gVh = U[..., :k], gU[..., :k], Vh[..., :k, :], gVh[..., :k, :]
    return _svd_backward(gU, gS.real, gVh, U, S.real, Vh)


@op(lower=_lower_svd, derivative=_svd_rule, save=("inputs", "output"))
def svd_factors(A, *, full_matrices):
    """U, S and Vh of A = U diag(S) Vh, packed (S in A's dtype; ``unpack`` with ``svd_shapes``)."""


def _lower_svdvals(backend, a):
    return _primitive(backend, "svd", "svd_values")(a, False, False)


def _svd_values_rule(ctx, g):
    A, = ctx.saved
    m, n = A.shape[-2:]
    # the singular vectors, recomputed as torch's svdvals backward does (differentiable, for
    # gradients of gradients)
    U, _, Vh = unpack(svd_factors(A, full_matrices=False), svd_shapes(m, n, False))
    return (U * g.unsqueeze(-2).to(U.dtype)) @ Vh


@op(lower=_lower_svdvals, derivative=_svd_values_rule, save="inputs")
def svd_values(A):
    """The singular values of A, descending."""


# -- Hermitian eigenproblem --------------------------------------------------------------------

def _lower_eigh(backend, a, *, upper):
    w, v = _primitive(backend, "eigh", "eigh_factors")(a, upper, True)
    return _pack(backend, a, (w, v), backend.dtype_of(a))


def _eigh_rule(ctx, g):
    A, = ctx.saved
    n = A.shape[-1]
    w, V = unpack(ctx.output, ((n,), (n, n)))
    gw, gV = unpack(g, ((n,), (n, n)))
    VhgV = mH(V) @ gV
    VhgV = 0.5 * (VhgV - mH(VhgV))
    w = w.real
    E = w.unsqueeze(-2) - w.unsqueeze(-1)
    eye = w.new_ones(n).diag_embed()
    inner = _safe_div(VhgV, (E + eye).to(VhgV.dtype))
    inner = inner * (1 - eye).to(inner.dtype) + gw.real.to(inner.dtype).diag_embed()
    return V @ inner @ mH(V)


@op(lower=_lower_eigh, derivative=_eigh_rule, save=("inputs", "output"))
def eigh_factors(A, *, upper):
    """Eigenvalues (ascending, in A's dtype) and eigenvectors of Hermitian A, packed."""


def _lower_eigvalsh(backend, a, *, upper):
    return _primitive(backend, "eigh", "eigh_values")(a, upper, False)


def _eigh_values_rule(ctx, g):
    A, = ctx.saved
    n = A.shape[-1]
    _, V = unpack(eigh_factors(A, upper=ctx.attrs["upper"]), ((n,), (n, n)))
    return (V * g.unsqueeze(-2).to(V.dtype)) @ mH(V)


@op(lower=_lower_eigvalsh, derivative=_eigh_values_rule, save="inputs")
def eigh_values(A, *, upper):
    """The eigenvalues of Hermitian A, ascending (real)."""


# -- general eigenproblem ----------------------------------------------------------------------

def _lower_eig(backend, a):
    w, v = _primitive(backend, "eig", "eig_factors")(a, True)
    return _pack(backend, a, (w, v), to_complex(backend.dtype_of(a)))


def _eig_rule(ctx, g):
    A, = ctx.saved
    n = A.shape[-1]
    w, V = unpack(ctx.output, ((n,), (n, n)))
    gw, gV = unpack(g, ((n,), (n, n)))
    # torch's linalg_eig_backward: gA = V^{-H} (diag(gw) + (VhgV - V^H V Re diag(VhgV)) / conj(E)) V^H
    VhgV = mH(V) @ gV
    VhgV = VhgV - mH(V) @ (V * VhgV.diagonal(0, -2, -1).real.unsqueeze(-2).to(V.dtype))
    wc = w.conj()
    E = wc.unsqueeze(-2) - wc.unsqueeze(-1)
    eye = w.real.new_ones(n).diag_embed().to(E.dtype)
    inner = _safe_div(VhgV, E + eye) * (1 - eye) + gw.diag_embed()
    from .solvers import linalg_solve
    gA = linalg_solve(mH(V), inner @ mH(V), left=True)
    return gA if A.dtype.is_complex else gA.real


@op(lower=_lower_eig, derivative=_eig_rule, save=("inputs", "output"))
def eig_factors(A):
    """Eigenvalues and eigenvectors of square A (complex), packed."""


# -- LU ----------------------------------------------------------------------------------------

def _lower_lu(backend, a):
    lu, piv = _primitive(backend, "lu_factor", "lu_factors")(a)
    # the row permutation the swaps make (row r of P^T A is row perm[r] of A), one swap per step
    # by two selections (where) over the positions i and j it exchanges
    P = backend.primitives
    lead, m, k = tuple(a.shape[:-2]), a.shape[-2], piv.shape[-1]
    axis = len(lead)
    positions = P["arange"](0, m, 1, int64)
    perm = P["copy"](P["broadcast_to"](positions, lead + (m,)))
    swaps = P["sub"](P["cast"](piv, int64), 1)
    for i in range(k):
        at_i = (Ellipsis, slice(i, i + 1))
        j = P["getitem"](swaps, at_i)
        old, new = P["getitem"](perm, at_i), P["gather"](perm, axis, j)
        perm = P["where"](P["eq"](positions, i), new, P["where"](P["eq"](positions, j), old, perm))
    return _pack(backend, a, (lu, piv, perm), backend.dtype_of(a))


def lu_shapes(m, n):
    return (m, n), (min(m, n),), (m,)


def _lu_rule(ctx, g):
    """torch's linalg_lu_backward, for square, wide (m < n) and tall (m > n) A."""
    from .shape import cat
    A, = ctx.saved
    m, n = A.shape[-2:]
    LU, _, perm = unpack(ctx.output, lu_shapes(m, n))
    gLU = unpack(g, lu_shapes(m, n))[0]
    k = min(m, n)
    eye = LU.real.new_ones(k).diag_embed().to(LU.dtype)
    L1, U1 = LU[..., :k, :k].tril(-1) + eye, LU[..., :k, :k].triu()
    if m == n:
        # gA = P L^{-H} [tril(L^H gL, -1) + triu(gU U^H)] U^{-H}
        phi = (mH(L1) @ gLU.tril(-1)).tril(-1) + (gLU.triu() @ mH(U1)).triu()
        X = _solve_tri(mH(U1), phi, upper=False, left=False)
        X = _solve_tri(mH(L1), X, upper=True, unitriangular=True)
    elif m < n:
        # wide, L m x m and U = [U1 U2]: gA1 = P L^{-H} [gU1 + tril(L^H gL - gU U^H, -1) U1^{-H}],
        # gA2 = P L^{-H} gU2
        U = LU.triu()
        X = mH(L1) @ gLU[..., :k].tril(-1) - gLU.triu() @ mH(U)
        X = _solve_tri(mH(U1), X.tril(-1), upper=False, left=False)
        X = cat([X + gLU[..., :k].triu(), gLU[..., k:]], -1)
        X = _solve_tri(mH(L1), X, upper=True, unitriangular=True)
    else:
        # tall, L = [L1; L2] and U n x n: gA1 = P [gL1 + L1^{-H} triu(gU U^H - L^H gL)] U^{-H},
        # gA2 = P gL2 U^{-H}
        L = cat([L1, LU[..., k:, :]], -2)
        X = gLU[..., :k, :].triu() @ mH(U1) - mH(L) @ gLU.tril(-1)
        X = _solve_tri(mH(L1), X.triu(), upper=True, unitriangular=True)
        X = cat([X + gLU[..., :k, :].tril(-1), gLU[..., k:, :]], -2)
        X = _solve_tri(mH(U1), X, upper=False, left=False)
    return unpermute_rows(X, perm)


def unpermute_rows(X, perm):
    """P X for the row permutation ``perm`` (row r of X goes to row perm[r]): X's rows gathered by
    the inverse permutation."""
    from .index import gather
    inverse = perm.real.to(int64).argsort(-1)
    return gather(X, -2, inverse.unsqueeze(-1).expand(*inverse.shape, X.shape[-1]))


@op(lower=_lower_lu, derivative=_lu_rule, save=("inputs", "output"))
def lu_factors(A):
    """LU (getrf's packed factors), its pivots and the row permutation they make, packed in A's dtype."""
