"""``Parameter``: a tensor that a Module registers as one of its learnable weights."""
from __future__ import annotations

from ..core.tensor import Tensor


class Parameter(Tensor):
    """A leaf tensor that requires grad and registers itself when assigned to a Module attribute.

    It shares memory with ``data`` (like torch's), so ``Parameter(t)`` does not copy.
    """

    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            from ..core.ops.creation import empty
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(
                f"Parameter(): data must be a Tensor, got {type(data).__name__}; "
                "wrap it with plugtorch.tensor(...) first"
            )
        p = data.detach()._as_subclass(cls)
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        p = Parameter(self.detach().clone(), self.requires_grad)
        if self.grad is not None:
            p.grad = self.grad.detach().clone()
        memo[id(self)] = p
        return p


class Buffer(Tensor):
    """Marks a tensor to be registered as a buffer when assigned to a Module attribute.

    Assigning ``module.name = Buffer(t)`` registers the plain tensor ``t`` (not the
    marker) with ``persistent`` saying whether it goes into ``state_dict``.
    """

    __slots__ = ("persistent",)

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            from ..core.ops.creation import empty
            data = empty(0)
        b = data.detach()._as_subclass(cls)
        b.persistent = persistent
        return b
