"""Padding layers: ``F.pad`` with a fixed mode and widths, in 1-D, 2-D and 3-D.

``padding`` is an int (every side) or a tuple in F.pad's order (last dim first: left,
right, top, bottom, front, back).
"""
from __future__ import annotations

from .. import functional as F
from .module import Module


class _PadNd(Module):
    _rank = 1
    _mode = "constant"

    def __init__(self, padding, value: float = 0.0):
        super().__init__()
        n = 2 * self._rank
        self.padding = (padding,) * n if isinstance(padding, int) else tuple(padding)
        if len(self.padding) != n:
            raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple of {n} ints, "
                             f"got {padding!r}")
        self.value = value

    def forward(self, input):
        if self._mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ReflectionPadNd(_PadNd):
    """Pad by reflecting about the edge (the edge itself is not repeated)."""
    _mode = "reflect"

    def __init__(self, padding):
        super().__init__(padding)


class ReflectionPad1d(_ReflectionPadNd):
    _rank = 1


class ReflectionPad2d(_ReflectionPadNd):
    _rank = 2


class ReflectionPad3d(_ReflectionPadNd):
    _rank = 3


class _ReplicationPadNd(_PadNd):
    """Pad by repeating the edge value."""
    _mode = "replicate"

    def __init__(self, padding):
        super().__init__(padding)


class ReplicationPad1d(_ReplicationPadNd):
    _rank = 1


class ReplicationPad2d(_ReplicationPadNd):
    _rank = 2


class ReplicationPad3d(_ReplicationPadNd):
    _rank = 3


class _CircularPadNd(_PadNd):
    """Pad by wrapping around (the far edge's values continue past the near one)."""
    _mode = "circular"

    def __init__(self, padding):
        super().__init__(padding)


class CircularPad1d(_CircularPadNd):
    _rank = 1


class CircularPad2d(_CircularPadNd):
    _rank = 2


class CircularPad3d(_CircularPadNd):
    _rank = 3


class _ConstantPadNd(_PadNd):
    """Pad with a constant ``value``."""

    def __init__(self, padding, value: float):
        super().__init__(padding, value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    _rank = 1


class ConstantPad2d(_ConstantPadNd):
    _rank = 2


class ConstantPad3d(_ConstantPadNd):
    _rank = 3


class _ZeroPadNd(_PadNd):
    """Pad with zeros."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ZeroPad1d(_ZeroPadNd):
    _rank = 1


class ZeroPad2d(_ZeroPadNd):
    _rank = 2


class ZeroPad3d(_ZeroPadNd):
    _rank = 3
