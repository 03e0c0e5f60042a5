"""Shape and movement ops: reshape, permute, expand, cat, casts and backend moves.

Views (reshape, permute, expand, squeeze, ...) share their input's version
counter, so an in-place change through a view is seen by the autograd checks.
"""
from __future__ import annotations

from ..dispatch import record, wrap, same_backend
from ..dtypes import dtype as _dtype, result_type
from ..grad_mode import _state as _grad
from ..registry import OpDef
from ..tensor import Tensor, _wrap_dim
from ._composite import composite_op

OPS: list[OpDef] = []


def _view_out(x, data, name, rule, attrs):
    out = wrap(data, x._backend)
    out._vc = x._vc
    if x.requires_grad and _grad.enabled:
        record(out, name, rule, (x,), attrs=attrs)
    return out


def _shape_args(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def _infer_shape(x, shape):
    numel = x.numel()
    known, unknown = 1, None
    for i, s in enumerate(shape):
        if s == -1:
            if unknown is not None:
                raise RuntimeError("only one dimension can be inferred")
            unknown = i
        elif s < 0:
            raise RuntimeError(f"invalid shape dimension {s}")
        else:
            known *= s
    if unknown is not None:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = shape[:unknown] + (numel // known,) + shape[unknown + 1:]
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _reshape_rule(ctx, g):
    return g.reshape(ctx.meta[0][0])


def reshape(x, *shape):
    shape = _infer_shape(x, _shape_args(shape))
    if shape == x._data.shape:
        return _view_out(x, x._data, "reshape", _reshape_rule, None)
    return _view_out(x, x._backend.kernels["reshape"](x._data, shape), "reshape", _reshape_rule, None)


view = reshape
OPS.append(OpDef("reshape", derivative=_reshape_rule, doc="A tensor with the same data and a new shape."))


def _permute_rule(ctx, g):
    dims = ctx.attrs
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d] = i
    return permute(g, inverse)


def permute(x, *dims):
    dims = _shape_args(dims)
    n = x.ndim
    if len(dims) != n:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the length "
            f"of the desired ordering of dimensions i.e. input.dim() = {n} is not equal to len(dims) = {len(dims)}"
        )
    dims = tuple(_wrap_dim(d, n) for d in dims)
    if len(set(dims)) != n:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return _view_out(x, x._backend.kernels["permute"](x._data, dims), "permute", _permute_rule, dims)


OPS.append(OpDef("permute", derivative=_permute_rule, doc="Reorder dimensions."))


@composite_op(OPS)
def transpose(x, dim0, dim1):
    """Swap two dims (a view)."""
    n = x.ndim
    if n == 0:
        return x
    d0, d1 = _wrap_dim(dim0, n), _wrap_dim(dim1, n)
    dims = list(range(n))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(x, dims)


swapaxes = swapdims = transpose


@composite_op(OPS)
def t(x):
    """Transpose a tensor of at most 2 dims."""
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return transpose(x, 0, 1) if x.ndim == 2 else x


@composite_op(OPS)
def squeeze(x, dim=None):
    """Remove size-1 dims (all, or those in dim)."""
    shape = x._data.shape
    if dim is None:
        new = tuple(s for s in shape if s != 1)
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        dims = {_wrap_dim(d, len(shape)) for d in dims}
        new = tuple(s for i, s in enumerate(shape) if not (i in dims and s == 1))
    return reshape(x, new)


@composite_op(OPS)
def unsqueeze(x, dim):
    """Insert a size-1 dim at dim."""
    shape = x._data.shape
    d = _wrap_dim(dim, len(shape) + 1)
    return reshape(x, shape[:d] + (1,) + shape[d:])


@composite_op(OPS)
def flatten(x, start_dim=0, end_dim=-1):
    """Merge dims start_dim..end_dim into one."""
    shape = x._data.shape
    if not shape:
        return reshape(x, (1,))
    s, e = _wrap_dim(start_dim, len(shape)), _wrap_dim(end_dim, len(shape))
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    n = 1
    for v in shape[s:e + 1]:
        n *= v
    return reshape(x, shape[:s] + (n,) + shape[e + 1:])


@composite_op(OPS)
def unflatten(x, dim, sizes):
    """Split dim into the given sizes."""
    shape = x._data.shape
    if not shape:
        raise RuntimeError("unflatten: Dimension specified as 0 but tensor has no dimensions")
    d = _wrap_dim(dim, len(shape))
    sizes = tuple(sizes)
    if -1 in sizes:
        known = 1
        for s in sizes:
            if s != -1:
                known *= s
        sizes = tuple(shape[d] // known if s == -1 else s for s in sizes)
    n = 1
    for s in sizes:
        n *= s
    if n != shape[d]:
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of "
                           f"dim {dim} ({shape[d]}) in the input tensor")
    return reshape(x, shape[:d] + sizes + shape[d + 1:])


def broadcast_shapes(*shapes):
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, v in enumerate(s):
            j = ndim - len(s) + i
            if out[j] == 1:
                out[j] = v
            elif v != 1 and v != out[j]:
                raise RuntimeError(
                    f"shape mismatch: objects cannot be broadcast to a single shape; "
                    f"shapes {[list(s) for s in shapes]} are not broadcastable at dimension {j}"
                )
    return tuple(out)


def _expand_rule(ctx, g):
    return sum_to(g, ctx.meta[0][0])


