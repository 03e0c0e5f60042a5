"""Shape ops: views (reshape, permute, expand and what is built on them), copies, and joins.

Views share their input's memory and version counter, so an in-place change through a
view is seen by the autograd checks; kernels cannot serve them (``OpDef.view``), since
a kernel could not promise to return a view.
"""
from __future__ import annotations

import builtins
import math

from ..dispatch import call_op1
from ..dtypes import dtype as _dtype
from ..dtypes import result_type
from ..optable import Done, op, public
from ..tensor import Tensor, _wrap_dim
from ._args import broadcast_shapes, shape_args
from ._front import written_out
from ._jvp import linear
from .conversion import cast
from .reduce import sum as reduce_sum

_EVERYWHERE = ("plugtorch", "Tensor")


def _infer_shape(x, shape):
    numel = x._data.size
    if -1 not in shape:  # the common case, checked without a Python loop
        if math.prod(shape) == numel and (not shape or min(shape) >= 0):
            return shape
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


# -- the three view primitives -------------------------------------------------------

# reshape, view, permute and expand run several times per layer: their public functions are
# written out, the checks inline and call_op1 called, since a bind's call and call_op's pass
# over an operand tuple would add a third to a 1.7 us reshape.

def _reshape(input, *shape):
    return call_op1("reshape", input, {"shape": _infer_shape(input, shape_args(shape))})


@op(primitive="reshape", front=written_out(_reshape), derivative=lambda ctx, g: reshape(g, ctx.meta[0][0]),
    view=True, exposed=_EVERYWHERE, jvp=linear("reshape"))
def reshape(input, *, shape):
    """A tensor with the same data and a new shape (one dim may be -1)."""


def _view(input, *shape):
    if len(shape) == 1 and isinstance(shape[0], _dtype):
        return view_dtype(input, shape[0])
    shape = _infer_shape(input, shape_args(shape))
    if not _viewable(input, shape):
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead. "
            f"(input shape {list(input.shape)}, strides {list(stride(input))}, view shape "
            f"{list(shape)})")
    return call_op1("view", input, {"shape": shape})


@op(primitive="reshape", front=written_out(_view), derivative=lambda ctx, g: reshape(g, ctx.meta[0][0]),
    view=True, exposed=("Tensor",), jvp=linear("view"))
def view(input, *, shape):
    """The same memory seen with another shape (one dim may be -1), or, given a dtype, as
    another dtype. Never a copy: where the strides cannot express the new shape it raises
    (``reshape`` copies there instead)."""


def _contiguous_strides(shape) -> tuple:
    out, step = [], 1
    for size in reversed(shape):
        out.append(step)
        step *= builtins.max(size, 1)
    return tuple(reversed(out))


def _is_contiguous(shape, strides) -> bool:
    """torch's rule: row-major apart from size-1 dims (whose stride does not matter)."""
    expected = 1
    for size, st in zip(reversed(shape), reversed(strides)):
        if size == 0:
            return True
        if size != 1:
            if st != expected:
                return False
            expected *= size
    return True


def _viewable(x, shape) -> bool:
    """Whether ``shape`` can be had from ``x``'s strides without a copy (torch's computeStride)."""
    old = x._data.shape
    if x._data.size <= 1:
        return True
    strides = _strides(x)
    if _is_contiguous(old, strides):
        return True
    view_d, base = len(shape) - 1, strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(old) - 1, -1, -1):
        tensor_numel *= old[d]
        # a chunk ends where the memory of dims d-1 and d stops being one run
        if d == 0 or (old[d - 1] != 1 and strides[d - 1] != tensor_numel * base):
            while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
                view_numel *= shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return False
            if d > 0:
                base, tensor_numel, view_numel = strides[d - 1], 1, 1
    return view_d == -1


def _strides(x) -> tuple:
    # a backend that predates the strides primitive has row-major arrays as far as we can tell
    fn = x._backend.primitives.get("strides")
    return tuple(fn(x._data)) if fn is not None else _contiguous_strides(x._data.shape)


@public("Tensor")
def stride(input, dim=None):
    """The step in elements between neighbours along each dim (or along ``dim``) in memory."""
    strides = _strides(input)
    return strides if dim is None else strides[_wrap_dim(dim, input.ndim)]


