"""Indexing: ``x[...]``, gather and scatter_add, index_select, masks and one_hot, each differentiable."""
from __future__ import annotations

import builtins

from ..debug import checks_values
from ..dispatch import NO_ATTRS, call_op
from ..dtypes import bool_, int64
from ..optable import Done, op, public
from ..tensor import Tensor, _wrap_dim
from ._args import broadcast_shapes
from ._front import written_out
from ._jvp import linear
from .creation import arange, tensor, zeros
from .elementwise import where
from .reduce import sum as reduce_sum
from .shape import stack

_EVERYWHERE = ("plugtorch", "Tensor")


def native_index(x, key):
    """Turn a user index into the backend's form; returns (index tuple, whether it is basic)."""
    if not isinstance(key, tuple):
        key = (key,)
    b = x._backend
    out, basic = [], True
    spans = []  # the dims each entry covers: a bool mask as many as it has, None and ... none yet
    for k in key:
        if k is None or k is Ellipsis or isinstance(k, slice):
            if isinstance(k, slice):
                k = slice(*(int(v) if isinstance(v, Tensor) else v for v in (k.start, k.stop, k.step)))
                if k.step is not None and k.step <= 0:
                    raise ValueError("step must be greater than zero")
            out.append(k)
            spans.append(1 if isinstance(k, slice) else 0)
        elif isinstance(k, builtins.bool):
            raise IndexError("indexing with a Python bool is not supported; use a bool tensor mask")
        elif isinstance(k, builtins.int):
            out.append(k)
            spans.append(1)
        else:
            if not isinstance(k, Tensor):
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
                spans.append(1)
                continue
            out.append(k._data)
            spans.append(k.ndim if k.dtype is bool_ else 1)
            basic = False
    _check_ints(x, out, spans)
    return tuple(out), basic


def _check_ints(x, index, spans):
    """Bounds-check plain integer indices so the error names the dimension, as torch's does."""
    shape = x._data.shape
    consumed = builtins.sum(spans)
    dim = 0
    for k, span in zip(index, spans):
        if k is Ellipsis:
            dim += len(shape) - consumed
            continue
        if k is None:
            continue
        if dim + span > len(shape):
            raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
        if isinstance(k, builtins.int) and not -shape[dim] <= k < shape[dim]:
            raise IndexError(f"index {k} is out of bounds for dimension {dim} with size {shape[dim]}")
        dim += span


# While plugtorch.func.vmap runs a function: ``x[key]`` with an index tensor that differs per
# example, which no native index can hold, is answered by ``VMAP_INDEX[0](x, key)`` (else it
# returns NotImplemented). None: no vmap.
VMAP_INDEX: list = [None]


def _getitem(input, key):
    if VMAP_INDEX[0] is not None and (out := VMAP_INDEX[0](input, key)) is not NotImplemented:
        return out
    index, basic = native_index(input, key)
    try:
        out = call_op("getitem", (input,), {"index": index})
    except IndexError as e:  # a mask of the wrong shape, an index tensor out of range
        raise IndexError(f"indexing a tensor of shape {list(input.shape)}: {e}") from None
    if basic:
        out._vc = vc = input._vc  # a view
        out._view = (input, "getitem", (input,), {"index": index}, vc[1] if len(vc) > 1 else 0)
    return out


# x[...]'s public function is written out: a basic index's result is a view, sharing the input's
# version counter, and the kernel's error names the indexed shape, both after the kernel ran,
# which a bind, returning before, cannot say.
@op(primitive="getitem", front=written_out(_getitem),
    derivative=lambda ctx, g: index_put_zeros(g, ctx.meta[0][0], ctx.meta[0][1], ctx.attrs["index"]),
    no_kernel="returns a view for basic indices (slices, ints, None, ...), built from the getitem "
              "primitive; register that primitive instead", jvp=linear("getitem"))
def getitem(input, *, index):
    """``input[key]``: slices, ints, None, ..., int and bool tensors (NumPy semantics)."""