def expand(x, *sizes):
    sizes = _shape_args(sizes)
    shape = x._data.shape
    if len(sizes) < len(shape):
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to the "
            f"number of dimensions in the tensor ({len(shape)})"
        )
    lead = len(sizes) - len(shape)
    target = list(sizes)
    for i, s in enumerate(shape):
        want = sizes[lead + i]
        if want == -1:
            target[lead + i] = s
        elif s != 1 and s != want:
            raise RuntimeError(
                f"The expanded size of the tensor ({want}) must match the existing size ({s}) at "
                f"non-singleton dimension {lead + i}.  Target sizes: {list(sizes)}.  Tensor sizes: {list(shape)}"
            )
    target = tuple(target)
    if target == shape:
        return x
    return _view_out(x, x._backend.kernels["broadcast_to"](x._data, target), "expand", _expand_rule, None)


def broadcast_to(x, shape):
    return expand(x, tuple(shape))


def expand_as(x, other):
    return expand(x, other.shape)


OPS.append(OpDef("expand", derivative=_expand_rule, doc="Broadcast to a larger shape (a view)."))


def sum_to(g, shape):
    """Sum ``g`` down to ``shape`` — the reverse of broadcasting. Raises ValueError if impossible."""
    gshape = g._data.shape
    if gshape == tuple(shape):
        return g
    lead = len(gshape) - len(shape)
    if lead < 0:
        raise ValueError(f"cannot sum shape {gshape} to {shape}")
    axes = list(range(lead))
    for i, s in enumerate(shape):
        if s == 1 and gshape[lead + i] != 1:
            axes.append(lead + i)
        elif s != gshape[lead + i]:
            raise ValueError(f"cannot sum shape {gshape} to {shape}")
    from .reduce import sum as _sum
    out = _sum(g, tuple(axes), keepdim=True) if axes else g
    return reshape(out, tuple(shape))


# -- casts and moves ---------------------------------------------------------------

def _cast_rule(ctx, g):
    return cast(g, ctx.meta[0][1])


def cast(x, dtype):
    if dtype is x.dtype:
        return x
    b = x._backend
    out = wrap(b.kernels["cast"](x._data, dtype), b)
    if x.requires_grad and _grad.enabled and dtype.is_floating_point:
        record(out, "cast", _cast_rule, (x,))
    return out


OPS.append(OpDef("cast", derivative=_cast_rule, doc="Convert to another dtype."))


def _move_rule(ctx, g):
    return move(g, ctx.attrs)


def move(x, backend):
    """Copy ``x`` to another backend, through host memory (differentiable)."""
    src = x._backend
    if backend is src:
        return x
    host = src.kernels["to_host"](x._data)
    out = wrap(backend.kernels["from_host"](host, x.dtype), backend)
    if x.requires_grad and _grad.enabled:
        record(out, "move", _move_rule, (x,), attrs=src)
    return out


def to(x, *args, dtype=None, device=None, copy=False, non_blocking=False):
    """``x.to(device)``, ``x.to(dtype)``, ``x.to(device, dtype)`` or ``x.to(other_tensor)``."""
    from ..device import Device, get_backend
    for a in args:
        if isinstance(a, _dtype):
            dtype = a
        elif isinstance(a, (str, Device)):
            device = a
        elif isinstance(a, Tensor):
            device, dtype = a._backend.name, a.dtype
        elif a is not None:
            raise TypeError(f"to() received an invalid combination of arguments: {a!r}")
    out = x
    if device is not None:
        out = move(out, get_backend(device))
    if dtype is not None:
        out = cast(out, dtype)
    if copy and out is x:
        out = clone(x)
    return out


def _clone_rule(ctx, g):
    return g


def clone(x):
    b = x._backend
    out = wrap(b.kernels["copy"](x._data), b)
    if x.requires_grad and _grad.enabled:
        record(out, "clone", _clone_rule, (x,))
    return out


def contiguous(x):
    data = x._backend.kernels["contiguous"](x._data)
    return x if data is x._data else _view_out(x, data, "contiguous", _clone_rule, None)


OPS.append(OpDef("clone", derivative=_clone_rule, doc="A copy that owns its memory."))


# -- joining ----------------------------------------------------------------------

def _cat_rule(ctx, g):
    dim, sizes = ctx.attrs
    grads, start = [], 0
    for s in sizes:
        idx = (slice(None),) * dim + (slice(start, start + s),)
        grads.append(g[idx])
        start += s
    return tuple(grads)


def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    b = same_backend("cat", tensors)
    # torch skips legacy 1-D empty tensors when concatenating
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated; "
                               "use stack, or unsqueeze it first")
    nonempty = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or tensors[:1]
    ref = nonempty[0]
    d = _wrap_dim(dim, ref.ndim)
    for i, t in enumerate(nonempty):
        if t.ndim != ref.ndim:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {ref.ndim} and {t.ndim}"
            )
        for k in range(ref.ndim):
            if k != d and t.shape[k] != ref.shape[k]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size "
                    f"{ref.shape[k]} but got size {t.shape[k]} for tensor number {i} in the list."
                )
    dt = result_type(*nonempty)
    nonempty = [t if t.dtype is dt else cast(t, dt) for t in nonempty]
    out = wrap(b.kernels["concatenate"]([t._data for t in nonempty], d), b)
    if _grad.enabled and any(t.requires_grad for t in nonempty):
        record(out, "cat", _cat_rule, tuple(nonempty), attrs=(d, tuple(t.shape[d] for t in nonempty)))
    return out


concat = concatenate = cat
OPS.append(OpDef("cat", derivative=_cat_rule, doc="Join tensors along an existing dimension."))


@composite_op(OPS)
def stack(tensors, dim=0):
    """Join equally shaped tensors along a new dim."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shape = tensors[0].shape
    for i, t in enumerate(tensors):
        if t.shape != shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(shape)} at entry 0 and "
                f"{list(t.shape)} at entry {i}"
            )
    d = _wrap_dim(dim, len(shape) + 1)
    return cat([unsqueeze(t, d) for t in tensors], d)
