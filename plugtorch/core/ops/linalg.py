"""Matrix products, with torch.matmul's rank rules built on one batched primitive."""
from __future__ import annotations

import math
import warnings

from ..dispatch import NO_ATTRS
from ..dtypes import bool_, result_type
from ..errors import BackendMismatchError
from ..optable import MODES, Done, op, public
from ..tensor import Tensor, _wrap_dim
from . import elementwise as ew
from ._args import broadcast_shapes
from ._jvp import multilinear
from .creation import arange, zeros
from .reduce import amax, amin
from .reduce import sum as _sum
from .shape import _strides, cat
from .statistics import norm as _vector_norm

_EVERYWHERE = ("plugtorch", "Tensor")


def _transposed(t) -> bool:
    """Whether a matrix lies in memory column by column (``t.mT`` is contiguous), as a Linear
    weight's ``weight.t()`` does."""
    if t.ndim != 2 or t.shape[0] < 2 or t.shape[1] < 2:
        return False
    return _strides(t) == (1, t.shape[0])


def _matmul_rule(ctx, g):
    a, b = ctx.saved
    need = ctx.needs_input_grad
    # A gradient takes its operand's layout, as torch's mm backward does: for ``x @ w.t()`` the
    # weight's gradient is computed as (g.mT @ x).mT, whose transpose (what reaches w) is
    # contiguous, rather than as a transposed product that accumulating into w.grad must copy.
    ga = gb = None
    if need[0]:
        ga = (b @ g.mT).mT if _transposed(a) and g.ndim == 2 else g @ b.mT  # the engine sums batch dims
    if need[1]:
        gb = (g.mT @ a).mT if _transposed(b) and g.ndim == 2 else a.mT @ g
    return ga, gb


def _matmul_args(input, other):
    a, b = input, other
    if b._backend is not a._backend:
        raise BackendMismatchError("matmul", a._backend.name, b._backend.name)
    try:
        sa, sb = a._data.shape, b._data.shape
    except NotImplementedError:
        # a sparse COO operand holds no array (reading one refuses): the product is sparse.mm's.
        # Caught rather than tested for, so dense products pay nothing (mm's decomposition too).
        if a.is_sparse or b.is_sparse:
            from ...sparse import _matmul as sparse_matmul
            return Done(sparse_matmul(a, b))
        raise
    if a.dtype is not b.dtype:
        cast = MODES.cast_operands("matmul", (a, b)) if MODES.on else None  # autocast's
        if cast is None or cast[0].dtype is not cast[1].dtype:
            raise RuntimeError(
                f"expected m1 and m2 to have the same dtype, but got: {a.dtype.name} != {b.dtype.name}"
            )
        a, b = cast
    na, nb = len(sa), len(sb)
    if na >= 2 and nb >= 2:  # the primitive's case: matrices, with broadcastable batch dims
        if sa[-1] != sb[-2]:
            if na == 2 and nb == 2:
                raise RuntimeError(
                    f"mat1 and mat2 shapes cannot be multiplied ({sa[0]}x{sa[1]} and {sb[0]}x{sb[1]})"
                )
            raise RuntimeError(
                f"matmul: Expected size for first two dimensions of batch2 tensor to be: "
                f"[{', '.join(map(str, sb[:-2]))}{', ' if nb > 2 else ''}{sa[-1]}] but got: {list(sb)}."
                f" (shapes {list(sa)} @ {list(sb)})"
            )
        if (na > 2 or nb > 2) and not _batches_broadcast(sa[:-2], sb[:-2]):
            raise RuntimeError(f"matmul: the batch dimensions of {list(sa)} and {list(sb)} do not "
                               f"broadcast ({list(sa[:-2])} vs {list(sb[:-2])})")
        return (a, b), NO_ATTRS
    if na == 0 or nb == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {na}D and {nb}D"
        )
    # a 1-D operand is a vector: the product of it as a matrix, its added dim removed again
    if na == 1 and nb == 1:
        if sa[0] != sb[0]:
            raise RuntimeError(
                f"inconsistent tensor size, expected tensor [{sa[0]}] and src [{sb[0]}] to "
                "have the same number of elements, but got "
                f"{sa[0]} and {sb[0]} elements respectively"
            )
        return Done(matmul(a.reshape(1, -1), b.reshape(-1, 1)).reshape(()))
    if na == 1:
        return Done(matmul(a.unsqueeze(0), b).squeeze(-2))
    return Done(matmul(a, b.unsqueeze(-1)).squeeze(-1))


