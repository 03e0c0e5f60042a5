"""Loss functions in ``torch.nn.functional``'s names, signatures and reductions.

Cross-entropy is ``nll_loss(log_softmax(x))``: log-probabilities come from the
stable log-softmax, never from ``log(softmax(x))``, so huge logits give finite losses.
"""
from __future__ import annotations

import warnings

import plugtorch
from ...core.ops import activation as _act
from ...autograd.function import Function
from ...core.tensor import Tensor

_REDUCTIONS = ("none", "mean", "sum")


def _legacy_reduction(size_average, reduce, reduction):
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use reduction='"
                  + ("sum" if size_average is False and reduce is not False else "mean") + "' instead.",
                  stacklevel=3)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else ("mean" if size_average else "sum")


def _check_reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction; use one of {_REDUCTIONS}")


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _check_same_size(op, input, target):
    if input.shape != target.shape:
        warnings.warn(
            f"{op}: Using a target size ({target.shape}) that is different to the input size "
            f"({input.shape}). This will likely lead to incorrect results due to broadcasting. "
            "Please ensure they have the same size.", stacklevel=3)


def _reduce_weighted(op, loss, weight, input, reduction):
    """Elementwise ``weight`` (input's shape); 'mean' is then the weighted mean, as in torch."""
    if weight is None:
        return _reduce(loss, reduction)
    if weight.shape != input.shape:
        raise ValueError(f"{op}: Weights and input must have the same size: weight "
                         f"{list(weight.shape)}, input {list(input.shape)}")
    loss = loss * weight
    return loss.sum() / weight.sum() if reduction == "mean" else _reduce(loss, reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_same_size("mse_loss", input, target)
    d = input - target
    return _reduce_weighted("mse_loss", d * d, weight, input, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_same_size("l1_loss", input, target)
    return _reduce_weighted("l1_loss", plugtorch.abs(input - target), weight, input, reduction)


# -- classification ------------------------------------------------------------------

def _class_dim(op, input, target):
    """The class dimension of ``input`` (0 for a single unbatched sample, else 1), checking
    that ``target`` has the matching batch/spatial shape."""
    if input.ndim == 0:
        raise ValueError(f"{op}: input must have at least 1 dimension (the classes), got a 0-d tensor")
    if input.ndim == 1:
        if target.ndim != 0:
            raise ValueError(
                f"{op}: for an unbatched input of shape {list(input.shape)} the class-index target "
                f"must be 0-d, got shape {list(target.shape)}"
            )
        return 0
    if target.shape[:1] != input.shape[:1]:
        raise ValueError(
            f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
            f"({target.shape[0] if target.ndim else 'a 0-d target'})."
        )
    expected = (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        raise RuntimeError(
            f"{op}: expected target of shape {list(expected)} for input of shape "
            f"{list(input.shape)} (N, C, d1, ...), got {list(target.shape)}"
        )
    return 1


def _check_targets(op, target, n_classes, ignore_index):
    if target.dtype.is_floating_point or target.dtype is plugtorch.bool:
        raise RuntimeError(
            f"{op}: expected class-index target of an integer dtype (plugtorch.int64), got "
            f"{target.dtype.name}; for class probabilities pass a floating target of the input's shape"
        )
    if target.numel():
        bad = ((target < 0) | (target >= n_classes)) & (target != ignore_index)
        if bool(bad.sum() > 0):
            first = int(target[bad][0])
            raise IndexError(
                f"{op}: Target {first} is out of bounds for {n_classes} classes (valid: 0..{n_classes - 1}"
                f", or ignore_index={ignore_index})"
            )


def _check_weight(op, weight, n_classes):
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != n_classes):
        raise RuntimeError(
            f"{op}: weight tensor should be defined either for all {n_classes} classes or no "
            f"classes but got weight tensor of shape: {list(weight.shape)}"
        )


def _nll_parts(input, target, weight, ignore_index, class_dim):
    """Per-element ``-w[t] * input[t]`` (0 where ignored) and the weights ``w[t]`` used."""
    target = target.to(plugtorch.int64)
    valid = target != ignore_index
    safe = plugtorch.where(valid, target, 0)
    picked = plugtorch.gather(input, class_dim, safe.unsqueeze(class_dim)).squeeze(class_dim)
    w = valid.to(input.dtype)
    if weight is not None:
        w = w * weight[safe]
    return -(picked * w), w


def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean"):
    """Negative log-likelihood of class indices ``target`` under log-probabilities ``input``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    class_dim = _class_dim("nll_loss", input, target)
    n_classes = input.shape[class_dim]
    _check_targets("nll_loss", target, n_classes, ignore_index)
    _check_weight("nll_loss", weight, n_classes)
    loss, w = _nll_parts(input, target, weight, ignore_index, class_dim)
    if reduction == "mean":
        return loss.sum() / w.sum()
    return _reduce(loss, reduction)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index: int = -100,
                  reduce=None, reduction: str = "mean", label_smoothing: float = 0.0):
    """Cross-entropy between logits ``input`` (N, C, *) and ``target``.

    ``target`` holds class indices (N, *) or class probabilities (N, C, *).
    ``label_smoothing`` mixes the target with the uniform distribution.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if not isinstance(input, Tensor) or not isinstance(target, Tensor):
        raise TypeError("cross_entropy(): input and target must be Tensors")
    class_dim = 0 if input.ndim == 1 else 1
    if input.ndim == 0:
        raise ValueError("cross_entropy: input must have at least 1 dimension (the classes)")
    n_classes = input.shape[class_dim]
    _check_weight("cross_entropy", weight, n_classes)
    probabilities = target.dtype.is_floating_point
    if probabilities:
        if target.shape != input.shape:
            raise RuntimeError(
                f"cross_entropy: class-probability target must have the input's shape "
                f"{list(input.shape)}, got {list(target.shape)}; for class indices pass an int64 target"
            )
        if ignore_index >= 0:
            raise RuntimeError("ignore_index is not supported for floating point target")
    else:
        _class_dim("cross_entropy", input, target)
        _check_targets("cross_entropy", target, n_classes, ignore_index)
    logp = plugtorch.log_softmax(input, class_dim)
    wshape = [1] * input.ndim
    wshape[class_dim] = n_classes

    if probabilities:
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / n_classes
        lw = logp if weight is None else logp * weight.reshape(wshape)
        loss = -(lw * target).sum(class_dim)
        if reduction == "mean":
            return loss.sum() / (input.numel() // n_classes if input.numel() else 1)
        return _reduce(loss, reduction)

    nll, w = _nll_parts(logp, target, weight, ignore_index, class_dim)
    nll_red = nll.sum() / w.sum() if reduction == "mean" else _reduce(nll, reduction)
    if label_smoothing == 0.0:
        return nll_red
    valid = (target != ignore_index).to(logp.dtype)
    lw = logp if weight is None else logp * weight.reshape(wshape)
    smooth = -lw.sum(class_dim) * valid
    if reduction == "mean":
        smooth = smooth.sum() / (w.sum() if weight is not None else valid.sum())
    else:
        smooth = _reduce(smooth, reduction)
    return (1 - label_smoothing) * nll_red + smooth * (label_smoothing / n_classes)


# -- binary ----------------------------------------------------------------------------

def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction: str = "mean"):
    """BCE on probabilities; each log is clamped at -100 (torch's guard against log(0))."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if target.shape != input.shape:
        raise ValueError(
            f"Using a target size ({target.shape}) that is different to the input size "
            f"({input.shape}) is deprecated. Please ensure they have the same size."
        )
    if input.numel() and bool(((input < 0) | (input > 1)).sum() > 0):
        raise RuntimeError(
            "binary_cross_entropy: all elements of input should be between 0 and 1; apply "
            "sigmoid first, or use binary_cross_entropy_with_logits on the raw scores"
        )
    loss = _BinaryCrossEntropy.apply(input, target)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


class _BinaryCrossEntropy(Function):
    """Elementwise BCE with torch's derivative, which stays finite at p = 0 and p = 1
    (differentiating the clamped logs would give 0/0 there)."""

    @staticmethod
    def forward(ctx, p, t):
        ctx.save_for_backward(p, t)
        log_p = plugtorch.clamp(plugtorch.log(p), min=-100.0)
        log_q = plugtorch.clamp(plugtorch.log(1 - p), min=-100.0)
        return -(t * log_p + (1 - t) * log_q)

    @staticmethod
    def backward(ctx, g):
        p, t = ctx.saved_tensors
        grad_p = grad_t = None
        if ctx.needs_input_grad[0]:
            grad_p = g * (p - t) / plugtorch.clamp((1 - p) * p, min=1e-12)
        if ctx.needs_input_grad[1]:
            grad_t = g * (plugtorch.log(1 - p) - plugtorch.log(p))  # unclamped, as torch's
        return grad_p, grad_t


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction: str = "mean", pos_weight=None):
    """BCE on logits, computed as softplus terms so large |input| never overflows.

    ``pos_weight`` scales the positive term: ``-[p * t * log σ(x) + (1 - t) * log(1 - σ(x))]``.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if target.shape != input.shape:
        raise ValueError(
            f"Target size ({target.shape}) must be the same as input size ({input.shape})"
        )
    # -log σ(x) = softplus(-x), computed without overflow and with the exact derivative -σ(-x)
    sp_neg = _act.softplus(-input)
    if pos_weight is not None:
        log_weight = (pos_weight - 1) * target + 1
        loss = (1 - target) * input + log_weight * sp_neg
    else:
        loss = (1 - target) * input + sp_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)
