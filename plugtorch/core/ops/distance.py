"""Distances and the metric-learning losses built on them: normalize, cosine_similarity,
pairwise_distance, triplet_margin_loss, margin_ranking_loss.

All are compositions of differentiable ops (norms, sums, clamps); autograd differentiates
them, so each is one op a backend may replace, with no rule to keep in step.
"""
from __future__ import annotations

from ..grad_mode import no_grad
from ..optable import Done, op
from ..tensor import _wrap_dim
from . import elementwise as ew
from ._args import broadcast_shapes
from .loss import check_tensors, reduced, reduction_arg
from .statistics import norm

_F = ("nn.functional",)
_BOTH = ("plugtorch",) + _F


def _floating(op_name, *tensors):
    for t in tensors:
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"{op_name}(): expected floating point inputs, got "
                               f"{', '.join(x.dtype.name for x in tensors)}; convert them with .float()")


def _normalize_args(input, p=2.0, dim=1, eps=1e-12, out=None):
    check_tensors("normalize", input=input, out=out)
    _floating("normalize", input)
    if out is not None:  # torch's out=: the result is copied in, without a gradient
        with no_grad():
            out.copy_(normalize(input, p, dim, eps))
        return Done(out)
    return (input,), {"p": float(p), "dim": dim, "eps": eps}


@op(bind=_normalize_args, exposed=_F)
def normalize(input, *, p, dim, eps):
    """``input / max(||input||_p, eps)`` along ``dim``; ``out``, if given, receives the result
    without a gradient, as torch's ``out=`` does.

    A backend kernel receives the input and p, dim and eps by name.
    """
    return input / ew.clamp(norm(input, p, dim, keepdim=True), min=eps)


@op(operands=2, exposed=_BOTH)
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 / ||x1|| * x2 / ||x2||) along ``dim`` (the inputs broadcast); each norm is at least
    ``eps``, clamped without a gradient of its own, as torch does."""
    check_tensors("cosine_similarity", x1=x1, x2=x2)
    _floating("cosine_similarity", x1, x2)
    shape = broadcast_shapes(x1.shape, x2.shape)
    a, b = x1.expand(shape), x2.expand(shape)
    d = _wrap_dim(dim, len(shape)) if shape else 0
    if not shape:
        a, b = a.reshape(1), b.reshape(1)
    na, nb = norm(a, 2, d, keepdim=True), norm(b, 2, d, keepdim=True)
    # torch clamps the norms in place under no_grad: the value is clamped, the gradient is the norm's
    na = na + (ew.clamp(na.detach(), min=eps) - na.detach())
    nb = nb + (ew.clamp(nb.detach(), min=eps) - nb.detach())
    out = ((a / na) * (b / nb)).sum(d)
    return out.reshape(()) if not shape else out


@op(operands=2, exposed=_BOTH)
def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dim (the inputs broadcast)."""
    check_tensors("pairwise_distance", x1=x1, x2=x2)
    _floating("pairwise_distance", x1, x2)
    diff = x1 - x2 + eps
    if diff.ndim == 0:
        return norm(diff.reshape(1), p, 0, keepdim=False).reshape(())
    return norm(diff, p, diff.ndim - 1, keepdim=keepdim)


@op(operands=3, exposed=_F)
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0) with d the pairwise p-distance; ``swap`` uses
    min(d(a, n), d(p, n)) as the negative distance."""
    reduction = reduction_arg(size_average, reduce, reduction)
    check_tensors("triplet_margin_loss", anchor=anchor, positive=positive, negative=negative)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number "
                           f"of dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and "
                           f"negative {negative.ndim}D inputs")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = ew.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return reduced(ew.clamp(d_pos - d_neg + margin, min=0.0), reduction)


@op(operands=3, exposed=_F)
def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -target * (input1 - input2) + margin): rank input1 above input2 where target is 1."""
    reduction = reduction_arg(size_average, reduce, reduction)
    check_tensors("margin_ranking_loss", input1=input1, input2=input2, target=target)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {list(input1.shape)}, input2: {list(input2.shape)}, target: "
                           f"{list(target.shape)} ")
    return reduced(ew.clamp(-target * (input1 - input2) + margin, min=0.0), reduction)

