"""Helpers shared by the distributions: broadcasting parameters, probs/logits conversion."""
from __future__ import annotations

import numbers

import plugtorch as pt

_EPS = {pt.float16: 2 ** -10, pt.float32: 2 ** -23, pt.float64: 2 ** -52}
_TINY = {pt.float16: 2 ** -14, pt.float32: 2 ** -126, pt.float64: 2 ** -1022}


def eps(dtype) -> float:
    return _EPS.get(dtype, 2 ** -23)


def tiny(dtype) -> float:
    return _TINY.get(dtype, 2 ** -126)


def broadcast_all(*values):
    """Broadcast tensors and numbers to one shape; numbers take the tensors' dtype (or the default)."""
    tensors = [v for v in values if isinstance(v, pt.Tensor)]
    for v in values:
        if not isinstance(v, (pt.Tensor, numbers.Number)):
            raise ValueError("Input arguments must all be instances of numbers.Number, "
                             "plugtorch.Tensor or objects implementing __torch_function__.")
    like = tensors[0] if tensors else None
    dtype = like.dtype if like is not None else pt.get_default_dtype()
    as_t = [v if isinstance(v, pt.Tensor) else pt.tensor(float(v), dtype=dtype) for v in values]
    shape = pt.Size(pt.broadcast_shapes(*[t.shape for t in as_t]))
    return tuple(t.expand(shape) for t in as_t)


def clamp_probs(probs):
    e = eps(probs.dtype)
    return probs.clamp(min=e, max=1 - e)


def expand_probs_or_logits(old, new, shape) -> None:
    """``expand``'s copy of the parameters a probs/logits distribution holds: whichever of ``probs``
    and ``logits`` ``old`` was given or has computed, expanded to ``shape``; ``new._param`` is the
    last of them (the logits, where both are there)."""
    for name in ("probs", "logits"):
        if name in old.__dict__:
            setattr(new, name, old.__dict__[name].expand(shape))
            new._param = new.__dict__[name]


def logits_to_probs(logits, is_binary=False):
    return pt.sigmoid(logits) if is_binary else pt.softmax(logits, -1)


def probs_to_logits(probs, is_binary=False):
    ps = clamp_probs(probs)
    if is_binary:
        return pt.log(ps) - pt.log1p(-ps)
    return pt.log(ps)


class lazy_property:
    """A cached property: computed once per instance on first access (torch's lazy_property)."""

    def __init__(self, fn):
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        value = self.fn(instance)
        instance.__dict__[self.fn.__name__] = value
        return value