def getitem_native(x, index):
    """``x[index]`` for an index already in the backend's form (never a view: used by rules)."""
    return call_op("getitem", (x,), {"index": index})


def _index_put_zeros_rule(ctx, g):
    return getitem_native(g, ctx.attrs["index"])


def _lower_index_put_zeros(backend, g, *, shape, dtype, index):
    p = backend.primitives
    out = p["zeros"](shape, dtype)
    if all(type(k) in (slice, int) for k in index):  # slices and ints: no position twice, so a write
        p["setitem"](out, index, g)  # (index_add would copy the zeros and add into them: 3 passes)
        return out
    return p["index_add"](out, index, g)


def _index_put_zeros_args(g, shape, dtype, index):
    g = g if g.dtype is dtype else g.to(dtype)
    return (g,), {"shape": tuple(shape), "dtype": dtype, "index": index}


@op(lower=_lower_index_put_zeros, bind=_index_put_zeros_args, derivative=_index_put_zeros_rule,
    jvp=linear("index_put_zeros"))
def index_put_zeros(g, *, shape, dtype, index):
    """The adjoint of getitem: zeros(shape) with ``g`` added at ``index``; repeats accumulate."""


# -- index_put: torch's x.index_put_(indices, values, accumulate), and x[i] = v ---------------

def _index_put_rule(ctx, g):
    index, need = ctx.attrs["index"], ctx.needs_input_grad
    gx = None
    if need[0]:  # written positions take none of g, unless values were added to them
        gx = g if ctx.attrs["accumulate"] else call_op("index_fill", (g,), {"index": index, "value": 0})
    gv = getitem_native(g, index) if need[1] else None  # the engine sums it down to values' shape
    return gx, gv


def _lower_index_put(backend, x, values, *, index, accumulate):
    p = backend.primitives
    if accumulate:  # repeated positions sum their values, as np.add.at
        return p["index_add"](x, index, values)
    out = p["copy"](x)
    p["setitem"](out, index, values)
    return out


def _index_put_args(input, indices, values, accumulate=False):
    if not isinstance(indices, (tuple, list)) or not all(isinstance(i, Tensor) for i in indices):
        got = type(indices).__name__ if not isinstance(indices, (tuple, list)) else \
            "a sequence holding " + ", ".join(type(i).__name__ for i in indices)
        raise TypeError(f"index_put(): argument 'indices' (position 1) must be tuple of Tensors, not {got}")
    if not indices:
        raise RuntimeError("index_put(): indices must hold at least one index tensor")
    if not isinstance(values, Tensor):
        raise TypeError(f"index_put(): argument 'values' (position 2) must be Tensor, not {type(values).__name__}")
    if values.dtype is not input.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{_TORCH_NAMES[input.dtype.name]} for the destination and "
                           f"{_TORCH_NAMES[values.dtype.name]} for the source.")
    index, _ = native_index(input, tuple(indices))
    check_put_shape(input, index, values)
    return (input, values), {"index": index, "accumulate": bool(accumulate)}


@op(lower=_lower_index_put, bind=_index_put_args, derivative=_index_put_rule, exposed=_EVERYWHERE,
    inplace=True, jvp=linear("index_put"))
def index_put(input, values, *, index, accumulate):
    """``input`` with ``values`` (broadcast) written at ``indices``, a tuple of index tensors as
    ``input[indices]`` reads them; with ``accumulate``, added there instead, repeats summed.

    A kernel receives ``index`` in the backend's form (what ``native_index`` makes of the
    indices: native int arrays and bool masks), as the ``setitem`` primitive takes it.
    """


def put_native(x, index, values):
    """``x`` with ``x[index] = values`` (out of place), ``index`` already in the backend's form:
    ``x[key] = v`` on a tensor in the graph."""
    return call_op("index_put", (x, values), {"index": index, "accumulate": False})


