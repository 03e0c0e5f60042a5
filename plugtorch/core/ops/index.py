"""Indexing: ``x[...]``, gather and scatter_add, each differentiable."""
from __future__ import annotations

import builtins

from ..dispatch import record, wrap, same_backend
from ..dtypes import bool_, int64
from ..grad_mode import _state as _grad
from ..registry import OpDef
from ..tensor import Tensor, _wrap_dim

OPS: list[OpDef] = []


def _native_index(x, key):
    """Turn a user index into the backend's form; returns (index tuple, whether it is basic)."""
    if not isinstance(key, tuple):
        key = (key,)
    b = x._backend
    out, basic = [], True
    for k in key:
        if k is None or k is Ellipsis or isinstance(k, slice):
            if isinstance(k, slice):
                k = slice(*(int(v) if isinstance(v, Tensor) else v for v in (k.start, k.stop, k.step)))
                if k.step is not None and k.step <= 0:
                    raise ValueError("step must be greater than zero")
            out.append(k)
        elif isinstance(k, builtins.bool):
            raise IndexError("indexing with a Python bool is not supported; use a bool tensor mask")
        elif isinstance(k, builtins.int):
            out.append(k)
        else:
            if not isinstance(k, Tensor):
                from .creation import tensor
                k = tensor(k, device=b.name)
            if k._backend is not b:
                raise IndexError(
                    f"indices are on backend '{k._backend.name}' but the indexed tensor is on "
                    f"'{b.name}'; move the indices with .to('{b.name}')"
                )
            if k.dtype is not bool_ and k.dtype.is_floating_point:
                raise IndexError(
                    "tensors used as indices must be long, int, byte or bool tensors, got "
                    f"{k.dtype.name}"
                )
            if k.dtype is not bool_ and k.dtype is not int64:
                k = k.to(int64)
            if k.ndim == 0 and k.dtype is int64:
                out.append(int(k.item()))
                continue
            out.append(k._data)
            basic = False
    _check_ints(x, out)
    return tuple(out), basic


def _check_ints(x, index):
    """Bounds-check plain integer indices so the error names the dimension, as torch's does."""
    shape = x._data.shape

    def span(k):  # a bool mask covers as many dims as it has (a 0-d mask covers none)
        return k.ndim if hasattr(k, "dtype") and str(k.dtype) == "bool" else 1
    consumed = builtins.sum(span(k) for k in index if k is not None and k is not Ellipsis)
    dim = 0
    for k in index:
        if k is Ellipsis:
            dim += len(shape) - consumed
            continue
        if k is None:
            continue
        if dim + span(k) > len(shape):
            raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
        if isinstance(k, builtins.int) and not -shape[dim] <= k < shape[dim]:
            raise IndexError(f"index {k} is out of bounds for dimension {dim} with size {shape[dim]}")
        dim += span(k)


def _getitem_rule(ctx, g):
    index, _ = ctx.attrs
    return _index_put_zeros(g, ctx.meta[0][0], ctx.meta[0][1], index)


def getitem(x, key):
    index, basic = _native_index(x, key)
    b = x._backend
    try:
        out = wrap(b.kernels["getitem"](x._data, index), b)
    except IndexError as e:  # a mask of the wrong shape, an index tensor out of range
        raise IndexError(f"indexing a tensor of shape {list(x.shape)}: {e}") from None
    if basic:
        out._vc = x._vc  # a view
    if x.requires_grad and _grad.enabled:
        record(out, "getitem", _getitem_rule, (x,), attrs=(index, basic))
    return out


OPS.append(OpDef("getitem", derivative=_getitem_rule, doc="x[index]: slices, ints, None, ..., int and bool tensors."))


def _index_put_zeros_rule(ctx, g):
    return getitem_native(g, ctx.attrs)


def getitem_native(x, index):
    b = x._backend
    out = wrap(b.kernels["getitem"](x._data, index), b)
    if x.requires_grad and _grad.enabled:
        record(out, "getitem", _getitem_rule, (x,), attrs=(index, False))
    return out


