"""``batch_norm`` and ``layer_norm``: standardise activations, then scale and shift."""
from __future__ import annotations

import plugtorch


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5):
    """Normalise each channel (dim 1) of ``input`` of shape (N, C, *).

    Training: batch statistics (biased variance) normalise, and the running
    statistics, when given, move towards the batch's (unbiased variance) by
    ``momentum``. Evaluation: the running statistics normalise.
    """
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected input of shape (N, C, *), got {list(input.shape)}")
    c = input.shape[1]
    shape = (1, c) + (1,) * (input.ndim - 2)
    axes = (0,) + tuple(range(2, input.ndim))
    if training:
        n = input.numel() // c
        if n <= 1:
            raise ValueError(
                f"Expected more than 1 value per channel when training, got input size {input.shape}"
            )
        mean = input.mean(axes)
        centred = input - mean.reshape(shape)
        var = (centred * centred).mean(axes)
        if running_mean is not None or running_var is not None:
            with plugtorch.no_grad():
                if running_mean is not None:
                    running_mean.mul_(1 - momentum).add_(mean.detach() * momentum)
                if running_var is not None:
                    running_var.mul_(1 - momentum).add_(var.detach() * (momentum * n / (n - 1)))
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are required when not training")
        mean, var = running_mean, running_var
        centred = input - mean.reshape(shape)
    out = centred * plugtorch.rsqrt(var + eps).reshape(shape)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """Normalise over the trailing ``normalized_shape`` dims of ``input`` (biased variance)."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or tuple(input.shape[input.ndim - k:]) != normalized_shape or input.ndim < k:
        raise RuntimeError(
            f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
            f"[*, {', '.join(map(str, normalized_shape))}], but got input of size{list(input.shape)}"
        )
    axes = tuple(range(input.ndim - k, input.ndim))
    mean = input.mean(axes, keepdim=True)
    centred = input - mean
    var = (centred * centred).mean(axes, keepdim=True)
    out = centred * plugtorch.rsqrt(var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out
