"""Dropout with an explicit generator, built on public tensor ops."""
from __future__ import annotations

import warnings

import plugtorch

from ...core.ops.inplace import inplace as _inplace


def _check_p(p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropout(input, p, generator):
    if p == 1.0:
        return input * 0.0
    keep = plugtorch.rand(input.shape, generator=generator, dtype=input.dtype,
                          device=input.device) >= p
    return input * (keep.to(input.dtype) * (1.0 / (1.0 - p)))


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False, generator=None):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    Identity when not ``training`` or ``p == 0``. ``generator`` (a plugtorch.Generator)
    makes the mask reproducible independently of the global seed.
    """
    _check_p(p)
    if not training or p == 0.0:
        return input
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"dropout(): expected a floating point input, got {input.dtype.name}")
    if inplace:
        return _inplace(_dropout, "dropout_")(input, p, generator)
    return _dropout(input, p, generator)


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False, generator=None):
    """Zero whole channels of (N, C, L) or (C, L) input (one draw per channel)."""
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that dropout1d "
            "exists to provide channel-wise dropout on inputs with 1 spatial dimension, a channel "
            "dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _feature_dropout("dropout1d", input, p, training, inplace, generator, 2 if input.ndim == 3 else 1)


def _deprecated_rank(name, input, spatial):
    """torch's warning for a rank its channel dropout keeps only for old scripts."""
    warnings.warn(
        f"{name}: Received a {input.ndim}-D input to {name}, which is deprecated and will result in an "
        "error in a future release. To retain the behavior and silence this warning, please use dropout "
        f"instead. Note that {name} exists to provide channel-wise dropout on inputs with {spatial} spatial "
        "dimensions, a channel dimension, and an optional batch dimension (i.e. "
        f"{spatial + 1}D or {spatial + 2}D inputs).", UserWarning, stacklevel=3)


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False, generator=None):
    """Zero whole channels of (N, C, H, W) input (one draw per sample and channel).

    Other ranks as torch 2.13 treats them, with its warnings: the mask always spans the first
    two dims, so a 3-D input is taken as (N, C, L) (dropout1d's behaviour, not an unbatched
    (C, H, W)), a 2-D one is dropped element by element, a 5-D one per (dim 0, dim 1) pair.
    """
    _check_p(p)
    if input.ndim not in (3, 4):
        _deprecated_rank("dropout2d", input, 2)
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior "
            "is desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior "
            "will change in a future release to interpret the input as one without a batch dimension, i.e. "
            "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using "
            "dropout1d instead.", UserWarning, stacklevel=2)
    return _feature_dropout("dropout2d", input, p, training, inplace, generator, 2)


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False, generator=None):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) input.

    Other ranks as torch 2.13 treats them, with its warning: anything but 5-D is taken as
    unbatched, its first dim the channels.
    """
    _check_p(p)
    if input.ndim not in (4, 5):
        _deprecated_rank("dropout3d", input, 3)
    return _feature_dropout("dropout3d", input, p, training, inplace, generator, 2 if input.ndim == 5 else 1)


def _feature_dropout(name, input, p, training, inplace, generator, lead):
    """Drop whole channels: one draw per index of the first ``lead`` dims, broadcast over the rest
    (torch's feature_dropout on the input, batched by an unsqueeze where ``lead`` is 1)."""
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if input.ndim + (2 - lead) < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{name}(): expected a floating point input, got {input.dtype.name}")
    mask_shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)

    def drop(x, p, generator):
        if p == 1.0:
            return x * 0.0
        keep = plugtorch.rand(mask_shape, generator=generator, dtype=x.dtype, device=x.device) >= p
        return x * (keep.to(x.dtype) * (1.0 / (1.0 - p)))
    if inplace:
        return _inplace(drop, name + "_")(input, p, generator)
    return drop(input, p, generator)