def _batches_broadcast(sa, sb) -> bool:
    return all(x == y or x == 1 or y == 1 for x, y in zip(reversed(sa), reversed(sb)))


@op(primitive="matmul", bind=_matmul_args, derivative=_matmul_rule, save="inputs", exposed=_EVERYWHERE,
    jvp=multilinear("matmul"))
def matmul(input, other):
    """Matrix product with torch.matmul's rank rules (1-D operands are vectors; batch dims
    broadcast)."""


@op(operands=2, exposed=_EVERYWHERE, jvp=multilinear("mm"))
def mm(input, mat2):
    """Matrix product of two 2-D tensors."""
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm: expected 2D tensors, got {input.ndim}D and {mat2.ndim}D")
    return matmul(input, mat2)


@op(operands=2, exposed=_EVERYWHERE, jvp=multilinear("bmm"))
def bmm(input, mat2):
    """Batched matrix product of two 3-D tensors with equal batch sizes."""
    a, b = input, mat2
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor and batch2 must be a 3D tensor (got {a.ndim}D and {b.ndim}D)")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {a.shape[0]} and {b.shape[0]}")
    return matmul(a, b)


@op(operands=2, exposed=_EVERYWHERE)
def dot(input, tensor):
    """Inner product of two 1-D tensors of one dtype."""
    if input.ndim != 1 or tensor.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {tensor.ndim}D tensors")
    if input.dtype is not tensor.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{input.dtype.name} and {tensor.dtype.name}")
    return matmul(input, tensor)


@op(operands=2, exposed=_EVERYWHERE, aliases=("ger",))
def outer(input, vec2):
    """Outer product of two 1-D tensors: out[i, j] = input[i] * vec2[j]."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"outer: expected 1-D tensors, but got {input.ndim}D and {vec2.ndim}D")
    return input.reshape(-1, 1) * vec2.reshape(1, -1)


ger = outer


@op(exposed=_EVERYWHERE)
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


@op(exposed=_EVERYWHERE)
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


@op(exposed=_EVERYWHERE)
def trace(input):
    """Sum of the main diagonal of a 2-D tensor."""
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return diagonal(input).sum()


@op(operands=3, exposed=_EVERYWHERE)
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2); input broadcasts to the product's shape."""
    prod = mm(mat1, mat2)
    if alpha != 1:
        prod = prod * alpha
    if broadcast_shapes(input.shape, prod.shape) != tuple(prod.shape):
        raise RuntimeError(f"addmm: input of shape {list(input.shape)} does not broadcast to the product's "
                           f"shape {list(prod.shape)}")
    if beta == 0:
        # torch ignores input's values (its nan and inf do not propagate) but gives it a zero
        # gradient: where() passes none of input forward and routes 0 back; adding -0.0 leaves
        # every product exact, -0.0 included
        return prod + ew.where(zeros((), dtype=bool_, device=input._backend.name), input, -0.0)
    return prod + (input if beta == 1 else input * beta)


# -- linear: the affine map of nn.Linear, one op forward and one rule backward ------------------

def _affine(input, weight, bias):
    out = matmul(input, weight.t() if weight.ndim == 2 else weight)  # torch also takes a 1-D weight
    return out if bias is None else out + bias