@public("Tensor")
def is_contiguous(input, memory_format=None) -> bool:
    """Whether the elements lie in memory in row-major order without gaps (size-1 dims aside)."""
    if memory_format is not None and getattr(memory_format, "name", memory_format) not in (
            "contiguous_format", "preserve_format"):
        raise RuntimeError(f"is_contiguous(): memory_format {memory_format!r} is not supported; "
                           "plugtorch tensors are row-major (contiguous_format)")
    return _is_contiguous(input._data.shape, _strides(input))


def _lower_view_dtype(backend, x, *, dtype):
    return backend.primitives["bitcast"](x, dtype)


def _view_dtype_args(input, dtype):
    if dtype is input.dtype:
        return Done(reshape(input, input.shape))
    old, new = input.dtype.itemsize, dtype.itemsize
    if old != new and input.ndim:
        what = f"to view {input.dtype.name} as {dtype.name} (different element sizes)"
        if input.stride(-1) != 1 and input.shape[-1] != 1:
            raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {input.stride(-1)}")
        if new > old and input.shape[-1] * old % new:
            raise RuntimeError(f"self.size(-1) must be divisible by {new // old} {what}, but got "
                               f"{input.shape[-1]}")
    elif old != new:
        raise RuntimeError(f"self.dim() cannot be 0 to view {input.dtype.name} as {dtype.name} "
                           "(different element sizes)")
    return (input,), {"dtype": dtype}


@op(lower=_lower_view_dtype, bind=_view_dtype_args, view=True)
def view_dtype(input, *, dtype):
    """``input``'s memory read as ``dtype`` (Tensor.view(dtype)): a view; with another element
    size the last dim scales by the ratio. Not differentiable, as torch's."""


def _permute_rule(ctx, g):
    dims = ctx.attrs["axes"]
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d] = i
    return permute(g, inverse)


def _permute(input, *dims):
    dims = shape_args(dims)
    n = input.ndim
    if len(dims) != n:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the length "
            f"of the desired ordering of dimensions i.e. input.dim() = {n} is not equal to len(dims) = {len(dims)}"
        )
    dims = tuple(_wrap_dim(d, n) for d in dims)
    if len(set(dims)) != n:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return call_op1("permute", input, {"axes": dims})


@op(primitive="permute", front=written_out(_permute), derivative=_permute_rule, view=True, exposed=_EVERYWHERE,
    jvp=linear("permute"))
def permute(input, *, axes):
    """The dims of ``input`` reordered (a view)."""


def _expand(input, *sizes):
    sizes = shape_args(sizes)
    shape = input._data.shape
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
    expanded = tuple(target)
    if expanded == shape:
        return input
    return call_op1("expand", input, {"shape": expanded})


@op(primitive="broadcast_to", front=written_out(_expand), derivative=lambda ctx, g: sum_to(g, ctx.meta[0][0]),
    view=True, exposed=("Tensor",), jvp=linear("expand"))
def expand(input, *, shape):
    """A broadcast view of ``input`` at a larger shape (-1 keeps a size)."""


@public("plugtorch", "Tensor")
def broadcast_to(input, shape):
    """``input`` expanded to ``shape``."""
    return expand(input, tuple(shape))


@public("Tensor")
def expand_as(input, other):
    return expand(input, other.shape)


@public("Tensor")
def view_as(input, other):
    return view(input, other.shape)


@public("Tensor")
def reshape_as(input, other):
    return reshape(input, other.shape)


public("plugtorch")(broadcast_shapes)


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
    out = reduce_sum(g, tuple(axes), keepdim=True) if axes else g
    return reshape(out, tuple(shape))


# -- views built on those ------------------------------------------------------------

def _as_input(ctx, g):
    """The rule of the views that only reshape: the gradient takes the input's shape back."""
    return reshape(g, ctx.meta[0][0])


def _transpose_rule(ctx, g):
    return transpose(g, ctx.attrs["dim0"], ctx.attrs["dim1"])


@op(view=True, exposed=_EVERYWHERE, aliases=("swapaxes", "swapdims"), derivative=_transpose_rule,
    jvp=linear("transpose"))
def transpose(input, dim0, dim1):
    """Swap two dims (a view)."""
    n = input.ndim
    if n == 0:
        return input
    d0, d1 = _wrap_dim(dim0, n), _wrap_dim(dim1, n)
    dims = list(range(n))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(input, dims)


