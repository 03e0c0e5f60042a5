"""ONNX for the functions and Tensor methods a traced graph calls, one converter per name.

A converter is ``fn(cx, args, kwargs)``: the node's arguments with traced values as :class:`V`,
and ``cx`` the export in progress (``cx.b`` the graph builder, ``cx.ex`` the node's value on the
example inputs, ``cx.dynamic_dims(v)`` the dims of ``v`` that ``dynamic_axes`` changes). Function
and method forms share a converter where torch's positions agree (``x.view(...)``, ``x.add(y)``).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

import plugtorch

from ._builder import OnnxExporterError, V, scalar_dtype

CONVERTERS: dict[str, Callable[..., Any]] = {}


def converts(*names: str) -> Callable:
    def deco(fn: Callable) -> Callable:
        for n in names:
            CONVERTERS[n] = fn
        return fn
    return deco


def arg(args: tuple, kwargs: dict, i: int, name: str, default: Any = None) -> Any:
    """Argument ``name`` passed at position ``i`` or by keyword."""
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def dims_arg(args: tuple, kwargs: dict, start: int, name: str) -> list[Any]:
    """``*dims`` or one sequence of them (``view(2, 3)``, ``view((2, 3))``, ``permute(dims=...)``)."""
    rest = list(args[start:]) or kwargs.get(name, [])
    if len(rest) == 1 and isinstance(rest[0], (tuple, list)):
        rest = list(rest[0])
    if isinstance(rest, V):  # x.view(shape) with the shape a traced vector
        return [rest]
    return list(rest)


def unmapped(cx: Any, what: str) -> OnnxExporterError:
    return cx.unmapped(what)


# -- elementwise ---------------------------------------------------------------------------------
_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
          "neg": "Neg", "abs": "Abs", "erf": "Erf", "sin": "Sin", "cos": "Cos", "reciprocal": "Reciprocal",
          "floor": "Floor", "ceil": "Ceil", "logical_not": "Not"}


def _unary(onnx_op: str) -> Callable:
    def convert(cx: Any, args: tuple, kwargs: dict) -> V:
        return cx.b.op(onnx_op, [args[0]], cx.ex)
    return convert


for _name, _onnx in _UNARY.items():
    converts(_name)(_unary(_onnx))


@converts("rsqrt")
def _rsqrt(cx: Any, args: tuple, kwargs: dict) -> V:
    return cx.b.op("Reciprocal", [cx.b.op("Sqrt", [args[0]], cx.ex)], cx.ex)


@converts("invert", "bitwise_not")
def _invert(cx: Any, args: tuple, kwargs: dict) -> V:
    if args[0].dtype != plugtorch.bool:
        raise unmapped(cx, f"on {args[0].dtype} (only bool, which is Not)")
    return cx.b.op("Not", [args[0]], cx.ex)


@converts("log1p")
def _log1p(cx: Any, args: tuple, kwargs: dict) -> V:
    x = args[0]
    return cx.b.op("Log", [cx.b.op("Add", [x, cx.b.const(1.0, x.dtype)], x.ex)], cx.ex)


@converts("silu")
def _silu(cx: Any, args: tuple, kwargs: dict) -> V:
    return cx.b.op("Mul", [args[0], cx.b.op("Sigmoid", [args[0]], cx.ex)], cx.ex)


@converts("leaky_relu")
def _leaky_relu(cx: Any, args: tuple, kwargs: dict) -> V:
    return cx.b.op("LeakyRelu", [args[0]], cx.ex, alpha=float(arg(args, kwargs, 1, "negative_slope", 0.01)))


def _clip(cx: Any, x: V, lo: Any, hi: Any) -> V:
    dt, x = cx.ex.dtype, cx.b.cast(x, cx.ex.dtype)
    if isinstance(lo, V) or isinstance(hi, V):  # Clip's bounds are scalars; tensor bounds broadcast
        x = x if lo is None else cx.b.op("Max", [x, operand(cx, lo, dt)], cx.ex)
        return x if hi is None else cx.b.op("Min", [x, operand(cx, hi, dt)], cx.ex)
    bounds = [None if v is None else operand(cx, v, dt) for v in (lo, hi)]
    return cx.b.op("Clip", [x, *bounds], cx.ex)


@converts("clamp", "clip")
def _clamp(cx: Any, args: tuple, kwargs: dict) -> V:
    return _clip(cx, args[0], arg(args, kwargs, 1, "min"), arg(args, kwargs, 2, "max"))


@converts("hardtanh")
def _hardtanh(cx: Any, args: tuple, kwargs: dict) -> V:
    return _clip(cx, args[0], float(arg(args, kwargs, 1, "min_val", -1.0)), float(arg(args, kwargs, 2, "max_val", 1.0)))


@converts("relu6")
def _relu6(cx: Any, args: tuple, kwargs: dict) -> V:
    return _clip(cx, args[0], 0.0, 6.0)


@converts("elu")
def _elu(cx: Any, args: tuple, kwargs: dict) -> V:
    return cx.b.op("Elu", [args[0]], cx.ex, alpha=float(arg(args, kwargs, 1, "alpha", 1.0)))


@converts("gelu")
def _gelu(cx: Any, args: tuple, kwargs: dict) -> V:
    x, approximate = args[0], arg(args, kwargs, 1, "approximate", "none")
    if cx.b.opset >= 20:
        return cx.b.op("Gelu", [x], cx.ex, approximate=approximate)
    b, dt = cx.b, x.dtype
    if approximate == "tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        inner = b.op("Mul", [b.const(math.sqrt(2 / math.pi), dt),
                             b.op("Add", [x, b.op("Mul", [b.const(0.044715, dt), b.op("Mul", [x, b.op(
                                 "Mul", [x, x], x.ex)], x.ex)], x.ex)], x.ex)], x.ex)
        t = b.op("Tanh", [inner], x.ex)
    else:  # 0.5 x (1 + erf(x / sqrt 2))
        t = b.op("Erf", [b.op("Div", [x, b.const(math.sqrt(2.0), dt)], x.ex)], x.ex)
    return b.op("Mul", [b.op("Mul", [x, b.const(0.5, dt)], x.ex), b.op("Add", [t, b.const(1.0, dt)], x.ex)], cx.ex)


def operand(cx: Any, v: Any, dtype: Any) -> V:
    """A binary op's operand as an ONNX value of ``dtype``: numbers become constants."""
    if isinstance(v, V):
        return cx.b.cast(v, dtype)
    if isinstance(v, plugtorch.Tensor):
        return cx.tensor_constant(v, dtype)
    if isinstance(v, (bool, int, float)):
        return cx.b.const(v, dtype)
    raise unmapped(cx, f"with an operand of type {type(v).__name__}")


