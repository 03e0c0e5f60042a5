"""Utilities around the core: data loading (``plugtorch.utils.data``), activation checkpointing
(``plugtorch.utils.checkpoint``)."""
from . import checkpoint, data

__all__ = ["checkpoint", "data"]
