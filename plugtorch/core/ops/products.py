"""torch's other products and distances: tensordot, kron, inner, mv, vdot, the fused
``add*`` products (baddbmm, addbmm, addmv, addr), matrix_power, chain_matmul, block_diag,
cdist, pdist and dist.

Each is a decomposition into matmul, reshapes and reductions, so its derivative (and its
forward derivative) comes from theirs; the binds give torch's checks and messages.
"""
from __future__ import annotations

import functools
import warnings

from ..dtypes import bool_, result_type
from ..optable import Done, op, public
from ..tensor import Tensor, _wrap_dim
from . import elementwise as ew
from ._args import broadcast_shapes
from .creation import arange, eye, zeros
from .linalg import matmul, mm
from .shape import cat
from .statistics import norm as _vector_norm

_EVERYWHERE = ("plugtorch", "Tensor")


def _tensordot_args(a, b, dims=2, out=None):
    if out is not None:
        raise TypeError("tensordot(): out= is not supported; assign the result instead")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > a.ndim or dims > b.ndim:
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        if len(dims) != 2:
            raise RuntimeError(f"tensordot expects dims to be an int or a pair of dim lists, got {dims!r}")
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
        if len(da) != len(db):
            raise RuntimeError("both dimension lists should have same length")
    da = [_wrap_dim(d, a.ndim) for d in da]
    db = [_wrap_dim(d, b.ndim) for d in db]
    for x, y in zip(da, db):
        if a.shape[x] != b.shape[y]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[x]} in dim "
                               f"{x - a.ndim if isinstance(dims, int) else x} and second has size "
                               f"{b.shape[y]} in dim {y}")
    return (a, b), {"dims_a": tuple(da), "dims_b": tuple(db)}


@op(bind=_tensordot_args, exposed=("plugtorch",))
def tensordot(a, b, *, dims_a, dims_b):
    """Contract ``a``'s dims ``dims_a`` with ``b``'s ``dims_b``: the free dims of ``a``, then
    those of ``b``."""
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    k = 1
    for d in dims_a:
        k *= a.shape[d]
    x = a.permute(free_a + list(dims_a)).reshape(-1, k)
    y = b.permute(list(dims_b) + free_b).reshape(k, -1)
    if a.dtype is not b.dtype:
        dt = result_type(a, b)
        x, y = x.to(dt), y.to(dt)
    return mm(x, y).reshape([a.shape[d] for d in free_a] + [b.shape[d] for d in free_b])


@op(operands=2, exposed=_EVERYWHERE)
def kron(input, other):
    """The Kronecker product: each element of ``input`` scales a copy of ``other``."""
    n = max(input.ndim, other.ndim)
    sa = (1,) * (n - input.ndim) + tuple(input.shape)
    sb = (1,) * (n - other.ndim) + tuple(other.shape)
    a = input.reshape([s for d in sa for s in (d, 1)])
    b = other.reshape([s for d in sb for s in (1, d)])
    return (a * b).reshape([x * y for x, y in zip(sa, sb)])


@op(operands=2, exposed=_EVERYWHERE)
def inner(input, other):
    """Sum of products over the last dims (a 0-d operand scales the other)."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    return tensordot(input, other, ([-1], [-1]))


@op(operands=2, exposed=_EVERYWHERE)
def mv(input, vec):
    """Matrix-vector product of a 2-D and a 1-D tensor."""
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {input.ndim}, {vec.ndim}")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({input.shape[0]}), mat ({input.shape[0]}x{input.shape[1]}), "
                           f"vec ({vec.shape[0]})")
    return matmul(input, vec)


@op(operands=2, exposed=_EVERYWHERE)
def vdot(input, other):
    """Dot product of two 1-D tensors, the first conjugated (real tensors: ``dot``)."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"vdot : expected both vectors to have same dtype, but found "
                           f"{input.dtype.name} and {other.dtype.name}")
    return matmul(input.conj(), other)


def _scaled_sum(op_name, input, prod, beta, alpha):
    """beta * input + alpha * prod, input broadcast to prod's shape (torch's add* ops)."""
    try:
        shape = broadcast_shapes(input.shape, prod.shape)
    except RuntimeError:
        shape = None
    if shape != tuple(prod.shape):
        raise RuntimeError(f"{op_name}: input of shape {list(input.shape)} does not broadcast to the product's "
                           f"shape {list(prod.shape)}")
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        # torch ignores input's values (its nan and inf do not propagate) but gives it a zero
        # gradient: where() passes none of input forward and routes 0 back
        return prod + ew.where(zeros((), dtype=bool_, device=input._backend.name), input, 0)
    return prod + (input if beta == 1 else input * beta)


def _check_batches(op_name, b1, b2):
    if b1.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b2.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if b2.shape[0] != b1.shape[0] or b2.shape[1] != b1.shape[2]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{b1.shape[0]}, {b1.shape[2]}] but got: [{b2.shape[0]}, {b2.shape[1]}].")


@op(operands=3, exposed=_EVERYWHERE, inplace=True)
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2), batch by batch."""
    _check_batches("baddbmm", batch1, batch2)
    return _scaled_sum("baddbmm", input, matmul(batch1, batch2), beta, alpha)


@op(operands=3, exposed=_EVERYWHERE, inplace=True)
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * the sum over the batch of batch1[i] @ batch2[i]."""
    _check_batches("addbmm", batch1, batch2)
    # the batch folded into the inner dim: one matrix product sums the batch's products
    n, p = batch1.shape[1], batch2.shape[2]
    a = batch1.permute(1, 0, 2).reshape(n, -1)
    b = batch2.reshape(-1, p)
    return _scaled_sum("addbmm", input, mm(a, b), beta, alpha)


