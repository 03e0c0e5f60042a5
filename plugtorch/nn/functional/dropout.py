"""Dropout with an explicit generator, built on public tensor ops."""
from __future__ import annotations

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
    return _channel_dropout("dropout1d", 3, input, p, training, inplace, generator)


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False, generator=None):
    return _channel_dropout("dropout2d", 4, input, p, training, inplace, generator)


def _channel_dropout(name, batched_ndim, input, p, training, inplace, generator):
    """Drop whole channels: one draw per (sample, channel), broadcast over the rest."""
    _check_p(p)
    if input.ndim not in (batched_ndim - 1, batched_ndim):
        raise RuntimeError(
            f"{name}: Expected {batched_ndim - 1}D or {batched_ndim}D input, but received a "
            f"{input.ndim}D input of shape {list(input.shape)}"
        )
    if not training or p == 0.0:
        return input
    lead = input.ndim - (batched_ndim - 2)
    mask_shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)

    def drop(x, p, generator):
        if p == 1.0:
            return x * 0.0
        keep = plugtorch.rand(mask_shape, generator=generator, dtype=x.dtype, device=x.device) >= p
        return x * (keep.to(x.dtype) * (1.0 / (1.0 - p)))
    if inplace:
        return _inplace(drop, name + "_")(input, p, generator)
    return drop(input, p, generator)
