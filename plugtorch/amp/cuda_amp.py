"""``plugtorch.cuda.amp``: torch.cuda.amp's spellings of ``plugtorch.amp`` with device "cuda"."""
from __future__ import annotations

import functools

from ..core.dtypes import float16
from . import GradScaler as _GradScaler
from . import autocast as _autocast
from . import custom_bwd as _custom_bwd
from . import custom_fwd as _custom_fwd

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


class autocast(_autocast):
    """``plugtorch.cuda.amp.autocast(args...)`` is ``plugtorch.autocast("cuda", args...)``."""

    def __init__(self, enabled: bool = True, dtype=float16, cache_enabled: bool = True):
        super().__init__("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """``plugtorch.cuda.amp.GradScaler(args...)`` is ``plugtorch.amp.GradScaler("cuda", args...)``."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``plugtorch.amp.custom_fwd(device_type="cuda")``."""
    if fwd is None:
        return functools.partial(custom_fwd, cast_inputs=cast_inputs)
    return _custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """``plugtorch.amp.custom_bwd(device_type="cuda")``."""
    if bwd is None:
        return functools.partial(custom_bwd)
    return _custom_bwd(bwd, device_type="cuda")