def _result_dtype(cx: Any) -> Any:
    ex = cx.ex
    return ex.dtype if isinstance(ex, plugtorch.Tensor) else scalar_dtype(ex)


_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "truediv": "Div", "div": "Div", "pow": "Pow",
           "matmul": "MatMul", "mm": "MatMul", "bmm": "MatMul", "floordiv": "Div",
           "maximum": "Max", "minimum": "Min"}


def _binary(onnx_op: str, swap: bool = False) -> Callable:
    def convert(cx: Any, args: tuple, kwargs: dict) -> Any:
        a, c = args[0], arg(args, kwargs, 1, "other")
        if swap:
            a, c = c, a
        if not isinstance(a, V) and not isinstance(c, V):
            return cx.ex  # sizes without dynamic axes: plain Python arithmetic, already done
        dtype = _result_dtype(cx)
        if cx.op_name == "floordiv" and dtype.is_floating_point:
            raise unmapped(cx, "on floating values")
        if cx.op_name == "div" and kwargs.get("rounding_mode") is not None:
            raise unmapped(cx, f"with rounding_mode={kwargs['rounding_mode']!r}")
        if onnx_op == "Pow" and isinstance(c, (int, float)) and isinstance(a, V):
            return cx.b.op("Pow", [cx.b.cast(a, dtype), cx.b.const(c, dtype)], cx.ex)
        alpha = kwargs.get("alpha", 1)
        c_v = operand(cx, c, dtype)
        if alpha != 1:
            c_v = cx.b.op("Mul", [c_v, cx.b.const(alpha, dtype)], c_v.ex)
        return cx.b.op(onnx_op, [operand(cx, a, dtype), c_v], cx.ex)
    return convert


