"""torch.distributed.GradBucket: what a DDP communication hook receives."""
from __future__ import annotations

__all__ = ["GradBucket"]


class GradBucket:
    """One bucket of gradients: a flat ``buffer()`` and each parameter's view of it.

    A communication hook reduces ``buffer()`` across ranks and returns a Future whose
    value is a tensor of the buffer's size (the buffer itself, or a new tensor).
    """

    __slots__ = ("_index", "_buffer", "_gradients", "_parameters", "_is_last")

    def __init__(self, index: int, buffer, gradients: list, parameters: list, is_last: bool):
        self._index, self._buffer, self._gradients = index, buffer, gradients
        self._parameters, self._is_last = parameters, is_last

    def index(self) -> int:
        """The bucket's position; bucket 0 holds the last parameters and is reduced first."""
        return self._index

    def buffer(self):
        """The flat 1-D tensor of this bucket's gradients."""
        return self._buffer

    def set_buffer(self, buffer) -> None:
        self._buffer = buffer

    def gradients(self) -> list:
        """Each parameter's gradient, as a view of ``buffer()``."""
        return self._gradients

    def parameters(self) -> list:
        return self._parameters

    def is_last(self) -> bool:
        """Whether this is the last bucket of the iteration to be reduced."""
        return self._is_last

    def __repr__(self) -> str:
        return f"<GradBucket {self._index}: {len(self._parameters)} parameters, {self._buffer.numel()} elements>"
