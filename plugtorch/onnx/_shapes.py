"""ONNX for sizes, reshapes, transposes, joins, splits and indexing.

Sizes are constants unless a dynamic axis changes them; then they are ONNX values (``Shape``,
``Gather``) and the reshapes and slices that use them take them as inputs.
"""
from __future__ import annotations

from typing import Any

import plugtorch

from ._builder import INT64_MAX, V
from ._functions import arg, converts, dims_arg, int_list, operand, unmapped


# -- shapes and movement ---------------------------------------------------------------------------
@converts("size")
def _size(cx: Any, args: tuple, kwargs: dict) -> Any:
    x, dim = args[0], arg(args, kwargs, 1, "dim")
    if not cx.varies():  # a size no dynamic axis changes is a constant, as torch folds it
        return cx.ex
    shape = cx.b.op("Shape", [x], tuple(x.shape), "shape")
    if dim is None:
        return shape
    d = dim % x.ndim
    return cx.b.op("Gather", [shape, cx.b.const(d, plugtorch.int64)], x.shape[d], "size", axis=0)


@converts("getattr")
def _getattr(cx: Any, args: tuple, kwargs: dict) -> Any:
    x, name = args
    if name == "shape" and isinstance(x, V):
        return _size(cx, (x,), {})
    if name in ("ndim", "dtype", "device", "is_cuda", "requires_grad") or not isinstance(x, V):
        return cx.ex
    if name == "T" and x.ndim == 2:
        return cx.b.op("Transpose", [x], cx.ex, perm=[1, 0])
    raise unmapped(cx, f"reading attribute {name!r}")


@converts("dim", "ndimension")
def _dim(cx: Any, args: tuple, kwargs: dict) -> Any:
    return cx.ex


@converts("view", "reshape")
def _reshape(cx: Any, args: tuple, kwargs: dict) -> V:
    x, shape = args[0], dims_arg(args, kwargs, 1, "shape")
    if len(shape) == 1 and isinstance(shape[0], V) and shape[0].ndim == 1:
        return cx.b.op("Reshape", [x, shape[0]], cx.ex)
    # a 0 in ONNX's shape copies the input's dim unless allowzero says it is a size
    allowzero = 1 if any(not isinstance(d, V) and d == 0 for d in shape) else None
    return cx.b.op("Reshape", [x, cx.b.ints(shape)], cx.ex, allowzero=allowzero)


@converts("flatten")
def _flatten(cx: Any, args: tuple, kwargs: dict) -> V:
    x = args[0]
    start = arg(args, kwargs, 1, "start_dim", 0) % max(x.ndim, 1)
    end = arg(args, kwargs, 2, "end_dim", -1) % max(x.ndim, 1)
    # 0 copies the input's dim, so the leading dims stay symbolic; the trailing ones are the example's
    if cx.dynamic_dims(x) & set(range(end + 1, x.ndim)):
        raise unmapped(cx, "keeping a dim that dynamic_axes makes symbolic after the flattened ones")
    shape = [0] * start + [-1] + list(x.shape[end + 1:])
    return cx.b.op("Reshape", [x, cx.b.ints(shape)], cx.ex)


@converts("transpose", "swapaxes")
def _transpose(cx: Any, args: tuple, kwargs: dict) -> V:
    x = args[0]
    d0, d1 = arg(args, kwargs, 1, "dim0") % x.ndim, arg(args, kwargs, 2, "dim1") % x.ndim
    perm = list(range(x.ndim))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return cx.b.op("Transpose", [x], cx.ex, perm=perm)


@converts("t")
def _t(cx: Any, args: tuple, kwargs: dict) -> V:
    x = args[0]
    return x if x.ndim < 2 else cx.b.op("Transpose", [x], cx.ex, perm=[1, 0])


@converts("permute")
def _permute(cx: Any, args: tuple, kwargs: dict) -> V:
    x = args[0]
    return cx.b.op("Transpose", [x], cx.ex, perm=[int(d) % x.ndim for d in dims_arg(args, kwargs, 1, "dims")])


@converts("expand")
def _expand(cx: Any, args: tuple, kwargs: dict) -> V:
    # Expand broadcasts both ways, so torch's -1 ("keep this dim") is a 1, symbolic dims included
    sizes = [1 if not isinstance(d, V) and d == -1 else d for d in dims_arg(args, kwargs, 1, "size")]
    return cx.b.op("Expand", [args[0], cx.b.ints(sizes)], cx.ex)


@converts("unsqueeze")
def _unsqueeze(cx: Any, args: tuple, kwargs: dict) -> V:
    return cx.b.op("Unsqueeze", [args[0], cx.b.const([int(arg(args, kwargs, 1, "dim"))], plugtorch.int64)], cx.ex)