for _name, _onnx in _BINARY.items():
    converts(_name)(_binary(_onnx))
converts("rsub")(_binary("Sub", swap=True))

_COMPARE = {"eq": ("Equal", False), "ne": ("Equal", True), "lt": ("Less", False), "gt": ("Greater", False),
            "le": ("LessOrEqual", False), "ge": ("GreaterOrEqual", False)}


def _compare(onnx_op: str, negate: bool) -> Callable:
    def convert(cx: Any, args: tuple, kwargs: dict) -> V:
        a, c = args[0], arg(args, kwargs, 1, "other")
        tensors = [v for v in (a, c) if isinstance(v, V)]
        floats = [v.dtype for v in tensors if v.dtype.is_floating_point]
        dtype = floats[0] if floats else (plugtorch.float32 if any(isinstance(v, float) for v in (a, c))
                                          else tensors[0].dtype)
        out = cx.b.op(onnx_op, [operand(cx, a, dtype), operand(cx, c, dtype)], cx.ex)
        return cx.b.op("Not", [out], cx.ex) if negate else out
    return convert


for _name, (_onnx, _neg) in _COMPARE.items():
    converts(_name)(_compare(_onnx, _neg))


@converts("where")
def _where(cx: Any, args: tuple, kwargs: dict) -> V:
    cond, x, y = args[0], arg(args, kwargs, 1, "input"), arg(args, kwargs, 2, "other")
    if x is None:
        raise unmapped(cx, "with one argument (the nonzero form)")
    dtype = cx.ex.dtype
    return cx.b.op("Where", [cx.b.cast(cond, plugtorch.bool), operand(cx, x, dtype), operand(cx, y, dtype)], cx.ex)


@converts("masked_fill")
def _masked_fill(cx: Any, args: tuple, kwargs: dict) -> V:
    x, mask, value = args[0], arg(args, kwargs, 1, "mask"), arg(args, kwargs, 2, "value")
    return cx.b.op("Where", [cx.b.cast(mask, plugtorch.bool), operand(cx, value, x.dtype), x], cx.ex)


# -- no-ops and casts in an eval-mode graph -------------------------------------------------------
@converts("contiguous", "clone", "detach")
def _identity(cx: Any, args: tuple, kwargs: dict) -> V:
    return args[0]


@converts("dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d", "dropout3d")
def _dropout(cx: Any, args: tuple, kwargs: dict) -> V:
    p = arg(args, kwargs, 1, "p", 0.5)
    if arg(args, kwargs, 2, "training", kwargs.get("train", True)) and p:
        raise unmapped(cx, "with training=True (random in every mode): pass training=self.training, as "
                        "nn.Dropout does")
    return args[0]


def _to_dtype(cx: Any, args: tuple, kwargs: dict) -> V:
    return cx.b.cast(args[0], cx.ex.dtype)


for _name in ("to", "float", "double", "half", "long", "int", "bool", "type_as", "type"):
    converts(_name)(_to_dtype)


