"""Sparse COO tensors and their products (``torch.sparse``).

A sparse tensor is a :class:`SparseTensor` (``_coo.py``): dense int64 indices, dense values and
a size. Everything here is written with the op table's dense ops (index_select, index_add,
unique), so a backend that runs those runs it, and it is differentiable in the values and the
dense operands without derivative rules of its own.
"""
from __future__ import annotations

from ..core.dtypes import int64
from ..core.tensor import Tensor
from ._coo import SparseTensor, _dense_to_sparse, layout, sparse_coo, strided

__all__ = ["mm", "sum", "addmm", "softmax", "log_softmax", "sparse_coo_tensor", "spmm",
           "SparseTensor", "layout", "sparse_coo", "strided"]


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, requires_grad=False,
                      check_invariants=None, is_coalesced=None) -> SparseTensor:
    """A sparse COO tensor with ``values[k]`` at ``indices[:, k]``; duplicates are summed when
    coalesced. ``size`` defaults to the smallest that holds the indices."""
    from ..core.ops.creation import as_tensor
    idx = indices if isinstance(indices, Tensor) else as_tensor(indices, device=device)
    vals = values if isinstance(values, Tensor) else as_tensor(values, device=device)
    if idx.dtype is not int64:
        idx = idx.to(int64)
    if dtype is not None or device is not None:
        vals = vals.to(device=device, dtype=dtype)
        idx = idx.to(vals.device)
    if idx.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(idx.shape)}")
    sd, nnz = idx.shape
    if vals.ndim == 0:
        raise RuntimeError("values must have at least one dimension (nnz, *dense_shape), got a 0-d tensor")
    if vals.shape[0] != nnz:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: {nnz}, "
                           f"nnz from values: {vals.shape[0]}")
    if size is None:
        # the smallest size that holds the indices, as torch infers it
        extent = (idx.amax(1) + 1).tolist() if nnz else [0] * sd
        size = (*extent, *vals.shape[1:])
    size = tuple(int(n) for n in size)
    if len(size) != sd + vals.ndim - 1:
        raise RuntimeError(f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = {len(size)}, "
                           f"sparse_dim = {sd}, dense_dim = {vals.ndim - 1}")
    if tuple(vals.shape[1:]) != size[sd:]:
        raise RuntimeError(f"values has incorrect size, expected {[nnz, *size[sd:]]}, got {list(vals.shape)}")
    if check_invariants and nnz:
        lo, hi = idx.amin(1).tolist(), idx.amax(1).tolist()
        for d in range(sd):
            if lo[d] < 0:
                raise RuntimeError(f"found negative index {lo[d]} for dim {d}")
            if hi[d] >= size[d]:
                raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is {size[d]} "
                                   f"but found index {hi[d]}")
    if requires_grad:  # the sparse tensor is a leaf: its values are
        vals = vals.detach().requires_grad_()
    return SparseTensor._make(idx, vals, size, bool(is_coalesced))


def _check_mm(a, b) -> None:
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm: expected 2D tensors (a sparse matrix and a dense one), got {a.ndim}D and {b.ndim}D")
    if a.dense_dim():
        raise RuntimeError(f"mm: expected a sparse matrix with 2 sparse and 0 dense dims, got "
                           f"{a.sparse_dim()} sparse and {a.dense_dim()} dense")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected scalar type {_type_name(a.dtype)} but found {_type_name(b.dtype)}")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"addmm: Argument #3 (dense): Expected dim 0 size {a.shape[1]}, got {b.shape[0]}")


def _type_name(dtype) -> str:
    names = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "float16": "Half",
             "bfloat16": "BFloat16", "bool": "Bool", "int16": "Short", "int8": "Char", "uint8": "Byte"}
    return names.get(dtype.name, dtype.name)


def mm(mat1, mat2) -> Tensor:
    """``mat1 @ mat2`` for a sparse ``mat1`` (n, m): dense (n, p) for a dense ``mat2``, sparse for a
    sparse one. Each stored entry scales its row of ``mat2`` and index_add sums them into place;
    gradients reach ``mat1``'s values and ``mat2``."""
    if not isinstance(mat1, SparseTensor):
        raise RuntimeError("sparse.mm: expected mat1 to be a sparse COO tensor, got a dense one "
                           "(use plugtorch.mm for dense products)")
    if isinstance(mat2, SparseTensor):
        return _dense_to_sparse(mm(mat1, mat2.to_dense()))
    _check_mm(mat1, mat2)
    from ..core.ops.creation import zeros
    out = zeros((mat1.shape[0], mat2.shape[1]), dtype=mat2.dtype, device=mat2.device)
    if mat1._nnz() == 0:
        return out + 0 * mat2.sum() if mat2.requires_grad else out  # keeps mat2 in the graph
    rows, cols = mat1._idx[0], mat1._idx[1]
    vals = mat1._vals
    return out.index_add(0, rows, vals.unsqueeze(1) * mat2.index_select(0, cols))