def _index_put_zeros(g, shape, dtype, index):
    """zeros(shape) with ``g`` added at ``index`` (repeated indices accumulate)."""
    b = g._backend
    zeros = b.kernels["zeros"](shape, dtype)
    g = g if g.dtype is dtype else g.to(dtype)
    out = wrap(b.kernels["index_add"](zeros, index, g._data), b)
    if g.requires_grad and _grad.enabled:
        record(out, "index_put_zeros", _index_put_zeros_rule, (g,), attrs=index)
    return out


OPS.append(OpDef("index_put_zeros", derivative=_index_put_zeros_rule,
                 doc="The adjoint of getitem: scatter a gradient into zeros."))


def _check_gather(op, x, dim, index, src=None):
    if not isinstance(index, Tensor) or index.dtype is not int64:
        raise RuntimeError(f"{op}(): Expected dtype int64 for index")
    if index.ndim != x.ndim:
        raise RuntimeError(f"Index tensor must have the same number of dimensions as input tensor")
    d = _wrap_dim(dim, x.ndim)
    for k in range(x.ndim):
        if (k != d and index.shape[k] > x.shape[k]) or (src is not None and index.shape[k] > src.shape[k]):
            raise RuntimeError(
                f"{op}(): Size does not match at dimension {k} expected index {list(index.shape)} to be "
                f"smaller than self {list(x.shape)} apart from dimension {d}"
                + (f" and to be smaller size than src {list(src.shape)}" if src is not None else ""))
    return d


def _index_kernel(op, fn, x, index, *args):
    """Run a gather/scatter kernel; an index out of range becomes torch's error, naming the op."""
    try:
        return fn(*args)
    except (IndexError, ValueError) as e:
        raise RuntimeError(f"{op}(): index out of bounds for input of shape {list(x.shape)} with index "
                           f"of shape {list(index.shape)}: {e}") from None


def _gather_rule(ctx, g):
    dim, index = ctx.attrs
    from .creation import zeros_like
    shape, dtype = ctx.meta[0]
    base = wrap(g._backend.kernels["zeros"](shape, dtype), g._backend)
    return scatter_add(base, dim, index, g)


def gather(x, dim, index):
    if x.ndim == 0 and index.ndim == 0:  # take_along_axis needs an axis: go through 1-D
        return gather(x.reshape(1), 0, index.reshape(1)).reshape(())
    d = _check_gather("gather", x, dim, index)
    b = same_backend("gather", (x, index))
    out = wrap(_index_kernel("gather", b.kernels["gather"], x, index, x._data, d, index._data), b)
    if x.requires_grad and _grad.enabled:
        record(out, "gather", _gather_rule, (x,), attrs=(d, index))
    return out


OPS.append(OpDef("gather", derivative=_gather_rule, doc="Values along dim at index (take_along_axis)."))


def _scatter_add_rule(ctx, g):
    dim, index = ctx.attrs
    return g, gather(g, dim, index)


def scatter_add(x, dim, index, src):
    if x.ndim == 0 and isinstance(index, Tensor) and index.ndim == 0:
        return scatter_add(x.reshape(1), 0, index.reshape(1), src.reshape(1)).reshape(())
    d = _check_gather("scatter_add", x, dim, index, src)
    b = same_backend("scatter_add", (x, index, src))
    if src.dtype is not x.dtype:
        src = src.to(x.dtype)
    out = wrap(_index_kernel("scatter_add", b.kernels["scatter_add"], x, index,
                             x._data, d, index._data, src._data), b)
    if _grad.enabled and (x.requires_grad or src.requires_grad):
        record(out, "scatter_add", _scatter_add_rule, (x, src), attrs=(d, index))
    return out


OPS.append(OpDef("scatter_add", derivative=_scatter_add_rule, doc="x with src added at index along dim."))


# -- index_select, masked_fill, one_hot -----------------------------------------------------

