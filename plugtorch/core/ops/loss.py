"""Losses: binary_cross_entropy(_with_logits), mse_loss and l1_loss, and what every loss shares
(cross_entropy and nll_loss are in ``classification.py``).

Each op's function is its decomposition; its ``bind`` does torch's argument handling —
the legacy ``size_average``/``reduce`` pair, the reduction name, the class dimension,
target dtypes and shapes, weight shapes, dtype promotion — so a backend kernel receives
validated arrays and normalised attrs (each docstring says which). Every op carries a
derivative written with plugtorch ops, so it is one graph node and a backend kernel for
it stays differentiable without re-running anything.

Checks that read values on the host (probabilities in [0, 1])
run only where ``checks_values`` allows: always on host memory, in debug mode elsewhere.

Gradients reach every floating operand: targets holding values (class probabilities,
the BCE, MSE and L1 targets) as in torch, and class weights and ``pos_weight`` too,
which torch refuses; their gradient is well defined, and gradient penalties use it.
"""
from __future__ import annotations

import os
import sys
import types
import warnings

from ..debug import checks_values
from ..dtypes import promote_types
from ..optable import op, public
from ..tensor import Tensor
from . import elementwise as ew
from ._args import broadcast_shapes
from .activation import sigmoid, softplus
from .special import xlogy

FUNCTIONAL = ("nn.functional",)
REDUCTIONS = ("none", "mean", "sum")
_PROMOTED = "floating; the operands promoted to one dtype"


# -- arguments -------------------------------------------------------------------------------

_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep  # plugtorch/


def _callers_level() -> int:
    """``warnings.warn``'s stacklevel, from the function that calls this, of the first frame
    outside plugtorch: the user's line, however many fronts and wrappers lie between."""
    frame: types.FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith((_PACKAGE, "<plugtorch")):  # (generated fronts)
        frame, level = frame.f_back, level + 1
    return level


def legacy_reduction(size_average, reduce, reduction):
    """torch's mapping of the deprecated ``size_average``/``reduce`` pair onto ``reduction``;
    the deprecation warning points at the user's line."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use reduction='"
                  + ("sum" if size_average is False and reduce is not False else "mean") + "' instead.",
                  stacklevel=_callers_level())
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else ("mean" if size_average else "sum")


def check_reduction(reduction):
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction; use one of {REDUCTIONS}")


def reduction_arg(size_average, reduce, reduction):
    """The checked reduction name (the legacy pair's warning points at the user's line)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    return reduction




def check_tensors(op_name, **named):
    for what, t in named.items():
        if t is not None and not isinstance(t, Tensor):
            raise TypeError(f"{op_name}(): argument '{what}' must be Tensor, not {type(t).__name__}")


def _float_dtype(op_name, *tensors):
    """The dtype the op computes in: the operands' promoted dtype, which must be floating."""
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        if t is not None:
            dtype = promote_types(dtype, t.dtype)
    if not dtype.is_floating_point:
        raise RuntimeError(f"{op_name}(): expected floating point input and target, got "
                           f"{', '.join(t.dtype.name for t in tensors if t is not None)}; "
                           "convert them first with .float()")
    return dtype


def _fit(t, shape, dtype):
    """``t`` in ``dtype``, broadcast (a view) to ``shape``; None stays None."""
    if t is None:
        return None
    if t.dtype is not dtype:
        t = t.to(dtype)
    return t if tuple(t.shape) == tuple(shape) else t.expand(shape)


# -- shared pieces of the decompositions and rules -------------------------------------------