def check_put_shape(x, index, values):
    """torch's errors for ``x[index] = values``: an index out of range, or values that do not
    broadcast to what ``x[index]`` selects."""
    try:
        target = tuple(x._backend.primitives["getitem"](x._data, index).shape)
    except IndexError as e:
        raise IndexError(f"x[index] = value on a tensor of shape {list(x.shape)}: {e}") from None
    try:
        fits = broadcast_shapes(tuple(values.shape), target) == target
    except RuntimeError:
        fits = False
    if not fits:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast "
                           f"to indexing result of shape {list(target)}")


# torch's scalar-type names, which its dtype errors use
_TORCH_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long", "int32": "Int",
                "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _check_index_dtype(op, index):
    if not isinstance(index, Tensor) or index.dtype is not int64:
        raise RuntimeError(f"{op}(): Expected dtype int64 for index")


def check_scatter_dtypes(input, index, src):
    """torch's first checks of every scatter (scatter, scatter_add, scatter_reduce): an int64
    index, then a tensor ``src`` of ``input``'s own dtype (a number ``value`` is cast)."""
    _check_index_dtype("scatter", index)
    if isinstance(src, Tensor) and src.dtype is not input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype "
                           f"(self is {input.dtype.name}, src is {src.dtype.name}: convert src with "
                           f".to({input.dtype.name}))")


def _check_gather(op, x, dim, index, src=None):
    _check_index_dtype(op, index)
    if index.ndim != x.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    d = _wrap_dim(dim, x.ndim)
    for k in range(x.ndim):
        if (k != d and index.shape[k] > x.shape[k]) or (src is not None and index.shape[k] > src.shape[k]):
            raise RuntimeError(
                f"{op}(): Size does not match at dimension {k} expected index {list(index.shape)} to be "
                f"smaller than self {list(x.shape)} apart from dimension {d}"
                + (f" and to be smaller size than src {list(src.shape)}" if src is not None else ""))
    return d


def _index_error(op_name, x, index, e):
    return RuntimeError(f"{op_name}(): index out of bounds for input of shape {list(x.shape)} with index "
                        f"of shape {list(index.shape)}: {e}")


def _gather_rule(ctx, g):
    shape, dtype = ctx.meta[0]
    return scatter_add(zeros(shape, dtype=dtype, device=g._backend.name), ctx.attrs["dim"],
                       ctx.saved[1], g), None


def _lower_gather(backend, x, index, *, dim):
    whole = x
    # torch allows an index smaller than x in the other dims: it reads that corner of x
    if any(i != dim and k != s for i, (k, s) in enumerate(zip(index.shape, x.shape))):
        corner = tuple(slice(None) if i == dim else slice(0, k) for i, k in enumerate(index.shape))
        x = backend.primitives["getitem"](x, corner)
    try:
        return backend.primitives["gather"](x, dim, index)
    except (IndexError, ValueError) as e:  # an index out of range, in NumPy's words
        raise _index_error("gather", whole, index, e) from None


def _gather_args(input, dim, index):
    if input.ndim == 0 and isinstance(index, Tensor) and index.ndim == 0:
        return Done(gather(input.reshape(1), 0, index.reshape(1)).reshape(()))
    return (input, index), {"dim": _check_gather("gather", input, dim, index)}


@op(lower=_lower_gather, bind=_gather_args, derivative=_gather_rule, save=(1,), exposed=_EVERYWHERE,
    jvp=linear("gather"))
def gather(input, index, *, dim):
    """Values along ``dim`` at ``index`` (take_along_axis); repeated indices accumulate gradients."""


def _scatter_add_rule(ctx, g):
    return g, None, gather(g, ctx.attrs["dim"], ctx.saved[1])


def _lower_scatter_add(backend, x, index, src, *, dim):
    if tuple(src.shape) != tuple(index.shape):  # torch reads the corner of src index covers
        src = backend.primitives["getitem"](src, tuple(slice(0, k) for k in index.shape))
    try:
        return backend.primitives["scatter_add"](x, dim, index, src)
    except (IndexError, ValueError) as e:  # an index out of range, in NumPy's words
        raise _index_error("scatter_add", x, index, e) from None