def _linear_rule(ctx, g):
    x, w = ctx.saved[0], ctx.saved[1]
    need = ctx.needs_input_grad
    gx = g @ w if need[0] else None
    # the weight's gradient in its own (out, in) layout, the batch dims folded into one (a 2-D
    # input, the common case, skips the reshapes: two op calls, about 1 us each, per layer)
    gw = None
    if need[1]:
        gw = (g if g.ndim == 2 else g.reshape(-1, g.shape[-1])).mT @ (x if x.ndim == 2 else x.reshape(-1, x.shape[-1]))
    gb = None
    if need[2]:
        gb = g if g.ndim == 1 else g.sum(tuple(range(g.ndim - 1)))
    return gx, gw, gb


def _linear_args(input, weight, bias=None):
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        raise TypeError("linear(): input and weight must be Tensors")
    if MODES.on and input.dtype is not weight.dtype:  # autocast casts a float32 weight, not _affine
        input, weight, bias = MODES.cast_operands("linear", (input, weight, bias)) or (input, weight, bias)
    si, sw = input._data.shape, weight._data.shape
    if not si or si[-1] != sw[-1]:
        raise RuntimeError(
            f"linear(): input's last dimension must equal weight's in_features: input shape "
            f"{list(si)}, weight shape {list(sw)} (out_features, in_features) "
            f"expects inputs of shape (*, {sw[-1]})"
        )
    # The common case the op serves: a 2-D weight, and input, weight and bias (of
    # (out_features,)) of one floating dtype on one backend; anything else composes matmul and
    # add, with their broadcasting, their errors and their rules.
    backend, dtype = weight._backend, weight.dtype
    if (len(sw) == 2 and dtype.is_floating_point and input.dtype is dtype and input._backend is backend
            and (bias is None or (isinstance(bias, Tensor) and bias.dtype is dtype and bias._backend is backend
                                  and bias._data.shape == (sw[0],)))):
        return (input, weight, bias), NO_ATTRS
    return Done(_affine(input, weight, bias))


@op(bind=_linear_args, derivative=_linear_rule, save=(0, 1), exposed=("nn.functional",),
    jvp=multilinear("linear", bias=2),
    dtypes="floating; input, weight and bias of one dtype (else matmul's and add's promotion)")
def linear(input, weight, bias):
    """``input @ weight.T + bias`` with ``weight`` of shape (out_features, in_features).

    One op (a backend may serve it with one kernel), whose derivative computes the weight's
    gradient as ``g.T @ x`` in the weight's layout and the bias's as a sum over the batch:
    for nn.Linear, one dispatched call forward and one rule backward instead of a transpose,
    a matmul, an add and their rules. A kernel receives input (*, in), weight (out, in) and
    bias (out,) or None, of one floating dtype."""
    return _affine(input, weight, bias)


# -- cross product ----------------------------------------------------------------------------

def _linalg_cross_args(input, other, *, dim=-1):
    for t in (input, other):
        if not isinstance(t, Tensor):
            raise TypeError(f"linalg.cross(): expected Tensors, got {type(t).__name__}")
    if input.ndim != other.ndim:
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions, got "
                           f"{input.ndim} and {other.ndim}")
    shape = broadcast_shapes(input.shape, other.shape)
    d = _wrap_dim(dim, len(shape))
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input.shape[d]} and {other.shape[d]}")
    if input.dtype is not other.dtype:
        dt = result_type(input, other)
        input, other = input.to(dt), other.to(dt)
    return (input.expand(shape), other.expand(shape)), {"dim": d}


@op(bind=_linalg_cross_args)
def linalg_cross(input, other, *, dim):
    """The cross product of 3-vectors along ``dim`` (the other dims broadcast)."""
    def part(t, i):
        return t.narrow(dim, i, 1)
    a = [part(input, i) for i in range(3)]
    b = [part(other, i) for i in range(3)]
    return cat([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]], dim)


@public("plugtorch", "Tensor")
def cross(input, other, dim=None):
    """linalg.cross; without ``dim``, along the first dim of size 3 (torch's deprecated default)."""
    if dim is None:
        shape = broadcast_shapes(input.shape, other.shape)
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError(f"no dimension of size 3 in input (shapes {list(input.shape)} and "
                               f"{list(other.shape)})")
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated; pass dim or "
                      "use linalg.cross.", UserWarning, stacklevel=2)
    return linalg_cross(input, other, dim=dim)


