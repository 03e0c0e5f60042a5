"""``plugtorch.return_types``: the named tuples ops return (torch.return_types)."""
from __future__ import annotations

from . import _ops  # noqa: F401  (declares every op, and so every return type)
from .core.return_types import TYPES

globals().update(TYPES)
__all__ = sorted(TYPES)