# -- linear algebra and convolution --------------------------------------------------------------
@converts("linear")
def _linear(cx: Any, args: tuple, kwargs: dict) -> V:
    x, w, bias = args[0], arg(args, kwargs, 1, "weight"), arg(args, kwargs, 2, "bias")
    if x.ndim == 2 and w.ndim == 2:
        return cx.b.op("Gemm", [x, w, bias], cx.ex, transB=1)
    wt = cx.b.op("Transpose", [w], w.ex.t(), "weight_t", perm=[1, 0]) if w.ndim == 2 else w
    out = cx.b.op("MatMul", [x, wt], cx.ex)
    return out if bias is None else cx.b.op("Add", [out, bias], cx.ex)


@converts("addmm")
def _addmm(cx: Any, args: tuple, kwargs: dict) -> V:
    bias, m1, m2 = args[0], arg(args, kwargs, 1, "mat1"), arg(args, kwargs, 2, "mat2")
    return cx.b.op("Gemm", [m1, m2, operand(cx, bias, cx.ex.dtype)], cx.ex,
                   alpha=float(kwargs.get("alpha", 1)), beta=float(kwargs.get("beta", 1)))


def int_list(v: Any, n: int) -> list[int]:
    """``v`` as ``n`` ints where torch takes one int for all dims (``stride=2``), else its ints."""
    return [int(i) for i in v] if isinstance(v, (tuple, list)) else [int(v)] * n