@op(operands=3, exposed=_EVERYWHERE, inplace=True)
def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec)."""
    if mat.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {mat.ndim}, {vec.ndim}")
    if mat.shape[1] != vec.shape[0] or (input.ndim == 1 and input.shape[0] not in (1, mat.shape[0])):
        raise RuntimeError(f"size mismatch, got input ({', '.join(map(str, input.shape))}), "
                           f"mat ({mat.shape[0]}x{mat.shape[1]}), vec ({vec.shape[0]})")
    return _scaled_sum("addmv", input, matmul(mat, vec), beta, alpha)


@op(operands=3, exposed=_EVERYWHERE, inplace=True)
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * the outer product of vec1 and vec2."""
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v.ndim}-D")
    return _scaled_sum("addr", input, vec1.reshape(-1, 1) * vec2.reshape(1, -1), beta, alpha)


@op(exposed=_EVERYWHERE)
def matrix_power(input, n):
    """The matrix to the integer power ``n`` by repeated squaring (batched); ``n = 0`` gives
    identities, a negative ``n`` the power of the inverse."""
    if input.ndim < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 dimensions.")
    if input.shape[-1] != input.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{input.shape[-2]} by {input.shape[-1]} matrices")
    if n < 0:  # the power of the inverse, as torch's
        from .linalg_api import inv
        return matrix_power(inv(input), -n)
    if n == 0:
        # identities in input's graph with a zero gradient: an empty slice's sum is exactly 0,
        # where input * 0 would turn an inf into nan
        k = input.shape[-1]
        return eye(k, dtype=input.dtype, device=input._backend.name) + input[..., :0].sum(-1, keepdim=True)
    while not n & 1:  # the lowest set bit's square starts the product
        input, n = matmul(input, input), n >> 1
    result, base = input.clone(), input
    n >>= 1
    while n:
        base = matmul(base, base)
        if n & 1:
            result = matmul(result, base)
        n >>= 1
    return result


@public("plugtorch")
def chain_matmul(*matrices, out=None):
    """The product of 2-D matrices left to right (deprecated in torch for linalg.multi_dot)."""
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                  "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than "
                  "multiple parameters.", UserWarning, stacklevel=2)
    if out is not None:
        raise TypeError("chain_matmul(): out= is not supported; assign the result instead")
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for i, m in enumerate(matrices):
        if m.ndim != 2:
            raise RuntimeError(f"chain_matmul(): Expected all tensors to be 2D, but tensor {i} is {m.ndim}D")
    if len(matrices) == 1:
        return matrices[0].clone()
    for i in range(len(matrices) - 1):
        a, b = matrices[i], matrices[i + 1]
        if a.shape[1] != b.shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {list(a.shape)} and "
                               f"{list(b.shape)} cannot be multiplied")
    return functools.reduce(mm, matrices)


def _block_diag_args(*tensors):
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"block_diag(): argument 'tensors' must be tuple of Tensors, not {type(t).__name__}")
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{t.ndim} dimensions")
    if not tensors:
        return Done(zeros(1, 0))
    return tensors, {}


@op(bind=_block_diag_args, variadic=True, exposed=("plugtorch",))
def block_diag(tensors):
    """The tensors (0-d: 1x1, 1-D: one row) along the diagonal of a matrix of zeros."""
    dt = result_type(*tensors)
    blocks = [t.reshape(1, 1) if t.ndim == 0 else t.reshape(1, -1) if t.ndim == 1 else t for t in tensors]
    cols = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    dev = tensors[0]._backend.name
    for b in blocks:
        r, c = b.shape
        rows.append(cat([zeros(r, left, dtype=dt, device=dev), b.to(dt),
                         zeros(r, cols - left - c, dtype=dt, device=dev)], 1))
        left += c
    return cat(rows, 0)


# -- distances ----------------------------------------------------------------------------------

def _dtype_word(dt) -> str:
    return {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
            "bool": "Bool"}.get(dt.name, dt.name)


def _cdist_args(x1, x2, p=2.0, compute_mode=None):
    for name, x in (("X1", x1), ("X2", x2)):
        if x.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {x.ndim}D")
    for name, x in (("X1", x1), ("X2", x2)):
        if not x.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {_dtype_word(x.dtype)}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    modes = (None, "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")
    if compute_mode not in modes:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    return (x1, x2), {"p": float(p)}


@op(bind=_cdist_args, exposed=("plugtorch",))
def cdist(x1, x2, *, p):
    """The p-norm distance between each row of x1 (..., P, M) and each row of x2 (..., R, M):
    (..., P, R), the batch dims broadcast. Computed from the differences (torch's
    ``donot_use_mm`` mode) for every p: exact at coincident rows, where the gradient is 0."""
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return _vector_norm(diff, p, -1)


@op(operands=2, exposed=_EVERYWHERE)
def dist(input, other, p=2):
    """The p-norm of ``input - other`` (broadcast), as a 0-d tensor."""
    for t in (input, other):
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"norm(): input dtype should be either floating point or complex. Got "
                               f"{_dtype_word(t.dtype)} instead.")
    return _vector_norm((input - other).reshape(-1), float(p), 0)


@op(exposed=("plugtorch", "nn.functional"))
def pdist(input, p=2):
    """The p-norm distances between the rows of a 2-D input, pairs i < j in row-major order."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"pdist only supports floating-point dtypes, got: {_dtype_word(input.dtype)}")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input.shape[0]
    dev = input._backend.name
    i = arange(n, device=dev).unsqueeze(1).expand(n, n)
    j = arange(n, device=dev).unsqueeze(0).expand(n, n)
    keep = j > i
    rows, cols = i[keep], j[keep]
    return _vector_norm(input[rows] - input[cols], float(p), -1)
