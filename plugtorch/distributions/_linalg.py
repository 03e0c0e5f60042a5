"""The Cholesky factor and lower-triangular solves the distributions use, on plugtorch.linalg.

``cholesky`` is ``linalg.cholesky_ex``'s factor: a matrix that is not positive-definite gives
NaN on its diagonal from the failing minor on (callers check the pivots), never an error, as
torch's distributions use ``cholesky_ex`` to validate.
"""
from __future__ import annotations

import plugtorch as pt


def cholesky(a):
    """Lower Cholesky factor of a batch of symmetric positive-definite matrices (...,d,d) (the
    lower triangle is read, as torch's); NaN pivots where a matrix is not positive-definite."""
    return pt.linalg.cholesky_ex(a).L


def solve_lower(lower, b):
    """x with lower @ x = b for lower-triangular ``lower`` (...,d,d) and b (...,d,m)."""
    return pt.linalg.solve_triangular(lower, b, upper=False)


def diagonal(m):
    return pt.linalg.diagonal(m, dim1=-2, dim2=-1)
