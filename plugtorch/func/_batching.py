"""Batching rules: how ``vmap`` computes an op on a whole batch at once.

A rule is ``rule(operands, bdims, attrs) -> (out, out_bdim)``. ``operands`` are the op's
operands one vmap level down (each batched one with its batch dim first: its ``bdim`` is 0;
the others have ``bdim`` None); ``attrs`` are what the op's public function bound for one
example (dims count from the example's first dim). The rule returns the op's result for the
whole batch and where its batch dim is (0, or None where the result is the same for every
example; a tuple of those for an op with several results). Rules call ops, so they nest and
differentiate like any other code.

``RULES`` is keyed by op name; :func:`register_batching_rule` adds or replaces one (a plugin's
op may bring its own). An op without a rule runs once per example and is stacked (``_vmap.loop``).
This module holds the registry, the elementwise, reduction, shape and indexing rules;
``_batching_nn.py`` those of linear algebra, layers and losses.
"""
from __future__ import annotations

from collections.abc import Callable

from ..core.dispatch import call_op

__all__ = ["RULES", "register_batching_rule"]

RULES: dict[str, Callable] = {}


def register_batching_rule(op_name: str, rule: Callable) -> None:
    """Make ``rule(operands, bdims, attrs) -> (out, out_bdim)`` how vmap computes ``op_name``."""
    if not isinstance(op_name, str) or not callable(rule):
        raise TypeError(f"register_batching_rule(op_name, rule): expected a name and a callable, got "
                        f"{type(op_name).__name__} and {type(rule).__name__}")
    RULES[op_name] = rule


def _rule(*names):
    def deco(factory):
        for name in names:
            RULES[name] = factory(name)
        return factory
    return deco


# -- helpers -------------------------------------------------------------------------------

def _size(operands, bdims) -> int:
    return next(o.shape[0] for o, b in zip(operands, bdims) if b is not None)


def _rank(o, bd) -> int:
    """The example's rank of an operand."""
    return o.dim() - (1 if bd is not None else 0)


def _align(o, bd, rank):
    """A batched operand with 1s after its batch dim up to ``rank`` example dims, so it broadcasts
    against the others as the example would."""
    r = o.dim() - 1
    if bd is None or r >= rank:
        return o
    return o.reshape((o.shape[0],) + (1,) * (rank - r) + tuple(o.shape[1:]))


def _batch(o, bd, size):
    """An operand with the batch dim first, expanded from an unbatched one where needed."""
    if bd is not None:
        return o
    return o.unsqueeze(0).expand((size,) + tuple(o.shape))


def _shift(d):
    """A dim of the example as a dim of the batch: a negative one counts from the end either way."""
    if d is None:
        return None
    if isinstance(d, (tuple, list)):
        return type(d)(_shift(x) for x in d)
    return d + 1 if d >= 0 else d


def _all_dims(o):
    return tuple(range(1, o.dim()))


def _tensors(operands, bdims):
    return [(o, b) for o, b in zip(operands, bdims) if hasattr(o, "shape")]


# -- elementwise ---------------------------------------------------------------------------

_ELEMENTWISE = (
    "abs acos acosh asin asinh atan atanh ceil cos cosh erf exp exp2 expm1 floor frac log log10 log1p log2 neg "
    "reciprocal round rsqrt sigmoid sign sin sinh sqrt square tan tanh trunc relu relu6 gelu silu mish selu celu "
    "elu leaky_relu hardtanh hardsigmoid hardswish logsigmoid softplus softsign tanhshrink isfinite isinf isnan "
    "logical_not bitwise_not cast clone contiguous add sub mul div pow maximum minimum atan2 copysign fmod "
    "remainder floor_divide hypot logaddexp logaddexp2 eq ne lt le gt ge logical_and logical_or logical_xor "
    "bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift where clamp lerp addcmul addcdiv "
    "isclose sigmoid_backward tanh_backward gelu_backward threshold_backward").split()


# derivatives whose kernels take operands of one shape, without broadcasting
_SAME_SHAPE = frozenset({"sigmoid_backward", "tanh_backward", "gelu_backward", "threshold_backward"})


@_rule("masked_fill")
def _masked_fill(name):
    def rule(operands, bdims, attrs):
        x, mask, value = operands
        if not hasattr(value, "shape") or bdims[2] is None:
            return _elementwise(name)(operands, bdims, attrs)
        # a fill value per example: where() takes it as a tensor that broadcasts
        rank = max(_rank(o, b) for o, b in zip(operands, bdims))
        return call_op("where", (_align(mask, bdims[1], rank), _align(value.to(x.dtype), 0, rank),
                                 _align(x, bdims[0], rank))), 0
    return rule


