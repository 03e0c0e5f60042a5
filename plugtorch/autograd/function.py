"""User-defined differentiable ops: ``class MyOp(Function)`` with static forward/backward."""
from __future__ import annotations

from ..core.dispatch import record
from ..core.opdef import OpDef
from ..core.grad_mode import _state as _grad_state, no_grad
from ..core.tensor import Tensor


class FunctionCtx:
    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self._saved = ()
        self.non_differentiable = set()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self._saved = tensors

    @property
    def saved_tensors(self):
        return self._saved

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        pass  # in-place outputs need no extra bookkeeping: outputs get fresh graph nodes

    def set_materialize_grads(self, value: bool):
        self.materialize_grads = value


class Function:
    """Subclass with ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)`` static methods."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        tensor_pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx = FunctionCtx(needs)
        with no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        if not (_grad_state.enabled and any(needs)):
            return out
        if not isinstance(out, Tensor):
            raise TypeError(
                f"{cls.__name__}.forward returned {type(out).__name__}; plugtorch's autograd.Function "
                "supports a single Tensor output. Return one tensor, or split the op into several Functions."
            )
        if id(out) in ctx.non_differentiable:
            return out
        if any(out is args[i] for i in tensor_pos):
            out = out.detach()  # a returned input becomes a new graph output, as in torch
        tensors = tuple(args[i] for i in tensor_pos)
        n_args = len(args)

        def rule(node, g, ctx=ctx, tensor_pos=tensor_pos):
            grads = cls.backward(ctx, g)
            if not isinstance(grads, tuple):
                grads = (grads,)
            if len(grads) != n_args:
                raise RuntimeError(
                    f"function {cls.__name__}Backward returned an incorrect number of gradients "
                    f"(expected {n_args}, got {len(grads)})"
                )
            return tuple(grads[i] for i in tensor_pos)

        record(out, OpDef(cls.__name__, derivative=rule), tensors)
        return out
