"""``plugtorch.amp``: automatic mixed precision, as ``torch.amp``.

:class:`autocast` runs the ops of a region in lower precision where torch's policy says they
may (``autocast_mode``); :class:`GradScaler` scales the loss so float16 gradients keep their
small values (``grad_scaler``); :func:`custom_fwd` / :func:`custom_bwd` make an
``autograd.Function`` behave under autocast as torch's do. docs/amp.md shows them together.
"""
from __future__ import annotations

import functools
from typing import Any

from .autocast_mode import (
    autocast,
    clear_autocast_cache,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_cache_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_dtype,
)
from .grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd", "is_autocast_available", "is_autocast_enabled",
           "get_autocast_dtype", "set_autocast_dtype", "is_autocast_cache_enabled", "set_autocast_cache_enabled",
           "clear_autocast_cache"]


def _cast_floats(value: Any, dtype, device_type: str) -> Any:
    from ..core.tensor import Tensor
    if isinstance(value, Tensor):
        on_device = value.is_cuda if device_type == "cuda" else not value.is_cuda
        return value.to(dtype) if on_device and value.is_floating_point() and value.dtype.name != "float64" else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_floats(v, dtype, device_type) for v in value)
    if isinstance(value, dict):
        return {k: _cast_floats(v, dtype, device_type) for k, v in value.items()}
    return value


def custom_fwd(fwd=None, *, device_type: str, cast_inputs=None):
    """Decorator for an ``autograd.Function``'s ``forward``: with ``cast_inputs`` (a dtype), inside
    an autocast region of ``device_type`` the floating tensor arguments are cast to it and forward
    runs with autocast off; without, forward runs as called and ``custom_bwd`` later runs backward
    in the autocast state forward saw."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        autocast_context = is_autocast_enabled(device_type)
        ctx._fwd_used_autocast = False
        if autocast_context:
            with autocast(device_type=device_type, enabled=False):
                return fwd(*_cast_floats(args, cast_inputs, device_type),
                           **_cast_floats(kwargs, cast_inputs, device_type))
        return fwd(*args, **kwargs)
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str):
    """Decorator for an ``autograd.Function``'s ``backward``: it runs in the autocast state (on or
    off, and dtype) that its ``forward`` (decorated with :func:`custom_fwd`) ran in."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type=device_type, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd
