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

from collections.abc import Callable
from typing import Any

from .graph import Node

_CLASSES: dict[str, type] = {}


def named_class(name: str) -> type:
    """The node class called ``name``: a ``Node`` that adds no fields (so the engine's C loop runs
    it as a ``Node``), made once per name."""
    cls = _CLASSES.get(name)
    if cls is None:
        cls = _CLASSES[name] = type(name, (Node,), {"__slots__": (), "__module__": "plugtorch.core.graph",
                                                    "__doc__": f"The graph node torch calls {name}."})
    return cls



def _camel(name: str) -> str:
    # a custom op ``mylib::swish`` -> ``MylibSwish``
    return "".join(part[:1].upper() + part[1:] for part in name.replace("::", "_").split("_"))


# Where the name depends on the call, a namer(meta, attrs) gives the class itself: it runs for
# every such node (sum, matmul, x[...]), so the classes are made once, here.
_POW = named_class("PowBackward0"), named_class("PowBackward1")  # pow(Tensor, Scalar), pow(Tensor, Tensor)
_MM, _BATCHED_MM = named_class("MmBackward0"), named_class("UnsafeViewBackward0")
_INDEX, _SELECT, _SLICE = named_class("IndexBackward0"), named_class("SelectBackward0"), named_class("SliceBackward0")
_SCATTER = named_class("ScatterBackward0"), named_class("ScatterBackward1")  # scatter(src=), scatter(value=)
_SQUEEZE = tuple(named_class(f"SqueezeBackward{k}") for k in range(3))  # squeeze(), (dim), (dims)
_CLAMP = named_class("ClampBackward0"), named_class("ClampBackward1")  # clamp(Tensor?, ...), clamp(Scalar?, ...)


def _pow(meta, attrs) -> type:
    return _POW[meta[1] is not None]


def _reduction(base: str) -> Callable[[Any, Any], type]:
    # sum() / mean() are overload 0; with a dim, overload 1
    whole, along = named_class(f"{base}Backward0"), named_class(f"{base}Backward1")
    return lambda meta, attrs: whole if attrs.get("axes") is None else along


def _extreme(whole_name: str, camel: str) -> Callable[[Any, Any], type]:
    # x.max() is torch's max overload 1; amax(x, dim) keeps its own name
    whole, along = named_class(whole_name), named_class(f"{camel}Backward0")
    return lambda meta, attrs: whole if attrs.get("axes") is None else along


def _matmul(meta, attrs) -> type:
    # torch folds batched products into bmm and views back
    return _MM if len(meta[0][0]) == 2 and len(meta[1][0]) == 2 else _BATCHED_MM


def _getitem(meta, attrs) -> type:
    index = attrs.get("index", ())
    if any(hasattr(k, "dtype") for k in index):
        return _INDEX
    if any(isinstance(k, int) for k in index):
        return _SELECT
    return _SLICE


def _scatter(meta, attrs) -> type:
    return _SCATTER[meta[2] is None]


def _squeeze(meta, attrs) -> type:
    dim = attrs.get("dim")
    return _SQUEEZE[0 if dim is None else 2 if isinstance(dim, (tuple, list)) else 1]


def _by_operand(base: str, position: int) -> Callable[[Any, Any], type]:
    """Overload 0 when operand ``position`` is a number (or absent), 1 when it is a tensor."""
    number, tensor = named_class(f"{base}Backward0"), named_class(f"{base}Backward1")
    return lambda meta, attrs: number if meta[position] is None else tensor


def _clamp(meta, attrs) -> type:
    return _CLAMP[0] if any(m is not None for m in meta[1:]) else _CLAMP[1]


NAMES: dict[str, str | Callable[[Any, Any], type]] = {
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


def node_class(op: str) -> type | None:
    """The class of every node of ``op`` where its name is the op's alone; None where it depends on
    the call (``node_namer``)."""
    named = NAMES.get(op)
    if callable(named):
        return None
    return named_class(named or _camel(op) + "Backward0")


def node_namer(op: str) -> Callable[[Any, Any], type] | None:
    """``namer(meta, attrs) -> class`` for an op whose nodes' name depends on the call, else None."""
    named = NAMES.get(op)
    return named if callable(named) else None


def class_for(op: str, meta, attrs) -> type:
    """The class of a node of ``op`` made with these operands' ``meta`` and these ``attrs``."""
    namer = node_namer(op)
    if namer is not None:
        return namer(meta, attrs)
    cls = node_class(op)
    assert cls is not None
    return cls


def torch_name(node) -> str:
    """The name torch gives the node of the op ``node.op`` (with ``Backward0``-style suffix)."""
    return class_for(node.op, node.meta, node.attrs).__name__
