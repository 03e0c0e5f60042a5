"""``plugtorch.backends.mps``: Apple's Metal, present when a backend declares accelerator='mps'."""
from __future__ import annotations

from ..accelerator import accelerator_backend


def is_available() -> bool:
    return accelerator_backend("mps") is not None


def is_built() -> bool:
    return is_available()
