"""``Flatten`` and ``Unflatten``: reshape a range of dims into one, and back."""
from __future__ import annotations

from .module import Module


class Flatten(Module):
    """Flatten dims ``start_dim..end_dim`` (default: all but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size``."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        if not isinstance(dim, int):
            raise TypeError(f"invalid argument type for dim parameter: {type(dim).__name__}; "
                            "expected int")
        if not isinstance(unflattened_size, (tuple, list)) or not all(
                isinstance(s, int) for s in unflattened_size):
            raise TypeError("unflattened_size must be a tuple of ints, "
                            f"but found {unflattened_size!r}")
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
