"""``plugtorch.backends.cudnn``: cuDNN comes with a CUDA backend; its switches are kept for them."""
from __future__ import annotations

from ..cuda import is_available as _cuda_available

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """Whether a CUDA backend (whose convolutions cuDNN would serve) is registered."""
    return _cuda_available()


def version() -> int | None:
    return None