def _scatter_add_args(input, dim, index, src):
    check_scatter_dtypes(input, index, src)
    if input.ndim == 0 and isinstance(index, Tensor) and index.ndim == 0:
        return Done(scatter_add(input.reshape(1), 0, index.reshape(1), src.reshape(1)).reshape(()))
    return (input, index, src), {"dim": _check_gather("scatter_add", input, dim, index, src)}


@op(lower=_lower_scatter_add, bind=_scatter_add_args, derivative=_scatter_add_rule, save=(1,),
    exposed=_EVERYWHERE, inplace=True)
def scatter_add(input, index, src, *, dim):
    """``input`` with ``src`` added at ``index`` along ``dim`` (repeats accumulate)."""


# -- index_select, masked_fill, one_hot -----------------------------------------------------

def _index_select_rule(ctx, g):
    d = ctx.attrs["dim"]
    return index_put_zeros(g, ctx.meta[0][0], ctx.meta[0][1],
                           (slice(None),) * d + (ctx.saved[1]._data,)), None


def _lower_index_select(backend, x, index, *, dim):
    # torch's result is contiguous; NumPy's x[:, index] lays the indexed dim out first in memory
    p = backend.primitives
    return p["contiguous"](p["getitem"](x, (slice(None),) * dim + (index,)))


def _index_select(input, dim, index):
    if not isinstance(index, Tensor) or index.dtype.is_floating_point or index.dtype is bool_:
        got = index.dtype.name if isinstance(index, Tensor) else type(index).__name__
        raise RuntimeError(f"index_select(): Expected dtype int32/int64 for index, got {got}")
    if index.ndim > 1:
        raise IndexError(f"index_select(): Index is supposed to be a vector, got shape {list(index.shape)}")
    d = _wrap_dim(dim, input.ndim)
    flat = index if index.dtype is int64 else index.to(int64)
    if flat.ndim != 1:  # (a reshape is an op call, and a data loader's indices are 1-D already)
        flat = flat.reshape(-1)
    x = input if input.ndim else input.reshape(1)
    # No host-side bounds check (it would sync a GPU on every call, see DESIGN.md); the
    # backend's own out-of-range error is turned into torch's.
    try:
        out = call_op("index_select", (x, flat), {"dim": d})
    except IndexError:
        raise IndexError(f"index_select(): index out of range in self: dimension {d} has size "
                         f"{x.shape[d]}, indices are {flat.tolist()}") from None
    return out if input.ndim else out.reshape(())


# index_select's public function is written out: a backend's kernel (the NumPy one's row copies)
# reports an index out of range in its own words, which are torch's here, after the kernel ran,
# where a bind, returning before, cannot.
@op(lower=_lower_index_select, front=written_out(_index_select), derivative=_index_select_rule, save=(1,),
    exposed=_EVERYWHERE, jvp=linear("index_select"))
def index_select(input, index, *, dim):
    """The entries at ``index`` (a 1-D int tensor) along ``dim``; repeats are allowed.

    Negative indices count from the end (NumPy's rule; torch rejects them).
    """


def _masked_fill_rule(ctx, g):
    mask = ctx.saved[1]
    need = ctx.needs_input_grad
    gv = None
    if need[2]:  # a 0-d value tensor: every filled position's gradient
        gv = reduce_sum(where(mask, g, 0.0).expand(g.shape))
    return (where(mask, 0.0, g) if need[0] else None), None, gv


def _masked_fill_args(input, mask, value):
    if not isinstance(mask, Tensor) or mask.dtype is not bool_:
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {got}")
    if broadcast_shapes(input.shape, mask.shape) != tuple(input.shape):
        raise RuntimeError(f"masked_fill: the mask of shape {list(mask.shape)} must broadcast to the "
                           f"input's shape {list(input.shape)}")
    return (input, mask, value), NO_ATTRS


@op(bind=_masked_fill_args, derivative=_masked_fill_rule, save=(1,), exposed=_EVERYWHERE, inplace=True)
def masked_fill(input, mask, value):
    """``input`` with ``value`` where ``mask`` is True (mask broadcasts to input)."""
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got "
                               f"tensor with {value.ndim} dimension(s).")
        value = value.to(input.dtype)
    elif not input.dtype.is_floating_point and isinstance(value, builtins.float):
        value = int(value) if input.dtype is not bool_ else builtins.bool(value)
    out = where(mask, value, input)
    return out if out.dtype is input.dtype else out.to(input.dtype)