def _index_select_rule(ctx, g):
    index, _ = ctx.attrs
    return _index_put_zeros(g, ctx.meta[0][0], ctx.meta[0][1], index)


def index_select(input, dim, index):
    """The entries at ``index`` (a 1-D int tensor) along ``dim``; repeats are allowed.

    Negative indices count from the end (NumPy's rule; torch rejects them).
    """
    if not isinstance(index, Tensor) or index.dtype.is_floating_point or index.dtype is bool_:
        got = index.dtype.name if isinstance(index, Tensor) else type(index).__name__
        raise RuntimeError(f"index_select(): Expected dtype int32/int64 for index, got {got}")
    if index.ndim > 1:
        raise IndexError(f"index_select(): Index is supposed to be a vector, got shape {list(index.shape)}")
    b = same_backend("index_select", (input, index))
    d = _wrap_dim(dim, input.ndim)
    if index.dtype is not int64:
        index = index.to(int64)
    flat = index.reshape(-1)
    x = input if input.ndim else input.reshape(1)
    native = (slice(None),) * d + (flat._data,)
    # No host-side bounds check (it would sync a GPU on every call, see DESIGN.md); the
    # backend's own out-of-range error is turned into torch's.
    try:
        out = wrap(b.kernels["getitem"](x._data, native), b)
    except IndexError:
        raise IndexError(f"index_select(): index out of range in self: dimension {d} has size "
                         f"{x.shape[d]}, indices are {flat.tolist()}") from None
    if x.requires_grad and _grad.enabled:
        record(out, "index_select", _index_select_rule, (x,), attrs=(native, False))
    return out if input.ndim else out.reshape(())


OPS.append(OpDef("index_select", derivative=_index_select_rule,
                 doc="Entries at a 1-D index along dim; repeated indices accumulate gradients."))


def _masked_fill(input, mask, value):
    from .elementwise import where
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got "
                               f"tensor with {value.ndim} dimension(s).")
        value = value.to(input.dtype)
    elif not input.dtype.is_floating_point and isinstance(value, builtins.float):
        value = int(value) if input.dtype is not bool_ else builtins.bool(value)
    out = where(mask, value, input)
    return out if out.dtype is input.dtype else out.to(input.dtype)


_MASKED_FILL = OpDef("masked_fill", decompose=_masked_fill,
                     doc="x with value where mask is True (mask broadcasts to x).")
OPS.append(_MASKED_FILL)


def masked_fill(input, mask, value):
    if not isinstance(mask, Tensor) or mask.dtype is not bool_:
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {got}")
    from .shape import broadcast_shapes
    if broadcast_shapes(input.shape, mask.shape) != tuple(input.shape):
        raise RuntimeError(f"masked_fill: the mask of shape {list(mask.shape)} must broadcast to the "
                           f"input's shape {list(input.shape)}")
    from ..dispatch import call_op
    return call_op(_MASKED_FILL, (input, mask), {"value": value})


def _one_hot(tensor, num_classes):
    from .creation import arange
    classes = arange(num_classes, device=tensor._backend.name)
    return (tensor.unsqueeze(-1) == classes).to(int64)


_ONE_HOT = OpDef("one_hot", decompose=_one_hot,
                 doc="int64 tensor with a trailing dim of num_classes, 1 at each class index.")
OPS.append(_ONE_HOT)


def one_hot(tensor, num_classes=-1):
    if not isinstance(tensor, Tensor) or tensor.dtype is not int64:
        got = tensor.dtype.name if isinstance(tensor, Tensor) else type(tensor).__name__
        raise RuntimeError(f"one_hot is only applicable to index tensor of type LongTensor (int64), "
                           f"got {got}; convert it with .long()")
    if num_classes == -1:
        if tensor.numel() == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(tensor.max().item()) + 1
    if tensor.numel():
        if int(tensor.min().item()) < 0:
            raise RuntimeError("Class values must be non-negative.")
        if int(tensor.max().item()) >= num_classes:
            raise RuntimeError(f"Class values must be smaller than num_classes ({num_classes}).")
    from ..dispatch import call_op
    return call_op(_ONE_HOT, (tensor,), {"num_classes": num_classes})


