"""torch's names for the graph nodes of plugtorch's ops (``grad_fn=<NllLossBackward0>``), and
a class of that name per node kind, as torch has: ``type(t.grad_fn).__name__`` is
``"MmBackward0"``, which graph visualisers and user code dispatch on.

By default a node is named after its op in torch's style (``log_softmax`` ->
``LogSoftmaxBackward0``). Where torch's node has another name — it records the aten op
the call lowered to (``cross_entropy`` ends in ``nll_loss``), or numbers overloads
(``sum()`` vs ``sum(dim)``) — the table below gives it, read off the node's attrs and
operand metadata (``meta``: per operand, (shape, dtype) or None for a number).
"""
from __future__ import annotations

from typing import Any, Callable

from .graph import Node


def _camel(name: str) -> str:
    # a custom op ``mylib::swish`` -> ``MylibSwish``
    return "".join(part[:1].upper() + part[1:] for part in name.replace("::", "_").split("_"))


def _pow(meta, attrs) -> str:  # pow(Tensor, Scalar) is overload 0, pow(Tensor, Tensor) overload 1
    return "PowBackward1" if meta[1] is not None else "PowBackward0"


def _reduction(base: str) -> Callable[[Any, Any], str]:
    # sum() / mean() are overload 0; with a dim, overload 1
    return lambda meta, attrs: f"{base}Backward{0 if attrs.get('axes') is None else 1}"


def _extreme(whole: str, camel: str) -> Callable[[Any, Any], str]:
    # x.max() is torch's max overload 1; amax(x, dim) keeps its own name
    return lambda meta, attrs: whole if attrs.get("axes") is None else f"{camel}Backward0"


def _matmul(meta, attrs) -> str:
    if len(meta[0][0]) == 2 and len(meta[1][0]) == 2:
        return "MmBackward0"
    return "UnsafeViewBackward0"  # torch folds batched products into bmm and views back


def _getitem(meta, attrs) -> str:
    index = attrs.get("index", ())
    if any(hasattr(k, "dtype") for k in index):
        return "IndexBackward0"
    if any(isinstance(k, int) for k in index):
        return "SelectBackward0"
    return "SliceBackward0"


def _scatter(meta, attrs) -> str:  # scatter(value=) is overload 1
    return "ScatterBackward1" if meta[2] is None else "ScatterBackward0"


def _squeeze(meta, attrs) -> str:  # squeeze(), squeeze(dim), squeeze(dims) are overloads 0, 1, 2
    dim = attrs.get("dim")
    return f"SqueezeBackward{0 if dim is None else 2 if isinstance(dim, (tuple, list)) else 1}"


def _by_operand(base: str, position: int) -> Callable[[Any, Any], str]:
    """Overload 0 when operand ``position`` is a number (or absent), 1 when it is a tensor."""
    return lambda meta, attrs: f"{base}Backward{0 if meta[position] is None else 1}"


def _clamp(meta, attrs) -> str:  # clamp(Scalar?, Scalar?) is overload 1, clamp(Tensor?, Tensor?) 0
    return "ClampBackward0" if any(m is not None for m in meta[1:]) else "ClampBackward1"


NAMES: dict[str, str | Callable[[Any, Any], str]] = {
    "squeeze": _squeeze,
    "clamp": _clamp,
    "lerp": _by_operand("Lerp", 2),
    "square": "PowBackward0",
    "pow": _pow,
    "sum": _reduction("Sum"),
    "mean": _reduction("Mean"),
    "amax": _extreme("MaxBackward1", "Amax"),
    "amin": _extreme("MinBackward1", "Amin"),
    "matmul": _matmul,
    "reshape": "ViewBackward0",
    "getitem": _getitem,
    "cast": "ToCopyBackward0",
    "move": "ToCopyBackward0",
    "log1p": "Log1PBackward0",
    "pad": "ConstantPadNdBackward0",
    "cross_entropy": "NllLossBackward0",
    "scatter": _scatter,
    "norm": "LinalgVectorNormBackward0",
    "conv2d": "ConvolutionBackward0",
    "max_pool2d": "MaxPool2DWithIndicesBackward0",
    "avg_pool2d": "AvgPool2DBackward0",
    "layer_norm": "NativeLayerNormBackward0",
    "batch_norm": "NativeBatchNormBackward0",
    "group_norm": "NativeGroupNormBackward0",
    "unique": "Unique2Backward0",
    "index_put": "IndexPutBackward0",
    "index_fill": "IndexPutBackward0",
}


_CLASSES: dict[str, type] = {}


def named_class(name: str) -> type:
    """The node class called ``name``: a ``Node`` that adds no fields (so the engine's C loop runs
    it as a ``Node``), made once per name."""
    cls = _CLASSES.get(name)
    if cls is None:
        cls = _CLASSES[name] = type(name, (Node,), {"__slots__": (), "__module__": "plugtorch.core.graph",
                                                    "__doc__": f"The graph node torch calls {name}."})
    return cls


def node_class(op: str) -> type | None:
    """The class of every node of ``op`` where its name is the op's alone; None where it depends on
    the call (``class_for`` then reads it off the operands and attrs)."""
    named = NAMES.get(op)
    if callable(named):
        return None
    return named_class(named or _camel(op) + "Backward0")


def class_for(op: str, meta, attrs) -> type:
    named = NAMES.get(op)
    if callable(named):
        return named_class(named(meta, attrs))
    return named_class(named or _camel(op) + "Backward0")


def torch_name(node) -> str:
    """The name torch gives the node of the op ``node.op`` (with ``Backward0``-style suffix)."""
    return class_for(node.op, node.meta, node.attrs).__name__
