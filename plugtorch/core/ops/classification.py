"""Classification losses: cross_entropy (with its registered backward op) and nll_loss.

Each op's function is its decomposition; its ``bind`` does torch's argument handling (class
dim, target dtype and shape, weights, label_smoothing) so a backend kernel receives validated
arrays and normalised attrs; cross_entropy's input gradient is the registered op ``cross_entropy_backward``,
so a backend that fuses the forward can fuse the backward too. The class-index range
check reads values, so it runs only where ``checks_values`` allows (see ``core.debug``).
"""
from __future__ import annotations

from ..debug import checks_values
from ..dispatch import call_op
from ..dtypes import int64, promote_types
from ..optable import Done, op
from . import elementwise as ew
from .activation import log_softmax, softmax
from .creation import arange
from .loss import (
    FUNCTIONAL,
    check_tensors,
    non_class_dims,
    per_class,
    per_sample,
    reduced,
    reduction_arg,
    upstream,
)

_CLASS_DTYPES = "floating input; integer class indices -> int64"


def _one_hot(safe, c, like):
    """(N, C, *d) in ``like``'s dtype: 1 where the class is ``safe``'s index (a compare, no scatter)."""
    classes = arange(c, device=like.device).reshape((1, c) + (1,) * (like.ndim - 2))
    return ew.eq(classes, safe.unsqueeze(1)).to(like.dtype)


def _index_weights(target, weight, ignore_index, dtype):
    """Per-target weight (0 where ignored), the valid mask as floats, and in-range indices."""
    valid = ew.ne(target, ignore_index)
    safe = ew.where(valid, target, 0)
    v = valid.to(dtype)
    return (v if weight is None else weight[safe] * v), v, safe


def _kept_upstream(g, reduction, total, v):
    """The gradient reaching each target's loss, (N, *d): upstream's (``total``: 'mean''s divisor),
    and exactly 0 at an ignored target whatever that is, as torch's masked gradient is. 'mean'
    over no counted targets divides by 0, and a 'none' gradient may be inf where the loss was 0:
    multiplied by the ignored targets' zero weights, those made their rows NaN, and an all-ignored
    batch then poisoned every parameter (torch leaves zero gradients there)."""
    return ew.where(v != 0, upstream(g, reduction, total), 0.0)


def _smoothed(target, weight, label_smoothing, ndim):
    """Class probabilities mixed with the uniform distribution, times the class weights."""
    if label_smoothing:
        target = target * (1 - label_smoothing) + label_smoothing / target.shape[1]
    return target if weight is None else target * per_class(weight, ndim)


# -- classification: arguments ---------------------------------------------------------------

def _classification_args(op_name, input, target, weight, ignore_index, probabilities):
    """(input, target, weight) in the kernels' layout (classes on dim 1, a batch dim always),
    and whether the call was unbatched."""
    check_tensors(op_name, input=input, target=target, weight=weight)
    if input.ndim == 0:
        raise ValueError(f"{op_name}: input must have at least 1 dimension (the classes), got a 0-d tensor")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{op_name}(): expected a floating point input, got {input.dtype.name}; "
                           "convert it first with .float()")
    unbatched = input.ndim == 1
    c = input.shape[0 if unbatched else 1]
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != c):
        raise RuntimeError(
            f"{op_name}: weight tensor should be defined either for all {c} classes or no "
            f"classes but got weight tensor of shape: {list(weight.shape)}")
    if probabilities and target.dtype.is_floating_point:
        if target.shape != input.shape:
            raise RuntimeError(
                f"{op_name}: class-probability target must have the input's shape "
                f"{list(input.shape)}, got {list(target.shape)}; for class indices pass an int64 target")
        if ignore_index >= 0:
            raise RuntimeError("ignore_index is not supported for floating point target")
        dtype = promote_types(input.dtype, target.dtype)
        target = target if target.dtype is dtype else target.to(dtype)
    else:
        _check_index_target(op_name, input, target, probabilities)
        if target.dtype is not int64:
            target = target.to(int64)
        _check_index_range(op_name, target, c, ignore_index)
        dtype = input.dtype
    if input.dtype is not dtype:
        input = input.to(dtype)
    if weight is not None and weight.dtype is not dtype:
        weight = weight.to(dtype)
    if unbatched:
        input, target = input.unsqueeze(0), target.unsqueeze(0)
    return input, target, weight, unbatched


