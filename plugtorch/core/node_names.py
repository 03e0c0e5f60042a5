"""torch's names for the graph nodes of plugtorch's ops (``grad_fn=<NllLossBackward0>``).

By default a node is named after its op in torch's style (``log_softmax`` ->
``LogSoftmaxBackward0``). Where torch's node has another name — it records the aten op
the call lowered to (``cross_entropy`` ends in ``nll_loss``), or numbers overloads
(``sum()`` vs ``sum(dim)``) — the table below gives it, read off the node's attrs and
operand metadata. Users and doctests read these names in reprs.
"""
from __future__ import annotations

from typing import Any, Callable


def _camel(name: str) -> str:
    # a custom op ``mylib::swish`` -> ``MylibSwish``
    return "".join(part[:1].upper() + part[1:] for part in name.replace("::", "_").split("_"))


def _pow(node) -> str:  # pow(Tensor, Scalar) is overload 0, pow(Tensor, Tensor) overload 1
    return "PowBackward1" if node.meta[1] is not None else "PowBackward0"


def _reduction(base: str) -> Callable[[Any], str]:
    # sum() / mean() are overload 0; with a dim, overload 1
    return lambda node: f"{base}Backward{0 if node.attrs.get('axes') is None else 1}"


def _extreme(whole: str, camel: str) -> Callable[[Any], str]:
    # x.max() is torch's max overload 1; amax(x, dim) keeps its own name
    return lambda node: whole if node.attrs.get("axes") is None else f"{camel}Backward0"


def _matmul(node) -> str:
    shapes = [m[0] for m in node.meta]
    if all(len(s) == 2 for s in shapes):
        return "MmBackward0"
    return "UnsafeViewBackward0"  # torch folds batched products into bmm and views back


def _getitem(node) -> str:
    index = node.attrs.get("index", ())
    if any(hasattr(k, "dtype") for k in index):
        return "IndexBackward0"
    if any(isinstance(k, int) for k in index):
        return "SelectBackward0"
    return "SliceBackward0"


def _scatter(node) -> str:  # scatter(value=) is overload 1
    return "ScatterBackward1" if node.meta[2] is None else "ScatterBackward0"


def _squeeze(node) -> str:  # squeeze(), squeeze(dim), squeeze(dims) are overloads 0, 1, 2
    dim = node.attrs.get("dim")
    return f"SqueezeBackward{0 if dim is None else 2 if isinstance(dim, (tuple, list)) else 1}"


def _by_operand(base: str, position: int) -> Callable[[Any], str]:
    """Overload 0 when operand ``position`` is a number (or absent), 1 when it is a tensor."""
    return lambda node: f"{base}Backward{0 if node.meta[position] is None else 1}"


def _clamp(node) -> str:  # clamp(Scalar?, Scalar?) is overload 1, clamp(Tensor?, Tensor?) 0
    return "ClampBackward0" if any(m is not None for m in node.meta[1:]) else "ClampBackward1"


NAMES: dict[str, str | Callable[[Any], str]] = {
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


def torch_name(node) -> str:
    """The name torch gives the node of the op ``node.name`` (with ``Backward0``-style suffix)."""
    named = NAMES.get(node.name)
    if named is None:
        return _camel(node.name) + "Backward0"
    return named if isinstance(named, str) else named(node)