# -- norms (plugtorch.linalg) ---------------------------------------------------------------------

def _norm_input(op_name, x, dtype):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op_name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if dtype is not None:
        x = x.to(dtype)
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op_name}: Expected a floating point or complex tensor as input. Got "
                           f"{x.dtype.name}")
    return x


def _linalg_vector_norm_args(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    x = _norm_input("linalg.vector_norm", x, dtype)
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    return (x,), {"ord": float(ord), "dim": dim, "keepdim": keepdim}


@op(bind=_linalg_vector_norm_args)
def linalg_vector_norm(x, *, ord, dim, keepdim):
    """The vector ``ord``-norm of ``x`` over ``dim`` (all entries, flattened, when None)."""
    return _vector_norm(x, ord, dim, keepdim)


def _linalg_matrix_norm_args(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    A = _norm_input("linalg.matrix_norm", A, dtype)
    if A.ndim < 2:
        raise RuntimeError(f"linalg.matrix_norm: The input tensor A must have at least 2 dimensions "
                           f"(got {A.ndim})")
    dims = tuple(_wrap_dim(d, A.ndim) for d in dim)
    if len(dims) != 2 or dims[0] == dims[1]:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple of different dims, got {dim}")
    if ord not in ("fro", "nuc") and ord not in (1, -1, 2, -2, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if A.numel() == 0 and ord != "fro" and any(A.shape[d] == 0 for d in dims):
        raise IndexError(f"linalg.matrix_norm: Expected a non-empty matrix for ord={ord}")
    return (A,), {"ord": ord, "dim": dims, "keepdim": keepdim}


@op(bind=_linalg_matrix_norm_args)
def linalg_matrix_norm(A, *, ord, dim, keepdim):
    """The matrix ``ord``-norm over the two dims ``dim``: 'fro', 'nuc', 1, -1, 2, -2, inf or -inf
    ('nuc', 2 and -2 from the singular values: their sum, largest and smallest)."""
    d0, d1 = dim
    if ord == "fro":
        return _vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        from .decompositions import svd_values  # (decompositions builds on this module)
        s = svd_values(A.movedim((d0, d1), (-2, -1)))
        out = s.sum(-1) if ord == "nuc" else (amax if ord == 2 else amin)(s, -1)
        return out.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1)) if keepdim else out
    a = ew.abs(A)
    if ord in (1, -1):  # the largest (smallest) column sum
        sums, over = _sum(a, d0, keepdim=True), d1
    else:  # inf, -inf: the largest (smallest) row sum
        sums, over = _sum(a, d1, keepdim=True), d0
    out = (amax if ord > 0 else amin)(sums, over, keepdim=True)
    return out if keepdim else out.squeeze((d0, d1))


def linalg_norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """A vector norm (1-D input or one ``dim``) or a matrix norm (2-D input or two dims);
    ``ord=None`` is the 2-norm of the flattened input."""
    if dim is not None and not isinstance(dim, (tuple, list)):
        dim = (dim,)
    if ord is None:
        if dim is not None and len(dim) == 2:
            return linalg_matrix_norm(A, "fro", dim, keepdim, dtype=dtype)
        return linalg_vector_norm(A, 2, dim, keepdim, dtype=dtype)
    if dim is None:
        if not isinstance(A, Tensor) or A.ndim not in (1, 2):
            got = A.ndim if isinstance(A, Tensor) else type(A).__name__
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be "
                               f"1D or 2D. Got {got}D.")
        dim = tuple(range(A.ndim))
    if len(dim) == 2:
        return linalg_matrix_norm(A, ord, dim, keepdim, dtype=dtype)
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.norm: ord={ord!r} is a matrix norm; it needs a 2-D input or two dims")
    return linalg_vector_norm(A, ord, dim, keepdim, dtype=dtype)
