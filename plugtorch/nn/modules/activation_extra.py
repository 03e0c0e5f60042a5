"""``Softmin`` and ``GLU``: activation layers over a dimension.

Kept beside ``activation.py`` (the elementwise activations) because they were added by
another change than that file's; torch has them in one module, and so may we.
"""
from __future__ import annotations

from .. import functional as F
from .module import Module


class Softmin(Module):
    """softmax(-x) along ``dim``."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class GLU(Module):
    """Gated linear unit: the first half of ``dim`` times the sigmoid of the second."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
