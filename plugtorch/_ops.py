"""plugtorch's tensor functions (``plugtorch.exp``, ``plugtorch.zeros``, ...), bound from the op table.

Type checkers and IDEs read their signatures from ``_ops.pyi``, generated from the same
declarations (``python -m plugtorch.core.stubs``).
"""
from .core import api as _api
from .core import tensor_methods as _tensor_methods  # noqa: F401  (binds the Tensor methods)

__all__ = _api.bind_module(globals(), "plugtorch")
