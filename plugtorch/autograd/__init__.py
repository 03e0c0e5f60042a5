"""plugtorch.autograd: gradients, gradient checks, custom Functions, anomaly detection."""
from __future__ import annotations

import contextlib

from ..core import anomaly as _anomaly
from ..core.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from . import forward_ad, profiler  # profiler imports plugtorch.profiler too, which binds it as plugtorch.profiler
from .function import Function, FunctionCtx
from .functional import backward, grad
from .gradcheck import GradcheckError, gradcheck, gradgradcheck

__all__ = ["backward", "grad", "gradcheck", "gradgradcheck", "GradcheckError", "Function",
           "FunctionCtx", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
           "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "profiler", "forward_ad"]


def set_detect_anomaly(mode: bool) -> None:
    """Record where each op was created; the first NaN/Inf gradient raises, naming that place."""
    _anomaly.set_enabled(mode)


def is_anomaly_enabled() -> bool:
    return _anomaly.is_enabled()


@contextlib.contextmanager
def detect_anomaly(check_nan: bool = True):
    prev = _anomaly.is_enabled()
    _anomaly.set_enabled(check_nan)
    try:
        yield
    finally:
        _anomaly.set_enabled(prev)
