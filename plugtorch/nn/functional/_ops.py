"""The ops exposed as ``nn.functional.*`` (conv2d, softmax, gelu, ...), bound from the op table.

Type checkers read their signatures from ``_ops.pyi`` (``python -m plugtorch.core.stubs``).
"""
from ...core import api as _api

__all__ = _api.bind_module(globals(), "nn.functional")
