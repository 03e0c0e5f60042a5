"""``plugtorch.linalg``: torch.linalg's functions.

The norms and products are ops of ``core/ops/linalg.py``; the factorisations are ops on the
backends' LAPACK-level primitives (``core/ops/decompositions.py``, ``solvers.py``) and the
functions built on them (``linalg_api.py``, ``linalg_spectral.py``). See docs/linalg.md.
"""
from .core.ops.decompositions import LinAlgError
from .core.ops.linalg import diagonal as _diagonal
from .core.ops.linalg import linalg_cross as cross
from .core.ops.linalg import linalg_matrix_norm as matrix_norm
from .core.ops.linalg import linalg_norm as norm
from .core.ops.linalg import linalg_vector_norm as vector_norm
from .core.ops.linalg import matmul
from .core.ops.linalg_api import (
    cholesky,
    cholesky_ex,
    det,
    inv,
    inv_ex,
    lu,
    lu_factor,
    lu_factor_ex,
    lu_solve,
    slogdet,
    solve,
    solve_ex,
    solve_triangular,
)
from .core.ops.linalg_spectral import (
    cond,
    eig,
    eigh,
    eigvals,
    eigvalsh,
    householder_product,
    lstsq,
    matrix_rank,
    multi_dot,
    pinv,
    qr,
    svd,
    svdvals,
    tensorinv,
    tensorsolve,
    vander,
)
from .core.ops.linalg_spectral import linalg_matrix_exp as matrix_exp
from .core.ops.products import matrix_power

__all__ = ["LinAlgError", "cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals",
           "eigvalsh", "householder_product", "inv", "inv_ex", "lstsq", "lu", "lu_factor", "lu_factor_ex",
           "lu_solve", "matmul", "matrix_exp", "matrix_norm", "matrix_power", "matrix_rank", "multi_dot", "norm",
           "pinv", "qr", "slogdet", "solve", "solve_ex", "solve_triangular", "svd", "svdvals", "tensorinv",
           "tensorsolve", "vander", "vecdot", "vector_norm"]


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonals of the matrices in the last two dims of ``A`` (torch.linalg.diagonal)."""
    return _diagonal(A, offset, dim1, dim2)


def vecdot(x, y, *, dim=-1):
    """The dot product of x and y along ``dim`` (the other dims broadcast)."""
    return (x * y).sum(dim)