def _one_hot_args(tensor, num_classes=-1):
    if not isinstance(tensor, Tensor) or tensor.dtype is not int64:
        got = tensor.dtype.name if isinstance(tensor, Tensor) else type(tensor).__name__
        raise RuntimeError(f"one_hot is only applicable to index tensor of type LongTensor (int64), "
                           f"got {got}; convert it with .long()")
    if num_classes == -1:
        # the output's shape depends on the values: read them, as torch does
        if tensor.numel() == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(tensor.max().item()) + 1
    if tensor.numel() and checks_values(tensor):
        if int(tensor.min().item()) < 0:
            raise RuntimeError("Class values must be non-negative.")
        if int(tensor.max().item()) >= num_classes:
            raise RuntimeError(f"Class values must be smaller than num_classes ({num_classes}).")
    return (tensor,), {"num_classes": num_classes}


@op(bind=_one_hot_args, exposed=("nn.functional",), dtypes="-> int64")
def one_hot(input, *, num_classes):
    """int64 tensor with a trailing dim of num_classes, 1 at each class index."""
    classes = arange(num_classes, device=input._backend.name)
    return (input.unsqueeze(-1) == classes).to(int64)


# -- selections by mask ---------------------------------------------------------------------

def _check_mask(op_name, mask):
    if not isinstance(mask, Tensor) or mask.dtype is not bool_:
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(f"{op_name}: expected a boolean mask, got {got}; compare first (x > 0)")


def _masked_select_args(input, mask):
    _check_mask("masked_select", mask)
    return (input, mask), NO_ATTRS


@op(bind=_masked_select_args, exposed=_EVERYWHERE)
def masked_select(input, mask):
    """The elements where ``mask`` (broadcast with input) is True, as a 1-D tensor."""
    shape = broadcast_shapes(input.shape, mask.shape)
    return input.expand(shape)[mask.expand(shape)]


@op(exposed=_EVERYWHERE, dtypes="-> int64")
def argwhere(input):
    """Indices of the non-zero elements, one row per element (int64, shape (n, ndim))."""
    nz = input != 0
    if input.ndim == 0:
        return zeros(int(nz.item()), 0, dtype=int64, device=input._backend.name)
    grids = []
    for d, size in enumerate(input.shape):
        shape = [1] * input.ndim
        shape[d] = size
        grids.append(arange(size, device=input._backend.name).reshape(shape).expand(input.shape)[nz])
    # torch writes the result one dim's indices after another: (n, ndim) with strides (1, n)
    return stack(grids, 0).mT



@public("plugtorch", "Tensor")
def nonzero(input, *, as_tuple=False):
    """argwhere(input); with as_tuple=True, one 1-D index tensor per dim (usable as x[...])."""
    out = argwhere(input)
    if not as_tuple:
        return out
    if input.ndim == 0:  # torch treats a 0-d input as 1-D here
        return (zeros(out.shape[0], dtype=int64, device=input._backend.name),)
    return tuple(out[:, d] for d in range(input.ndim))


@public("plugtorch", "Tensor")
def count_nonzero(input, dim=None):
    """How many elements are non-zero (along ``dim``), as int64."""
    return reduce_sum(input != 0, dim)


def _take_along_dim_args(input, indices, dim=None):
    if not isinstance(indices, Tensor) or indices.dtype is not int64:
        raise RuntimeError("take_along_dim(): dtype of indices should be int64 (Long)")
    return (input, indices), {"dim": dim}


@op(bind=_take_along_dim_args, exposed=_EVERYWHERE)
def take_along_dim(input, indices, *, dim):
    """gather along dim with broadcasting of the other dims (or of the flattened input)."""
    if dim is None:
        return gather(input.reshape(-1), 0, indices.reshape(-1))
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