@_rule(*_ELEMENTWISE)
def _elementwise(name):
    def rule(operands, bdims, attrs):
        if name in _SAME_SHAPE:
            size = _size(operands, bdims)
            return call_op(name, tuple(_batch(o, b, size) if hasattr(o, "shape") else o
                                       for o, b in zip(operands, bdims)), attrs), 0
        rank = max(_rank(o, b) for o, b in _tensors(operands, bdims))
        return call_op(name, tuple(_align(o, b, rank) if hasattr(o, "shape") else o
                                   for o, b in zip(operands, bdims)), attrs), 0
    return rule


# -- reductions and ops along dims ---------------------------------------------------------

@_rule("sum", "mean", "amax", "amin", "prod", "var", "std", "norm", "logsumexp")
def _reduce_axes(name):
    def rule(operands, bdims, attrs):
        x = operands[0]
        axes = attrs["axes"]
        return call_op(name, (x,), {**attrs, "axes": _all_dims(x) if axes is None else _shift(axes)}), 0
    return rule


@_rule("linalg_vector_norm")
def _reduce_dim(name):
    def rule(operands, bdims, attrs):
        x = operands[0]
        dim = attrs["dim"]
        return call_op(name, (x,), {**attrs, "dim": _all_dims(x) if dim is None else _shift(dim)}), 0
    return rule


@_rule("argmax", "argmin")
def _arg_reduce(name):
    def rule(operands, bdims, attrs):
        x = operands[0]
        if attrs["axis"] is not None:
            return call_op(name, (x,), {**attrs, "axis": _shift(attrs["axis"])}), 0
        rank = x.dim() - 1
        out = call_op(name, (x.reshape(x.shape[0], -1),), {**attrs, "axis": 1, "keepdims": False})
        return (out.reshape((x.shape[0],) + (1,) * rank) if attrs["keepdims"] else out), 0
    return rule


def _dims_rule(name, *keys):
    def rule(operands, bdims, attrs):
        return call_op(name, operands, {**attrs, **{k: _shift(attrs[k]) for k in keys}}), 0
    return rule


for _name, _keys in {"softmax": ("dim",), "log_softmax": ("dim",), "softmin": ("dim",), "cumsum": ("axis",),
                     "cumprod": ("dim",), "logcumsumexp": ("dim",), "flip": ("dims",), "narrow": ("dim",),
                     "transpose": ("dim0", "dim1"), "diagonal": ("dim1", "dim2"), "unsqueeze": ("dim",),
                     "argsort": ("axis",), "movedim": ("source", "destination"),
                     "glu": ("dim",), "normalize": ("dim",)}.items():
    RULES[_name] = _dims_rule(_name, *_keys)


@_rule("max", "min", "sort", "topk", "cummax", "cummin", "unbind", "split", "chunk")
def _dim_multi(name):
    def rule(operands, bdims, attrs):
        return call_op(name, operands, {**attrs, "dim": _shift(attrs["dim"])}), 0
    return rule


@_rule("index_select")
def _index_select(name):
    def rule(operands, bdims, attrs):
        if bdims[1] is not None:  # an index per example: a gather, one example at a time
            return _loop_rule(name)(operands, bdims, attrs)
        return call_op(name, operands, {**attrs, "dim": _shift(attrs["dim"])}), 0
    return rule


def _loop_rule(name):
    def rule(operands, bdims, attrs):
        from ..core.optable import TABLE
        from ._vmap import loop
        return loop(TABLE[name], operands, bdims, attrs, _size(operands, bdims))
    return rule


@_rule("gather", "take_along_dim")
def _aligned_dims(name):
    """Ops whose tensor operands index each other position by position: all batched, dims shifted."""
    def rule(operands, bdims, attrs):
        size = _size(operands, bdims)
        ops = tuple(_batch(o, b, size) if hasattr(o, "shape") else o for o, b in zip(operands, bdims))
        return call_op(name, ops, {k: (_shift(v) if k in ("dim", "axis") else v) for k, v in attrs.items()}), 0
    return rule


@_rule("cat", "stack")
def _join(name):
    def rule(operands, bdims, attrs):
        size = _size(operands, bdims)
        return call_op(name, tuple(_batch(o, b, size) for o, b in zip(operands, bdims)),
                       {**attrs, "dim": _shift(attrs["dim"])}), 0
    return rule