def conv(cx: Any, x: V, w: V, bias: V | None, stride: Any, padding: Any, dilation: Any, groups: int) -> V:
    n = w.ndim - 2
    dil = int_list(dilation, n)
    if isinstance(padding, str):
        if padding == "valid":
            pads = [0] * n
        else:  # "same" (stride 1): torch puts the odd one out at the end
            total = [d * (k - 1) for d, k in zip(dil, w.shape[2:])]
            pads = [t // 2 for t in total] + [t - t // 2 for t in total]
            return cx.b.op("Conv", [x, w, bias], cx.ex, strides=int_list(stride, n), pads=pads, dilations=dil,
                           group=int(groups))
    else:
        pads = int_list(padding, n)
    return cx.b.op("Conv", [x, w, bias], cx.ex, strides=int_list(stride, n), pads=pads + pads, dilations=dil,
                   group=int(groups))


@converts("conv1d", "conv2d", "conv3d")
def _conv(cx: Any, args: tuple, kwargs: dict) -> V:
    names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
    defaults = (None, None, None, 1, 0, 1, 1)
    a = [arg(args, kwargs, i, n, d) for i, (n, d) in enumerate(zip(names, defaults))]
    return conv(cx, *a)


# -- pooling ---------------------------------------------------------------------------------------
def _pool_args(x: V, kwargs: dict, args: tuple) -> tuple[list[int], list[int], list[int]]:
    n = x.ndim - 2
    k = int_list(arg(args, kwargs, 1, "kernel_size"), n)
    s = arg(args, kwargs, 2, "stride")
    s = k if s is None or s == [] or s == () else int_list(s, n)
    p = int_list(arg(args, kwargs, 3, "padding", 0), n)
    return k, s, p + p


@converts("max_pool1d", "max_pool2d", "max_pool3d")
def _max_pool(cx: Any, args: tuple, kwargs: dict) -> V:
    x = args[0]
    if arg(args, kwargs, 6, "return_indices", False):
        raise unmapped(cx, "with return_indices=True")
    k, s, p = _pool_args(x, kwargs, args)
    d = int_list(arg(args, kwargs, 4, "dilation", 1), x.ndim - 2)
    return cx.b.op("MaxPool", [x], cx.ex, kernel_shape=k, strides=s, pads=p, dilations=d,
                   ceil_mode=int(bool(arg(args, kwargs, 5, "ceil_mode", False))))


@converts("avg_pool1d", "avg_pool2d", "avg_pool3d")
def _avg_pool(cx: Any, args: tuple, kwargs: dict) -> V:
    x = args[0]
    if arg(args, kwargs, 6, "divisor_override") is not None:
        raise unmapped(cx, "with divisor_override")
    k, s, p = _pool_args(x, kwargs, args)
    return cx.b.op("AveragePool", [x], cx.ex, kernel_shape=k, strides=s, pads=p,
                   ceil_mode=int(bool(arg(args, kwargs, 4, "ceil_mode", False))),
                   count_include_pad=int(bool(arg(args, kwargs, 5, "count_include_pad", True))))


@converts("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d")
def _adaptive_avg_pool(cx: Any, args: tuple, kwargs: dict) -> V:
    x = args[0]
    n = x.ndim - 2
    out = arg(args, kwargs, 1, "output_size")
    out = [x.shape[2 + i] if o is None else int(o) for i, o in enumerate(int_list(out, n) if not isinstance(
        out, (tuple, list)) else out)]
    if all(o == 1 for o in out):
        return cx.b.op("GlobalAveragePool", [x], cx.ex)
    size = x.shape[2:]
    if cx.dynamic_dims(x) & set(range(2, x.ndim)) or any(i % o for i, o in zip(size, out)):
        raise unmapped(cx, f"to output size {tuple(out)} from {tuple(size)}: only 1x1 outputs or sizes that divide "
                        "the input (without dynamic_axes) have an ONNX pooling")
    k = [i // o for i, o in zip(size, out)]
    return cx.b.op("AveragePool", [x], cx.ex, kernel_shape=k, strides=k)


# -- normalization and softmax ---------------------------------------------------------------------
@converts("batch_norm")
def _batch_norm(cx: Any, args: tuple, kwargs: dict) -> V:
    names = ("input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps")
    x, mean, var, w, bias, training, _, eps = [arg(args, kwargs, i, n) for i, n in enumerate(names)]
    if training or mean is None:
        raise unmapped(cx, "in training mode (batch statistics): export the model in eval mode")
    c = x.shape[1]
    w = w if w is not None else cx.b.const([1.0] * c, x.dtype)
    bias = bias if bias is not None else cx.b.const([0.0] * c, x.dtype)
    return cx.b.op("BatchNormalization", [x, w, bias, mean, var], cx.ex,
                   epsilon=float(1e-5 if eps is None else eps))


@converts("layer_norm")
def _layer_norm(cx: Any, args: tuple, kwargs: dict) -> V:
    x, shape = args[0], arg(args, kwargs, 1, "normalized_shape")
    w, bias, eps = arg(args, kwargs, 2, "weight"), arg(args, kwargs, 3, "bias"), arg(args, kwargs, 4, "eps", 1e-5)
    shape = int_list(shape, 1)
    axes = list(range(-len(shape), 0))
    b = cx.b
    if b.opset >= 17:
        w = w if w is not None else b.const(np.ones(shape).tolist(), x.dtype)  # Scale is not optional
        return b.op("LayerNormalization", [x, w, bias], cx.ex, axis=-len(shape), epsilon=float(eps))
    mean = reduce(cx, "ReduceMean", x, axes, True, x.ex)
    d = b.op("Sub", [x, mean], x.ex)
    var = reduce(cx, "ReduceMean", b.op("Mul", [d, d], x.ex), axes, True, x.ex)
    out = b.op("Div", [d, b.op("Sqrt", [b.op("Add", [var, b.const(float(eps), x.dtype)], x.ex)], x.ex)], x.ex)
    if w is not None:
        out = b.op("Mul", [out, w], x.ex)
    return out if bias is None else b.op("Add", [out, bias], cx.ex)


def _softmax(onnx_op: str) -> Callable:
    def convert(cx: Any, args: tuple, kwargs: dict) -> V:
        x, dim = args[0], arg(args, kwargs, 1, "dim")
        if dim is None:
            raise unmapped(cx, "without dim")
        x = cx.b.cast(x, cx.ex.dtype)  # dtype= casts first
        return cx.b.op(onnx_op, [x], cx.ex, axis=int(dim))
    return convert


converts("softmax", "functional_softmax")(_softmax("Softmax"))
converts("log_softmax", "functional_log_softmax")(_softmax("LogSoftmax"))


# -- reductions ------------------------------------------------------------------------------------
def reduce(cx: Any, onnx_op: str, x: V, axes: list[int] | None, keepdims: bool, ex: Any) -> V:
    b = cx.b
    if axes is None:
        return b.op(onnx_op, [x], ex, keepdims=int(keepdims))
    if onnx_op == "ReduceSum" or b.opset >= 18:  # axes an input from opset 13 (sum) / 18 (the rest)
        return b.op(onnx_op, [x, b.const(axes, plugtorch.int64)], ex, keepdims=int(keepdims))
    return b.op(onnx_op, [x], ex, axes=axes, keepdims=int(keepdims))


def _reduction(onnx_op: str) -> Callable:
    def convert(cx: Any, args: tuple, kwargs: dict) -> V:
        x = args[0]
        dim = arg(args, kwargs, 1, "dim", kwargs.get("axis"))
        keepdim = arg(args, kwargs, 2, "keepdim", kwargs.get("keepdims", False))
        x = cx.b.cast(x, cx.ex.dtype)
        axes = None if dim is None or dim == () or dim == [] else int_list(dim, 1)
        return reduce(cx, onnx_op, x, axes, bool(keepdim), cx.ex)
    return convert


converts("mean")(_reduction("ReduceMean"))
converts("sum")(_reduction("ReduceSum"))


# -- embedding and attention -----------------------------------------------------------------------
@converts("embedding")
def _embedding(cx: Any, args: tuple, kwargs: dict) -> V:
    x, w = args[0], arg(args, kwargs, 1, "weight")
    if arg(args, kwargs, 3, "max_norm") is not None:
        raise unmapped(cx, "with max_norm (it renormalizes the weight in place)")
    return cx.b.op("Gather", [w, x], cx.ex, axis=0)


@converts("scaled_dot_product_attention")
def _sdpa(cx: Any, args: tuple, kwargs: dict) -> V:
    q, k, v = args[0], arg(args, kwargs, 1, "key"), arg(args, kwargs, 2, "value")
    mask, causal = arg(args, kwargs, 3, "attn_mask"), arg(args, kwargs, 5, "is_causal", False)
    scale, gqa = arg(args, kwargs, 6, "scale"), arg(args, kwargs, 7, "enable_gqa", False)
    if gqa:
        raise unmapped(cx, "with enable_gqa=True")
    b, dt = cx.b, q.dtype
    if scale is None and q.ndim - 1 in cx.dynamic_dims(q):
        raise unmapped(cx, "without scale= on queries whose last dim dynamic_axes makes symbolic")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    perm = list(range(k.ndim))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    kt = b.op("Transpose", [k], k.ex.transpose(-2, -1), "key_t", perm=perm)
    scores_ex = q.ex @ k.ex.transpose(-2, -1)
    scores = b.op("Mul", [b.op("MatMul", [q, kt], scores_ex), b.const(scale, dt)], scores_ex)
    if causal:
        L, S = q.shape[-2], k.shape[-2]
        if cx.dynamic_dims(q) & {q.ndim - 2} or cx.dynamic_dims(k) & {k.ndim - 2}:
            raise unmapped(cx, "with is_causal=True and dynamic_axes on the sequence lengths")
        bias = plugtorch.zeros(L, S).masked_fill(plugtorch.ones(L, S).tril().logical_not(), float("-inf"))
        scores = b.op("Add", [scores, b.const(bias.numpy().tolist(), dt)], scores_ex)
    if mask is not None:
        if mask.dtype == plugtorch.bool:
            mask = b.op("Where", [mask, b.const(0.0, dt), b.const(float("-inf"), dt)], mask.ex.to(dt))
        scores = b.op("Add", [scores, mask], scores_ex)
    return b.op("MatMul", [b.op("Softmax", [scores], scores_ex, axis=-1), v], cx.ex)
