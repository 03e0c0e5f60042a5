"""Matrix products, with torch.matmul's rank rules built on one batched primitive."""
from __future__ import annotations

from ..dispatch import call_op
from ..errors import BackendMismatchError
from ..optable import composite, op
from ..tensor import _wrap_dim
from ._args import broadcast_shapes
from .creation import arange, zeros

_EVERYWHERE = ("plugtorch", "Tensor")


def _matmul_rule(ctx, g):
    a, b = ctx.saved
    need = ctx.needs_input_grad
    ga = g @ b.mT if need[0] else None  # the engine sums broadcast batch dims
    gb = a.mT @ g if need[1] else None
    return ga, gb


def _mm(a, b):
    """The primitive's case: both at least 2-D, broadcastable batch dims."""
    sa, sb = a._data.shape, b._data.shape
    if sa[-1] != sb[-2]:
        if len(sa) == 2 and len(sb) == 2:
            raise RuntimeError(
                f"mat1 and mat2 shapes cannot be multiplied ({sa[0]}x{sa[1]} and {sb[0]}x{sb[1]})"
            )
        raise RuntimeError(
            f"matmul: Expected size for first two dimensions of batch2 tensor to be: "
            f"[{', '.join(map(str, sb[:-2]))}{', ' if len(sb) > 2 else ''}{sa[-1]}] but got: {list(sb)}."
            f" (shapes {list(sa)} @ {list(sb)})"
        )
    try:
        return call_op("matmul", (a, b))
    except ValueError:
        raise RuntimeError(f"matmul: the batch dimensions of {list(sa)} and {list(sb)} do not "
                           f"broadcast ({list(sa[:-2])} vs {list(sb[:-2])})") from None


@op(primitive="matmul", derivative=_matmul_rule, save="inputs", exposed=_EVERYWHERE)
def matmul(input, other):
    """Matrix product with torch.matmul's rank rules (1-D operands are vectors; batch dims
    broadcast)."""
    a, b = input, other
    if b._backend is not a._backend:
        raise BackendMismatchError("matmul", a._backend.name, b._backend.name)
    if a.dtype is not b.dtype:
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: {a.dtype.name} != {b.dtype.name}"
        )
    na, nb = a.ndim, b.ndim
    if na == 0 or nb == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {na}D and {nb}D"
        )
    if na >= 2 and nb >= 2:
        return _mm(a, b)
    if na == 1 and nb == 1:
        if a.shape[0] != b.shape[0]:
            raise RuntimeError(
                f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] to "
                "have the same number of elements, but got "
                f"{a.shape[0]} and {b.shape[0]} elements respectively"
            )
        return _mm(a.reshape(1, -1), b.reshape(-1, 1)).reshape(())
    if na == 1:
        return _mm(a.unsqueeze(0), b).squeeze(-2)
    return _mm(a, b.unsqueeze(-1)).squeeze(-1)


@composite(operands=2, exposed=_EVERYWHERE)
def mm(input, mat2):
    """Matrix product of two 2-D tensors."""
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm: expected 2D tensors, got {input.ndim}D and {mat2.ndim}D")
    return matmul(input, mat2)


@composite(operands=2, exposed=_EVERYWHERE)
def bmm(input, mat2):
    """Batched matrix product of two 3-D tensors with equal batch sizes."""
    a, b = input, mat2
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor and batch2 must be a 3D tensor (got {a.ndim}D and {b.ndim}D)")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {a.shape[0]} and {b.shape[0]}")
    return matmul(a, b)


@composite(operands=2, exposed=_EVERYWHERE)
def dot(input, tensor):
    """Inner product of two 1-D tensors of one dtype."""
    if input.ndim != 1 or tensor.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {tensor.ndim}D tensors")
    if input.dtype is not tensor.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{input.dtype.name} and {tensor.dtype.name}")
    return matmul(input, tensor)


@composite(operands=2, exposed=_EVERYWHERE, aliases=("ger",))
def outer(input, vec2):
    """Outer product of two 1-D tensors: out[i, j] = input[i] * vec2[j]."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"outer: expected 1-D tensors, but got {input.ndim}D and {vec2.ndim}D")
    return input.reshape(-1, 1) * vec2.reshape(1, -1)


ger = outer


@composite(exposed=_EVERYWHERE)
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal over dims dim1, dim2 (above it for offset > 0), as a new last dim."""
    n = input.ndim
    if n < 2:
        raise RuntimeError(f"diagonal(): expected a tensor with at least 2 dimensions, got {n}")
    d1, d2 = _wrap_dim(dim1, n), _wrap_dim(dim2, n)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    rest = [d for d in range(n) if d not in (d1, d2)]
    x = input.permute(rest + [d1, d2])
    rows, cols = x.shape[-2], x.shape[-1]
    length = max(0, min(rows + min(offset, 0), cols - max(offset, 0)))
    idx = arange(length, device=input._backend.name)
    return x[(Ellipsis, idx - min(offset, 0), idx + max(offset, 0))]


_diagonal_of = diagonal  # diag's parameter named like torch's shadows the op


@composite(exposed=_EVERYWHERE)
def diag(input, diagonal=0):
    """1-D input: a square matrix with it on a diagonal; 2-D input: that diagonal."""
    if input.ndim == 2:
        return _diagonal_of(input, diagonal)
    if input.ndim != 1:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")
    n = input.shape[0] + abs(diagonal)
    out = zeros(n, n, dtype=input.dtype, device=input._backend.name)
    idx = arange(input.shape[0], device=input._backend.name)
    out[idx - min(diagonal, 0), idx + max(diagonal, 0)] = input  # records index_put: differentiable
    return out


@composite(exposed=_EVERYWHERE)
def trace(input):
    """Sum of the main diagonal of a 2-D tensor."""
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return diagonal(input).sum()


@composite(operands=3, exposed=_EVERYWHERE)
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2); input broadcasts to the product's shape."""
    prod = mm(mat1, mat2)
    if alpha != 1:
        prod = prod * alpha
    if broadcast_shapes(input.shape, prod.shape) != tuple(prod.shape):
        raise RuntimeError(f"addmm: input of shape {list(input.shape)} does not broadcast to the product's "
                           f"shape {list(prod.shape)}")
    if beta == 0:
        return prod  # torch ignores input entirely (its nan and inf do not propagate)
    return prod + (input if beta == 1 else input * beta)