# -- shapes --------------------------------------------------------------------------------

@_rule("reshape", "view")
def _reshape(name):
    def rule(operands, bdims, attrs):
        x = operands[0]
        return call_op("reshape", (x,), {**attrs, "shape": (x.shape[0],) + tuple(attrs["shape"])}), 0
    return rule


@_rule("expand")
def _expand(name):
    def rule(operands, bdims, attrs):
        x = operands[0]
        shape = tuple(attrs["shape"])
        x = _align(x, 0, len(shape))
        return call_op(name, (x,), {**attrs, "shape": (x.shape[0],) + shape}), 0
    return rule


@_rule("repeat")
def _repeat(name):
    def rule(operands, bdims, attrs):
        sizes = tuple(attrs["sizes"])
        x = _align(operands[0], 0, len(sizes))
        return call_op(name, (x,), {**attrs, "sizes": (1,) + sizes}), 0
    return rule


@_rule("permute")
def _permute(name):
    def rule(operands, bdims, attrs):
        x = operands[0]
        rank = x.dim() - 1
        return call_op(name, (x,), {**attrs, "axes": (0,) + tuple(d % rank + 1 for d in attrs["axes"])}), 0
    return rule


@_rule("t")
def _t(name):
    def rule(operands, bdims, attrs):
        x = operands[0]
        return (call_op("transpose", (x,), {"dim0": 1, "dim1": 2}) if x.dim() == 3 else x), 0
    return rule


@_rule("squeeze")
def _squeeze(name):
    def rule(operands, bdims, attrs):
        x = operands[0]
        dim = attrs["dim"]
        if dim is None:  # every size-1 dim of the example, never the batch dim
            dims = tuple(i + 1 for i, s in enumerate(tuple(x.shape)[1:]) if s == 1)
            return (call_op(name, (x,), {**attrs, "dim": dims}) if dims else x), 0
        return call_op(name, (x,), {**attrs, "dim": _shift(dim)}), 0
    return rule


@_rule("flatten")
def _flatten(name):
    def rule(operands, bdims, attrs):
        x = operands[0]
        if x.dim() == 1:  # a 0-d example flattens to one element
            return x.reshape(x.shape[0], 1), 0
        return call_op(name, (x,), {**attrs, "start_dim": _shift(attrs["start_dim"]),
                                    "end_dim": _shift(attrs["end_dim"])}), 0
    return rule


@_rule("tril", "triu", "one_hot", "pixel_shuffle", "pixel_unshuffle")
def _trailing(name):
    """Ops on the example's trailing dims, or on each element: the batch dim is one more leading dim."""
    def rule(operands, bdims, attrs):
        return call_op(name, operands, attrs), 0
    return rule


@_rule("getitem")
def _getitem(name):
    def rule(operands, bdims, attrs):
        index = attrs["index"]
        items = index if isinstance(index, tuple) else (index,)
        if len(operands) != 1 or not _keeps_advanced_in_place(items):
            return _loop_rule(name)(operands, bdims, attrs)
        return call_op(name, operands, {**attrs, "index": (slice(None),) + items}), 0
    return rule


@_rule("index_put_zeros")
def _index_put_zeros(name):
    """getitem's derivative: the example's gradient written into zeros of the example's shape."""
    def rule(operands, bdims, attrs):
        index = attrs["index"]
        items = index if isinstance(index, tuple) else (index,)
        if not _keeps_advanced_in_place(items):
            return _loop_rule(name)(operands, bdims, attrs)
        g = operands[0]
        return call_op(name, operands, {**attrs, "shape": (g.shape[0],) + tuple(attrs["shape"]),
                                        "index": (slice(None),) + items}), 0
    return rule


def _keeps_advanced_in_place(items) -> bool:
    """Whether a slice put before ``items`` leaves their result's dims where they were, after the
    batch dim: always for basic items; with index arrays (NumPy semantics: ints among them count
    as arrays), when those are adjacent, so their dims stay in place instead of moving first."""
    advanced = [k for k, i in enumerate(items) if hasattr(i, "shape")]
    if not advanced:
        return all(i is None or i is Ellipsis or type(i) in (int, slice) for i in items)
    joined = [k for k, i in enumerate(items) if hasattr(i, "shape") or type(i) is int]
    return joined == list(range(joined[0], joined[-1] + 1))


# the rules of layers, linear algebra and losses: their own module, filling RULES on import
from . import _batching_nn  # noqa: E402, F401