def spmm(input, mat2) -> Tensor:
    """``torch.spmm``: the matrix product with a sparse or dense first operand."""
    if isinstance(input, SparseTensor):
        return mm(input, mat2)
    from ..core.ops.linalg import mm as dense_mm
    return dense_mm(input, mat2)


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0) -> Tensor:
    """``beta * mat + alpha * (mat1 @ mat2)`` with a sparse ``mat1``."""
    prod = mm(mat1, mat2)
    if alpha != 1:
        prod = prod * alpha
    if isinstance(mat, SparseTensor):
        mat = mat.to_dense()
    return prod + (mat if beta == 1 else mat * beta)


def _matmul(a, b) -> Tensor:
    """``a @ b`` (``plugtorch.matmul``/``mm``) where an operand is sparse: sparse @ dense and
    dense @ sparse give dense results, sparse @ sparse a sparse one, as in torch."""
    if isinstance(a, SparseTensor):
        if not isinstance(b, SparseTensor) and b.ndim == 1:
            return mm(a, b.unsqueeze(1)).squeeze(1)
        return mm(a, b)
    if a.ndim not in (1, 2):
        raise RuntimeError(f"matmul: a dense operand of a sparse product must be 1-D or 2-D, got {a.ndim}D "
                           "(call .to_dense() on the sparse operand for batched products)")
    if a.ndim == 1:
        return mm(b.t(), a.unsqueeze(1)).squeeze(1)
    return mm(b.t(), a.t()).t()  # (a @ b)^T = b^T @ a^T: the sparse operand first


def sum(input, dim=None, dtype=None) -> Tensor:
    """The sum of a sparse tensor's entries over ``dim`` (all when None): dense when every
    sparse dim is summed, else a coalesced sparse tensor of the dims left."""
    if not isinstance(input, SparseTensor):
        raise RuntimeError("sparse.sum: expected a sparse COO tensor, got a dense one (use plugtorch.sum)")
    vals = input._vals if dtype is None else input._vals.to(dtype)
    if dim is None:
        return vals.sum()
    from ..core.tensor import _wrap_dim
    dims = sorted({_wrap_dim(d, input.ndim, "sparse.sum") for d in ((dim,) if isinstance(dim, int) else dim)})
    sd = input.sparse_dim()
    sparse_dims = [d for d in dims if d < sd]
    dense_dims = [d - sd + 1 for d in dims if d >= sd]
    if dense_dims:
        vals = vals.sum(dense_dims)
    if not sparse_dims:
        return SparseTensor._make(input._idx, vals, [n for d, n in enumerate(input.shape) if d not in dims],
                                  input._coal)
    kept = [d for d in range(sd) if d not in sparse_dims]
    if not kept:
        return vals.sum(0)
    shape = [n for d, n in enumerate(input.shape) if d not in dims]
    return SparseTensor._make(input._idx[kept], vals, shape, False).coalesce()


def softmax(input, dim, *, dtype=None) -> SparseTensor:
    """Softmax over ``dim`` of the specified entries only (unspecified ones count as -inf, as
    torch.sparse.softmax has it); a sparse result with the input's indices."""
    return _softmax(input, dim, dtype, log=False)


def log_softmax(input, dim, *, dtype=None) -> SparseTensor:
    """Log of :func:`softmax`, over the specified entries only."""
    return _softmax(input, dim, dtype, log=True)


def _softmax(input, dim, dtype, log):
    if not isinstance(input, SparseTensor):
        raise RuntimeError("sparse.softmax: expected a sparse COO tensor, got a dense one (use plugtorch.softmax)")
    from ..core.tensor import _wrap_dim
    d = _wrap_dim(dim, input.ndim, "sparse.softmax")
    s = input.coalesce()
    sd = s.sparse_dim()
    if d >= sd:
        raise NotImplementedError("sparse.softmax over a dense dim is not supported; call .to_dense() first")
    vals = s._vals if dtype is None else s._vals.to(dtype)
    # the entries sharing all sparse coordinates but dim's form one softmax group
    kept = [k for k in range(sd) if k != d]
    if kept:
        sub = SparseTensor._make(s._idx[kept], vals, [s.shape[k] for k in kept], False)
        group = sub._linear().unique(return_inverse=True)[1]
    else:
        from ..core.ops.creation import zeros
        group = zeros(s._nnz(), dtype=int64, device=s.device)
    from ..core.ops.creation import zeros as _zeros
    n = int(group.max().item()) + 1 if s._nnz() else 0
    v = vals.detach()
    where = group.reshape(-1, *([1] * (v.ndim - 1))).expand(*v.shape)
    gmax = _zeros((n, *v.shape[1:]), dtype=v.dtype, device=v.device).scatter_reduce(
        0, where, v, "amax", include_self=False)
    shifted = vals - gmax.index_select(0, group)  # the max shifts each group out of exp's overflow
    e = shifted.exp()
    denom = _zeros((n, *vals.shape[1:]), dtype=vals.dtype, device=vals.device).index_add(0, group, e)
    out = shifted - denom.log().index_select(0, group) if log else e / denom.index_select(0, group)
    return SparseTensor._make(s._idx, out, s.shape, True)