@converts("squeeze")
def _squeeze(cx: Any, args: tuple, kwargs: dict) -> V:
    x, dim = args[0], arg(args, kwargs, 1, "dim")
    dims = list(range(x.ndim)) if dim is None else int_list(dim, 1)
    dims = [d % x.ndim for d in dims if x.shape[d] == 1]
    if set(dims) & cx.dynamic_dims(x):  # whether it is dropped depends on the size: no one graph does both
        raise unmapped(cx, f"of dims {sorted(set(dims) & cx.dynamic_dims(x))}, which dynamic_axes makes symbolic and "
                       "the example has at 1: export with an example longer than 1 there")
    return cx.b.squeeze(x, dims, cx.ex) if dims else x


@converts("cat", "concat", "concatenate")
def _cat(cx: Any, args: tuple, kwargs: dict) -> V:
    tensors, dim = arg(args, kwargs, 0, "tensors"), arg(args, kwargs, 1, "dim", 0)
    tensors = [t for t in tensors if not (isinstance(t, V) and t.shape == (0,))]  # torch skips 1-D empties
    return cx.b.op("Concat", [operand(cx, t, cx.ex.dtype) for t in tensors], cx.ex, axis=int(dim))


@converts("stack")
def _stack(cx: Any, args: tuple, kwargs: dict) -> V:
    tensors, dim = arg(args, kwargs, 0, "tensors"), int(arg(args, kwargs, 1, "dim", 0))
    return cx.b.op("Concat", [cx.b.unsqueeze(t, [dim]) for t in tensors], cx.ex, axis=dim)


@converts("split", "chunk", "tensor_split", "unbind")
def _split(cx: Any, args: tuple, kwargs: dict) -> tuple:
    x = args[0]
    dim = arg(args, kwargs, 1 if cx.op_name == "unbind" else 2, "dim", 0) % x.ndim
    pieces = list(cx.ex)
    sizes = [int(p.shape[dim]) if cx.op_name != "unbind" else 1 for p in pieces]
    if dim in cx.dynamic_dims(x):
        raise unmapped(cx, f"along dim {dim}, which dynamic_axes makes symbolic")
    outs = cx.b.op_n("Split", [x, cx.b.const(sizes, plugtorch.int64)],
                     [p.unsqueeze(dim) if cx.op_name == "unbind" else p for p in pieces], cx.op_name, axis=dim)
    if cx.op_name == "unbind":
        outs = [cx.b.squeeze(o, [dim], p) for o, p in zip(outs, pieces)]
    return tuple(outs)


@converts("getitem")
def _getitem(cx: Any, args: tuple, kwargs: dict) -> Any:
    x, index = args
    if not isinstance(x, V):
        return x[index]  # a tuple of values (split's pieces, an RNN's outputs)
    b = cx.b
    if x.ndim == 1 and not isinstance(x.ex, plugtorch.Tensor) and isinstance(index, int):  # x.shape[i]
        return b.op("Gather", [x, b.const(index % x.shape[0], plugtorch.int64)], cx.ex, "size", axis=0)
    index = index if isinstance(index, tuple) else (index,)
    if any(isinstance(i, (V, plugtorch.Tensor, list)) for i in index):
        raise unmapped(cx, "with a tensor or list index (advanced indexing)")
    n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
    expanded: list[Any] = []
    for i in index:
        expanded += [slice(None)] * (x.ndim - n_real) if i is Ellipsis else [i]
    starts, ends, axes, steps, squeeze, unsqueeze = [], [], [], [], [], []
    dim = out_dim = 0
    for i in expanded:
        if i is None:
            unsqueeze.append(out_dim)  # Unsqueeze's axes count the dims of its output
            out_dim += 1
            continue
        if isinstance(i, int):
            starts.append(i)
            ends.append(i + 1 if i != -1 else INT64_MAX)
            axes.append(dim)
            steps.append(1)
            squeeze.append(dim)
        elif isinstance(i, slice):
            out_dim += 1
            if i != slice(None):
                if i.step is not None and not isinstance(i.step, V) and i.step <= 0:
                    raise unmapped(cx, "with a slice step that is not positive")
                starts.append(0 if i.start is None else i.start)
                ends.append(INT64_MAX if i.stop is None else i.stop)
                axes.append(dim)
                steps.append(1 if i.step is None else i.step)
        else:
            raise unmapped(cx, f"with an index of type {type(i).__name__}")
        dim += 1
    out = x
    if axes:
        sliced_ex = cx.ex  # the intermediate's exact shape does not matter to what follows
        out = b.op("Slice", [x, b.ints(starts), b.ints(ends), b.ints(axes), b.ints(steps)], sliced_ex)
    if squeeze:
        out = b.squeeze(out, squeeze, cx.ex)
    if unsqueeze:
        out = b.op("Unsqueeze", [out, b.const(unsqueeze, plugtorch.int64)], cx.ex)
    return out
