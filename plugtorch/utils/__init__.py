"""Utilities around the core: data loading (``plugtorch.utils.data``)."""
from . import data

__all__ = ["data"]
