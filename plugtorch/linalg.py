"""``plugtorch.linalg``: torch.linalg's norms and products that plugtorch has.

The ops are declared in ``core/ops/linalg.py`` (registered, so the conformance kit checks
them); this module gives them torch.linalg's names. Decompositions (``svd``, ``eigh``,
``solve``, ...) and the norms built on singular values need primitives the backend
contract does not have, so they are absent rather than slow host-side fallbacks.
"""
from __future__ import annotations

from .core.ops.linalg import diagonal as _diagonal
from .core.ops.linalg import linalg_cross as cross
from .core.ops.linalg import linalg_matrix_norm as matrix_norm
from .core.ops.linalg import linalg_norm as norm
from .core.ops.linalg import linalg_vector_norm as vector_norm
from .core.ops.linalg import matmul

__all__ = ["cross", "diagonal", "matmul", "matrix_norm", "norm", "vector_norm", "vecdot"]


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonals of the matrices in the last two dims of ``A`` (torch.linalg.diagonal)."""
    return _diagonal(A, offset, dim1, dim2)


def vecdot(x, y, *, dim=-1):
    """The dot product of x and y along ``dim`` (the other dims broadcast)."""
    return (x * y).sum(dim)