def reduced(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


def upstream(g, reduction, count):
    """The gradient reaching each element of the unreduced loss (``count``: mean's divisor)."""
    return g / count if reduction == "mean" else g


def per_sample(s, reduction):
    """An upstream gradient of shape (N, *d) ('none') made to broadcast against (N, C, *d)."""
    return s.unsqueeze(1) if reduction == "none" else s


def non_class_dims(ndim):
    return (0,) + tuple(range(2, ndim))


def per_class(weight, ndim):
    """A (C,) weight shaped to broadcast along dim 1 of an (N, C, *d) tensor."""
    return weight.reshape((1, weight.shape[0]) + (1,) * (ndim - 2))


# -- binary cross-entropy --------------------------------------------------------------------

def _bce_terms(p, t):
    # torch clamps each log at -100, so p = 0 or 1 gives a finite loss
    return -(t * ew.clamp(ew.log(p), min=-100.0) + (1 - t) * ew.clamp(ew.log(1 - p), min=-100.0))


def _binary_cross_entropy_rule(ctx, g):
    # torch's derivative, finite at p = 0 and p = 1 where the clamped logs' would be 0/0
    p, t, w = ctx.saved
    need = ctx.needs_input_grad
    s = upstream(g, ctx.attrs["reduction"], p.numel())
    sw = s if w is None else s * w
    gp = sw * (p - t) / ew.clamp((1 - p) * p, min=1e-12) if need[0] else None
    gt = sw * (ew.log(1 - p) - ew.log(p)) if need[1] else None  # unclamped, as torch's
    gw = s * _bce_terms(p, t) if need[2] else None
    return gp, gt, gw


def _binary_args(op_name, input, target, others, size_message):
    """input, target and the weights, in one floating dtype, the weights broadcast to input's shape."""
    check_tensors(op_name, input=input, target=target, **others)
    if target.shape != input.shape:
        raise ValueError(size_message.format(t=target.shape, i=input.shape))
    dtype = _float_dtype(op_name, input, target, *others.values())
    for what, w in others.items():
        if w is not None and broadcast_shapes(w.shape, input.shape) != tuple(input.shape):
            raise RuntimeError(f"{op_name}: {what} of shape {list(w.shape)} cannot be broadcast to "
                               f"the input's shape {list(input.shape)}")
    return [_fit(v, input.shape, dtype) for v in (input, target, *others.values())]


def _binary_cross_entropy_args(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = reduction_arg(size_average, reduce, reduction)
    x, t, w = _binary_args("binary_cross_entropy", input, target, {"weight": weight},
                           "Using a target size ({t}) that is different to the input size ({i}) is "
                           "deprecated. Please ensure they have the same size.")
    if x.numel() and checks_values(x):  # reads values: see checks_values
        if bool(ew.logical_or(ew.lt(x, 0), ew.gt(x, 1)).any()):
            raise RuntimeError("binary_cross_entropy: all elements of input should be between 0 and 1; "
                               "apply sigmoid first, or use binary_cross_entropy_with_logits on the raw "
                               "scores")
    return (x, t, w), {"reduction": reduction}


@op(bind=_binary_cross_entropy_args, derivative=_binary_cross_entropy_rule, save="inputs", exposed=FUNCTIONAL,
    dtypes=_PROMOTED)
def binary_cross_entropy(input, target, weight, *, reduction):
    """Binary cross-entropy of probabilities ``input``; each log is clamped at -100 as in torch.

    A backend kernel receives input, target and weight (or None) as floating arrays of one
    shape and dtype (input values in [0, 1]; weight broadcast to that shape), and reduction
    ("none", "mean" or "sum") by name.
    """
    loss = _bce_terms(input, target)
    return reduced(loss if weight is None else loss * weight, reduction)


def _bce_with_logits_terms(input, target, pos_weight):
    # -log sigmoid(x) = softplus(-x), computed without overflow for large |x|
    sp = softplus(-input)
    scaled = sp if pos_weight is None else ((pos_weight - 1) * target + 1) * sp
    return (1 - target) * input + scaled


def _bce_with_logits_rule(ctx, g):
    x, t, w, pw = ctx.saved
    need = ctx.needs_input_grad
    s = upstream(g, ctx.attrs["reduction"], x.numel())
    sw = s if w is None else s * w
    gx = gt = gw = gpw = None
    if need[0]:  # (1 - t) - lw * sigmoid(-x), lw = (pw - 1) t + 1
        sig = sigmoid(-x)
        gx = sw * ((1 - t) - (sig if pw is None else ((pw - 1) * t + 1) * sig))
    if need[1] or need[3]:
        sp = softplus(-x)
        if need[1]:
            gt = sw * (-x if pw is None else (pw - 1) * sp - x)
        if need[3]:
            gpw = sw * t * sp
    if need[2]:
        gw = s * _bce_with_logits_terms(x, t, pw)
    return gx, gt, gw, gpw


def _bce_with_logits_args(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                          pos_weight=None):
    reduction = reduction_arg(size_average, reduce, reduction)
    return tuple(_binary_args("binary_cross_entropy_with_logits", input, target,
                              {"weight": weight, "pos_weight": pos_weight},
                              "Target size ({t}) must be the same as input size ({i})")), {"reduction": reduction}


@op(bind=_bce_with_logits_args, derivative=_bce_with_logits_rule, save="inputs", exposed=FUNCTIONAL, dtypes=_PROMOTED)
def binary_cross_entropy_with_logits(input, target, weight, pos_weight, *, reduction):
    """Binary cross-entropy on logits, as softplus terms (large |input| never overflows).

    ``pos_weight`` scales the positive term: -[pw t log s(x) + (1 - t) log(1 - s(x))]. A
    backend kernel receives input, target, weight and pos_weight (each of the last two may
    be None) as floating arrays of one shape and dtype (the weights broadcast to it), and
    reduction ("none", "mean" or "sum") by name.
    """
    loss = _bce_with_logits_terms(input, target, pos_weight)
    return reduced(loss if weight is None else loss * weight, reduction)


_ENUM = {0: "none", 1: "mean", 2: "sum"}


@public("plugtorch", name="binary_cross_entropy_with_logits")
def torch_binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=1):
    """``torch.binary_cross_entropy_with_logits``: pos_weight third and reduction as torch's enum
    (0 none, 1 mean, 2 sum; the names work too), unlike the nn.functional spelling."""
    return binary_cross_entropy_with_logits(input, target, weight, reduction=_ENUM.get(reduction, reduction),
                                            pos_weight=pos_weight)


# -- regression ------------------------------------------------------------------------------

def _regression_args(op_name, input, target, weight):
    """input, target and weight in one floating dtype and one shape (a broadcast, with torch's
    warning, pointing at the user's line)."""
    check_tensors(op_name, input=input, target=target, weight=weight)
    if input.shape != target.shape:
        warnings.warn(f"{op_name}: Using a target size ({target.shape}) that is different to the input "
                      f"size ({input.shape}). This will likely lead to incorrect results due to "
                      "broadcasting. Please ensure they have the same size.", stacklevel=_callers_level())
    if weight is not None and weight.shape != input.shape:
        raise ValueError(f"{op_name}: Weights and input must have the same size: weight "
                         f"{list(weight.shape)}, input {list(input.shape)}")
    dtype = _float_dtype(op_name, input, target, weight)
    shape = broadcast_shapes(input.shape, target.shape)
    return _fit(input, shape, dtype), _fit(target, shape, dtype), _fit(weight, shape, dtype)


def _weighted(loss, weight, reduction):
    if weight is None:
        return reduced(loss, reduction)
    loss = loss * weight
    return loss.sum() / weight.sum() if reduction == "mean" else reduced(loss, reduction)


def _regression_rule(loss_of, slope_of):
    """The rule of a loss f(input - target), optionally weighted ('mean' is then sum(w l) / sum(w))."""
    def rule(ctx, g):
        x, t, w = ctx.saved
        red, need = ctx.attrs["reduction"], ctx.needs_input_grad
        d = x - t
        s = upstream(g, red, x.numel() if w is None else w.sum())
        gx = gt = gw = None
        if need[0] or need[1]:
            gd = slope_of(d) * (s if w is None else s * w)
            gx, gt = (gd if need[0] else None), (-gd if need[1] else None)
        if need[2]:  # for 'mean', the divisor sum(w) depends on w too
            loss = loss_of(d)
            gw = (loss - (loss * w).sum() / w.sum() if red == "mean" else loss) * s
        return gx, gt, gw
    return rule


def _regression_loss_args(op_name):
    # mse_loss's and l1_loss's bind (torch's signature of both)
    def bind(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
        reduction = reduction_arg(size_average, reduce, reduction)
        return _regression_args(op_name, input, target, weight), {"reduction": reduction}
    return bind


@op(bind=_regression_loss_args("mse_loss"), derivative=_regression_rule(lambda d: d * d, lambda d: d * 2),
    save="inputs", exposed=FUNCTIONAL, dtypes=_PROMOTED)
def mse_loss(input, target, weight, *, reduction):
    """Squared error (input - target)^2, optionally weighted elementwise.

    A backend kernel receives input, target and weight (or None) as floating arrays of one
    shape and dtype (a target of another shape is broadcast first, with torch's warning),
    and reduction ("none", "mean" or "sum") by name; with a weight, 'mean' is
    sum(w * l) / sum(w).
    """
    d = input - target
    return _weighted(d * d, weight, reduction)


@op(bind=_regression_loss_args("l1_loss"), derivative=_regression_rule(ew.abs, ew.sign), save="inputs",
    exposed=FUNCTIONAL, dtypes=_PROMOTED)
def l1_loss(input, target, weight, *, reduction):
    """Absolute error |input - target|, optionally weighted elementwise; the gradient at 0 is 0.

    A backend kernel receives what mse_loss's receives.
    """
    return _weighted(ew.abs(input - target), weight, reduction)


# -- robust regression: smooth L1 and Huber ---------------------------------------------------

def _huber_terms(d, delta):
    a = ew.abs(d)
    return ew.where(ew.lt(a, delta), d * d * 0.5, (a - delta * 0.5) * delta)


def _smooth_l1_rule(ctx, g):
    x, t = ctx.saved
    red, beta, need = ctx.attrs["reduction"], ctx.attrs["beta"], ctx.needs_input_grad
    d = x - t
    gd = (ew.clamp(d / beta, -1.0, 1.0) if beta else ew.sign(d)) * upstream(g, red, x.numel())
    return (gd if need[0] else None), (-gd if need[1] else None)


def _smooth_l1_loss_args(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    reduction = reduction_arg(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    x, t, _ = _regression_args("smooth_l1_loss", input, target, None)
    return (x, t), {"reduction": reduction, "beta": float(beta)}


@op(bind=_smooth_l1_loss_args, derivative=_smooth_l1_rule, save="inputs", exposed=FUNCTIONAL, dtypes=_PROMOTED)
def smooth_l1_loss(input, target, *, reduction, beta):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target); beta = 0 is L1.

    A backend kernel receives input and target as floating arrays of one shape and dtype (a
    target of another shape is broadcast first, with torch's warning), and reduction and
    beta by name.
    """
    d = input - target
    return reduced(_huber_terms(d, beta) / beta if beta else ew.abs(d), reduction)


def _huber_rule(ctx, g):
    x, t, w = ctx.saved
    red, delta, need = ctx.attrs["reduction"], ctx.attrs["delta"], ctx.needs_input_grad
    d = x - t
    s = upstream(g, red, x.numel())
    gx = gt = gw = None
    if need[0] or need[1]:
        gd = ew.clamp(d, -delta, delta) * (s if w is None else s * w)
        gx, gt = (gd if need[0] else None), (-gd if need[1] else None)
    if need[2]:
        gw = _huber_terms(d, delta) * s
    return gx, gt, gw


def _huber_loss_args(input, target, reduction="mean", delta=1.0, weight=None):
    check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    return _regression_args("huber_loss", input, target, weight), {"reduction": reduction, "delta": float(delta)}


@op(bind=_huber_loss_args, derivative=_huber_rule, save="inputs", exposed=FUNCTIONAL, dtypes=_PROMOTED)
def huber_loss(input, target, weight, *, reduction, delta):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta); with a weight, 'mean' is
    mean(w * l) (unlike mse_loss's and l1_loss's sum(w l) / sum(w)), as in torch.

    A backend kernel receives input, target and weight (or None) as floating arrays of one
    shape and dtype, and reduction and delta by name.
    """
    loss = _huber_terms(input - target, delta)
    return reduced(loss if weight is None else loss * weight, reduction)


# -- distribution losses: KL divergence, Poisson NLL ------------------------------------------

def _kl_div_args(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    if size_average is not None or reduce is not None:
        reduction = legacy_reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      stacklevel=_callers_level())
    if reduction not in REDUCTIONS + ("batchmean",):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    check_tensors("kl_div", input=input, target=target)
    dtype = _float_dtype("kl_div", input, target)
    shape = broadcast_shapes(input.shape, target.shape)
    return (_fit(input, shape, dtype), _fit(target, shape, dtype)), {"reduction": reduction,
                                                                     "log_target": bool(log_target)}


@op(bind=_kl_div_args, exposed=FUNCTIONAL, dtypes=_PROMOTED)
def kl_div(input, target, *, reduction, log_target):
    """KL(target || exp(input)) pointwise: target * (log target - input) (``input`` holds
    log-probabilities; ``log_target``: so does target); 'batchmean' divides the sum by the batch size.

    'mean' averages over every element and warns, as torch does. A backend kernel receives
    input and target as floating arrays of one shape and dtype, and reduction ('none',
    'mean', 'sum', 'batchmean') and log_target by name.
    """
    if log_target:
        loss = ew.exp(target) * (target - input)
    else:  # torch's xlogy: 0 where target is 0, nan where it is negative, and at 0 a gradient in
        # target of nan (log 0 + 1), not the finite one of a term masked to 0
        loss = xlogy(target, target) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return reduced(loss, reduction)


_HALF_LOG_2PI = 0.9189385332046727


def _poisson_nll_loss_args(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                           reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = legacy_reduction(size_average, reduce, reduction)
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    check_tensors("poisson_nll_loss", input=input, target=target)
    dtype = _float_dtype("poisson_nll_loss", input, target)
    shape = broadcast_shapes(input.shape, target.shape)
    return (_fit(input, shape, dtype), _fit(target, shape, dtype)), {
        "log_input": bool(log_input), "full": bool(full), "eps": float(eps), "reduction": reduction}


@op(bind=_poisson_nll_loss_args, exposed=FUNCTIONAL, dtypes=_PROMOTED)
def poisson_nll_loss(input, target, *, log_input, full, eps, reduction):
    """Negative log-likelihood of ``target`` under Poisson(rate): exp(input) - target * input with
    ``log_input``, else input - target * log(input + eps); ``full`` adds Stirling's term.

    A backend kernel receives input and target as floating arrays of one shape and dtype,
    and log_input, full, eps and reduction by name.
    """
    loss = ew.exp(input) - target * input if log_input else input - target * ew.log(input + eps)
    if full:  # Stirling's approximation of log(target!), where target > 1
        safe = ew.where(ew.gt(target, 1), target, 1.0)
        stirling = safe * ew.log(safe) - safe + ew.log(safe) * 0.5 + _HALF_LOG_2PI
        loss = loss + ew.where(ew.gt(target, 1), stirling, 0.0)
    return reduced(loss, reduction)