# torch's names for dtypes in its error messages
_TORCH_TYPE_NAMES = {"float64": "Double", "float32": "Float", "float16": "Half", "int64": "Long",
                     "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _check_index_target(op_name, input, target, probabilities):
    if target.dtype.name not in ("int64", "uint8"):
        extra = ("; for class probabilities pass a floating target of the input's shape"
                 if probabilities and target.dtype.is_floating_point else "")
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got "
                           f"{_TORCH_TYPE_NAMES[target.dtype.name]} ({op_name}: convert the class "
                           f"indices with .long(){extra})")
    if input.ndim == 1:
        if target.ndim != 0:
            raise ValueError(f"{op_name}: for an unbatched input of shape {list(input.shape)} the "
                             f"class-index target must be 0-d, got shape {list(target.shape)}")
        return
    if target.shape[:1] != input.shape[:1]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                         f"({target.shape[0] if target.ndim else 'a 0-d target'}).")
    expected = (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        raise RuntimeError(f"{op_name}: expected target of shape {list(expected)} for input of shape "
                           f"{list(input.shape)} (N, C, d1, ...), got {list(target.shape)}")


def _check_index_range(op_name, target, c, ignore_index):
    # reads values: free on host memory, a device sync elsewhere (then only in debug mode)
    if not target.numel() or not checks_values(target):
        return
    values = target.numpy()  # one read, checked on the host (NumPy): no dispatched ops per step
    if values.min() >= 0 and values.max() < c:  # every step's case: two reductions, no masks
        return
    bad = ((values < 0) | (values >= c)) & (values != ignore_index)
    if bad.any():
        raise IndexError(f"{op_name}: Target {int(values[bad][0])} is out of bounds for {c} classes "
                         f"(valid: 0..{c - 1}, or ignore_index={ignore_index})")


def _unbatched(name, operands, attrs):
    # an unbatched input is computed as a batch of one: its per-sample loss drops that dim again
    return Done(call_op(name, operands, attrs).squeeze(0))


# -- cross_entropy ---------------------------------------------------------------------------

def _cross_entropy_rule(ctx, g):
    x, t, w = ctx.saved
    a = ctx.attrs
    need = ctx.needs_input_grad
    gx = cross_entropy_backward(g, x, t, w, **a) if need[0] else None
    if not (need[1] or need[2]):
        return gx, None, None
    red, ls, dims = a["reduction"], a["label_smoothing"], non_class_dims(x.ndim)
    logp = log_softmax(x, 1)
    if t.dtype.is_floating_point:
        s = per_sample(upstream(g, red, x.numel() // x.shape[1]), red)
        wlogp = logp if w is None else logp * per_class(w, x.ndim)
        gt = wlogp * s * -(1 - ls) if need[1] else None
        gw = -(logp * _smoothed(t, None, ls, x.ndim) * s).sum(dims) if need[2] else None
        return gx, gt, gw
    # d/dw_c of sum_i -v_i [(1 - ls) w[t_i] logp[t_i] + ls/C sum_c w_c logp_c], and for 'mean'
    # of its divisor sum_i v_i w[t_i]
    wt, v, safe = _index_weights(t, w, a["ignore_index"], x.dtype)
    onehot = _one_hot(safe, x.shape[1], x)
    per = onehot * (1 - ls) + ls / x.shape[1]
    s = _kept_upstream(g, red, wt.sum(), v)
    term = -(per * logp)
    if red == "mean":  # the loss itself, recomputed: saving the output would fail `loss += ...`
        term = term - onehot * call_op("cross_entropy", (x, t, w), a)
    return gx, None, (term * (s * v).unsqueeze(1)).sum(dims)


def _cross_entropy_args(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                        reduction="mean", label_smoothing=0.0):
    reduction = reduction_arg(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    x, t, w, unbatched = _classification_args("cross_entropy", input, target, weight, ignore_index, True)
    attrs = {"ignore_index": int(ignore_index), "reduction": reduction, "label_smoothing": float(label_smoothing)}
    if unbatched and reduction == "none":
        return _unbatched("cross_entropy", (x, t, w), attrs)
    return (x, t, w), attrs


@op(bind=_cross_entropy_args, derivative=_cross_entropy_rule, save="inputs", exposed=FUNCTIONAL,
    dtypes=_CLASS_DTYPES + "; class probabilities promoted with the input")
def cross_entropy(input, target, weight, *, ignore_index, reduction, label_smoothing):
    """Cross-entropy of logits against class indices or class probabilities (via a stable log-softmax).

    Huge logits give finite losses. A backend kernel receives input (N, C, *d) floating (an
    unbatched (C,) input gets N = 1), target — int64 class indices (N, *d) (values in range
    or ignore_index), or class probabilities of input's shape and dtype (floating: that is
    how a kernel tells them apart) — and weight (C,) in input's dtype or None; attrs
    ignore_index (int), reduction ("none", "mean" or "sum") and label_smoothing (float in
    [0, 1]). 'mean' divides by the summed weights of the non-ignored targets (probabilities:
    by N * d1 * ...).
    """
    logp = log_softmax(input, 1)
    if target.dtype.is_floating_point:  # class probabilities; mean divides by N * d1 * ...
        return reduced(-(logp * _smoothed(target, weight, label_smoothing, input.ndim)).sum(1), reduction)
    wt, v, safe = _index_weights(target, weight, ignore_index, input.dtype)
    loss = -(logp.gather(1, safe.unsqueeze(1)).squeeze(1) * wt)
    if label_smoothing:
        lw = logp if weight is None else logp * per_class(weight, input.ndim)
        c = input.shape[1]
        loss = loss * (1 - label_smoothing) - lw.sum(1) * v * (label_smoothing / c)
    # torch divides both terms by the summed weights of the targets (the valid count unweighted)
    return loss.sum() / wt.sum() if reduction == "mean" else reduced(loss, reduction)


def _cross_entropy_backward_args(grad_output, input, target, weight, ignore_index, reduction, label_smoothing):
    per_sample = (input.shape[0],) + tuple(input.shape[2:]) if input.ndim >= 2 else None
    if per_sample is None or grad_output.shape != (per_sample if reduction == "none" else ()) or \
            target.shape not in (per_sample, input.shape):
        raise RuntimeError(f"cross_entropy_backward: expected input (N, C, *d), target (N, *d) or input's "
                           f"shape, and grad_output {'(N, *d)' if reduction == 'none' else '0-d'}; got input "
                           f"{list(input.shape)}, target {list(target.shape)}, grad_output "
                           f"{list(grad_output.shape)}")
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != input.shape[1]):
        raise RuntimeError(f"cross_entropy_backward: weight should hold one value per class ({input.shape[1]}), "
                           f"got shape {list(weight.shape)}")
    return (grad_output, input, target, weight), {"ignore_index": ignore_index, "reduction": reduction,
                                                  "label_smoothing": label_smoothing}


@op(bind=_cross_entropy_backward_args, dtypes="as cross_entropy's")
def cross_entropy_backward(grad_output, input, target, weight, *, ignore_index, reduction, label_smoothing):
    """The gradient of cross_entropy with respect to its logits.

    A kernel receives what cross_entropy's receives, after ``grad_output`` (0-d for 'mean'
    and 'sum', (N, *d) for 'none'); it returns an array of input's shape. The decomposition
    is written with plugtorch ops, so double backward runs through it.
    """
    c, ls = input.shape[1], label_smoothing
    p = softmax(input, 1)
    if target.dtype.is_floating_point:  # d/dx of -sum_c tw_c log p_c = p sum_c tw_c - tw
        tw = _smoothed(target, weight, ls, input.ndim)
        s = upstream(grad_output, reduction, input.numel() // c)
        return (p * tw.sum(1, keepdim=True) - tw) * per_sample(s, reduction)
    wt, v, safe = _index_weights(target, weight, ignore_index, input.dtype)
    dx = (p - _one_hot(safe, c, input)) * wt.unsqueeze(1)
    if ls:  # the smoothing term -ls/C sum_c w_c log p_c contributes ls/C (p sum_c w_c - w)
        if weight is None:
            uniform = p * c - 1
        else:
            uniform = p * weight.sum() - per_class(weight, input.ndim)
        dx = dx * (1 - ls) + uniform * (v.unsqueeze(1) * (ls / c))
    return dx * _kept_upstream(grad_output, reduction, wt.sum(), v).unsqueeze(1)


# -- nll_loss --------------------------------------------------------------------------------

def _nll_loss_rule(ctx, g):
    # the gradient is -w[t] at each target's class: a compare against the class ids, no scatter
    x, t, w = ctx.saved
    a = ctx.attrs
    red, need = a["reduction"], ctx.needs_input_grad
    wt, v, safe = _index_weights(t, w, a["ignore_index"], x.dtype)
    onehot = _one_hot(safe, x.shape[1], x)
    s = _kept_upstream(g, red, wt.sum(), v)
    gx = -(onehot * (s * wt).unsqueeze(1)) if need[0] else None
    gw = None
    if need[2]:  # d/dw_c of -sum_i w[t_i] x[i, t_i], and for 'mean' of its divisor sum_i w[t_i]
        picked = -x if red != "mean" else -x - call_op("nll_loss", (x, t, w), a)
        gw = (onehot * picked * (s * v).unsqueeze(1)).sum(non_class_dims(x.ndim))
    return gx, None, gw


def _nll_loss_args(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                   reduction="mean"):
    reduction = reduction_arg(size_average, reduce, reduction)
    x, t, w, unbatched = _classification_args("nll_loss", input, target, weight, ignore_index, False)
    attrs = {"ignore_index": int(ignore_index), "reduction": reduction}
    if unbatched and reduction == "none":
        return _unbatched("nll_loss", (x, t, w), attrs)
    return (x, t, w), attrs


@op(bind=_nll_loss_args, derivative=_nll_loss_rule, save="inputs", exposed=FUNCTIONAL, dtypes=_CLASS_DTYPES)
def nll_loss(input, target, weight, *, ignore_index, reduction):
    """Negative log-likelihood of class indices ``target`` under log-probabilities ``input``.

    A backend kernel receives input (N, C, *d) floating (an unbatched (C,) input gets N = 1),
    target int64 (N, *d) (values in range or ignore_index), weight (C,) in input's dtype or
    None; attrs ignore_index (int) and reduction ("none", "mean" or "sum"; 'mean' divides by
    the summed weights of the non-ignored targets).
    """
    wt, _, safe = _index_weights(target, weight, ignore_index, input.dtype)
    loss = -(input.gather(1, safe.unsqueeze(1)).squeeze(1) * wt)
    return loss.sum() / wt.sum() if reduction == "mean" else reduced(loss, reduction)