# -- selections by mask ---------------------------------------------------------------------

def _check_mask(op, mask):
    if not isinstance(mask, Tensor) or mask.dtype is not bool_:
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(f"{op}: expected a boolean mask, got {got}; compare first (x > 0)")


def _masked_select(input, mask):
    from .shape import broadcast_shapes
    shape = broadcast_shapes(input.shape, mask.shape)
    return input.expand(shape)[mask.expand(shape)]


_MASKED_SELECT = OpDef("masked_select", decompose=_masked_select,
                       doc="The elements where mask (broadcast with input) is True, as a 1-D tensor.")
OPS.append(_MASKED_SELECT)


def masked_select(input, mask):
    _check_mask("masked_select", mask)
    from ..dispatch import call_op
    return call_op(_MASKED_SELECT, (input, mask), {})


def _argwhere(input):
    from .creation import arange
    from .shape import stack
    nz = input != 0
    if input.ndim == 0:
        from .creation import zeros
        return zeros(int(nz.item()), 0, dtype=int64, device=input._backend.name)
    grids = []
    for d, size in enumerate(input.shape):
        shape = [1] * input.ndim
        shape[d] = size
        grids.append(arange(size, device=input._backend.name).reshape(shape).expand(input.shape)[nz])
    return stack(grids, 1)


_ARGWHERE = OpDef("argwhere", decompose=_argwhere,
                  doc="Indices of the non-zero elements, one row per element (int64, shape (n, ndim)).")
OPS.append(_ARGWHERE)


def argwhere(input):
    from ..dispatch import call_op
    return call_op(_ARGWHERE, (input,), {})


def nonzero(input, *, as_tuple=False):
    """argwhere(input); with as_tuple=True, one 1-D index tensor per dim (usable as x[...])."""
    out = argwhere(input)
    if not as_tuple:
        return out
    if input.ndim == 0:  # torch treats a 0-d input as 1-D here
        from .creation import zeros
        return (zeros(out.shape[0], dtype=int64, device=input._backend.name),)
    return tuple(out[:, d] for d in range(input.ndim))


def count_nonzero(input, dim=None):
    from .reduce import sum as _sum
    return _sum(input != 0, dim)


def _take_along_dim(input, indices, dim=None):
    if dim is None:
        return gather(input.reshape(-1), 0, indices.reshape(-1))
    from .shape import broadcast_shapes
    d = _wrap_dim(dim, input.ndim)
    if indices.ndim != input.ndim:
        raise RuntimeError(f"take_along_dim(): input and indices should have the same number of "
                           f"dimensions, but got {input.ndim} dimensions for input, and {indices.ndim} "
                           "dimensions for indices")
    # every dim but ``dim`` broadcasts between the two
    shape = broadcast_shapes(tuple(s for i, s in enumerate(input.shape) if i != d),
                             tuple(s for i, s in enumerate(indices.shape) if i != d))
    full = list(shape)
    x_shape = full[:d] + [input.shape[d]] + full[d:]
    i_shape = full[:d] + [indices.shape[d]] + full[d:]
    return gather(input.expand(x_shape), d, indices.expand(i_shape))


_TAKE_ALONG_DIM = OpDef("take_along_dim", decompose=_take_along_dim,
                        doc="gather along dim with broadcasting of the other dims (or of the flattened input).")
OPS.append(_TAKE_ALONG_DIM)


def take_along_dim(input, indices, dim=None):
    if not isinstance(indices, Tensor) or indices.dtype is not int64:
        raise RuntimeError("take_along_dim(): dtype of indices should be int64 (Long)")
    from ..dispatch import call_op
    return call_op(_TAKE_ALONG_DIM, (input, indices), {"dim": dim})