@op(view=True, exposed=_EVERYWHERE, derivative=lambda ctx, g: t(g), jvp=linear("t"))
def t(input):
    """Transpose a tensor of at most 2 dims."""
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return transpose(input, 0, 1) if input.ndim == 2 else input


@op(view=True, exposed=_EVERYWHERE, derivative=_as_input, jvp=linear("squeeze"))
def squeeze(input, dim=None):
    """Remove size-1 dims (all, or those in dim)."""
    shape = input._data.shape
    if dim is None:
        new = tuple(s for s in shape if s != 1)
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        wrapped = {_wrap_dim(d, len(shape)) for d in dims}
        new = tuple(s for i, s in enumerate(shape) if not (i in wrapped and s == 1))
    return reshape(input, new)


@op(view=True, exposed=_EVERYWHERE, derivative=_as_input, jvp=linear("unsqueeze"))
def unsqueeze(input, dim):
    """Insert a size-1 dim at dim."""
    shape = input._data.shape
    d = _wrap_dim(dim, len(shape) + 1)
    return reshape(input, shape[:d] + (1,) + shape[d:])


@op(view=True, exposed=_EVERYWHERE, jvp=linear("flatten"))
def flatten(input, start_dim=0, end_dim=-1):
    """Merge dims start_dim..end_dim into one."""
    shape = input._data.shape
    if not shape:
        return reshape(input, (1,))
    s, e = _wrap_dim(start_dim, len(shape)), _wrap_dim(end_dim, len(shape))
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    n = 1
    for v in shape[s:e + 1]:
        n *= v
    return reshape(input, shape[:s] + (n,) + shape[e + 1:])


@op(view=True, exposed=_EVERYWHERE, jvp=linear("unflatten"))
def unflatten(input, dim, sizes):
    """Split dim into the given sizes."""
    shape = input._data.shape
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
    return reshape(input, shape[:d] + sizes + shape[d + 1:])


# -- copies ----------------------------------------------------------------------------

@op(primitive="copy", derivative=lambda ctx, g: g, exposed=_EVERYWHERE, jvp=linear("clone"))
def clone(input):
    """A copy that owns its memory."""


def _contiguous(input):
    out = call_op1("contiguous", input)
    return input if out._data is input._data else out


# contiguous's public function is written out: it answers the input itself where the kernel
# did (the memory is contiguous already), which a bind, returning before the kernel, cannot.
@op(primitive="contiguous", front=written_out(_contiguous), derivative=lambda ctx, g: g, exposed=("Tensor",),
    jvp=linear("contiguous"))
def contiguous(input):
    """``input`` itself if its memory is already contiguous, else a contiguous copy."""


# -- joining ---------------------------------------------------------------------------

def _cat_rule(ctx, g):
    dim = ctx.attrs["dim"]
    grads, start = [], 0
    for meta in ctx.meta:
        size = meta[0][dim]
        grads.append(g[(slice(None),) * dim + (slice(start, start + size),)])
        start += size
    return tuple(grads)


def _lower_cat(backend, arrays, *, dim):
    return backend.primitives["concatenate"](arrays, dim)


def _cat_args(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"cat(): expected a sequence of Tensors, but element {i} is "
                            f"{type(t).__name__}")
        if t.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated; "
                               "use stack, or unsqueeze it first")
    # torch skips legacy 1-D empty tensors when concatenating
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
    return tuple(t if t.dtype is dt else cast(t, dt) for t in nonempty), {"dim": d}


@op(lower=_lower_cat, bind=_cat_args, derivative=_cat_rule, variadic=True, exposed=("plugtorch",),
    aliases=("concat", "concatenate"), jvp=linear("cat"))
def cat(tensors, *, dim):
    """Join tensors of one number of dims along an existing dim (dtypes promote as torch's)."""


concat = concatenate = cat


def _stack_rule(ctx, g):
    d = ctx.attrs["dim"] % g.ndim
    return tuple(g[(slice(None),) * d + (i,)] for i in range(len(ctx.meta)))


@op(variadic=True, exposed=("plugtorch",), derivative=_stack_rule, jvp=linear("stack"))
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


__all__ = ["reshape", "view", "view_dtype", "stride", "is_contiguous", "permute", "expand", "broadcast_to",
           "expand_as", "view_as", "reshape_as", "broadcast_shapes", "sum_to", "transpose", "t", "squeeze", "unsqueeze",
           "flatten", "unflatten", "clone", "contiguous", "cat", "concat", "concatenate", "stack"]
