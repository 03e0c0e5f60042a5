"""User-defined differentiable ops: ``class MyOp(Function)`` with static forward/backward, as torch's.

The ``ctx`` a Function's ``forward`` and ``backward`` receive is its graph node: an instance of
``<Name>Backward``, a subclass of :class:`FunctionCtx`, itself a subclass of the engine's
:class:`~plugtorch.core.graph.Node`. So ``ctx.needs_input_grad``, ``ctx.saved_tensors``, the
version check of saved tensors and the freeing of the graph after backward are the very code
built-in derivative rules use; ``ctx.attrs`` is the dict of attributes the Function set on ctx.

Outputs: exactly one differentiable output gets ``ctx`` itself as ``grad_fn``; several get one
:class:`~plugtorch.core.graph.OutputNode` each, through which the engine hands ``ctx`` the list
of per-output gradients.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from ..core import anomaly
from ..core.dispatch import _saved_output, as_result_of, edge
from ..core.grad_mode import _state as _grad_state
from ..core.grad_mode import no_grad
from ..core.graph import Node, OutputNode
from ..core.optable import MODES
from ..core.tensor import Tensor
from . import forward_ad

__all__ = ["Function", "FunctionCtx", "once_differentiable"]


class FunctionCtx(Node):
    """The context (and graph node) of one ``Function.apply`` call."""

    # "__dict__" lets a Function keep anything on ctx (ctx.scale = ...), as in torch.
    __slots__ = ("n_outputs", "_to_save", "_dirty", "_non_differentiable", "_materialize",
                 "_outputs", "_single", "_for_forward", "_saved_outputs", "__dict__")
    n_outputs: int
    _to_save: tuple[Tensor | None, ...]
    _dirty: tuple[Tensor, ...]
    _non_differentiable: tuple[Tensor, ...]
    _materialize: bool
    _outputs: tuple[tuple[Any, Any, Any] | None, ...]
    _single: int | None
    _forward_cls: type[Function] | None = None  # the Function this node runs the backward of (set per subclass)

    def __init__(self, inputs: tuple = ()) -> None:
        edges: list[Node | None] = []
        meta: list[tuple[Any, Any] | None] = []
        for x in inputs:
            if isinstance(x, Tensor):
                edges.append(edge(x))
                meta.append((x._data.shape, x.dtype))
            else:
                edges.append(None)
                meta.append(None)
        name = self._forward_cls.__name__ if self._forward_cls is not None else "Function"
        super().__init__(name, _function_rule, tuple(edges), tuple(meta), None, None, self.__dict__)
        self.n_outputs = 0
        self._to_save = ()
        self._dirty = ()
        self._non_differentiable = ()
        self._materialize = True
        self._outputs = ()   # per forward output: (shape, dtype, backend) of a tensor, else None
        self._single = None  # index of the one differentiable output, when there is one
        self._for_forward: tuple = ()
        self._saved_outputs: tuple = ()  # (position in saved, output index, weakref to its grad_fn)

    @property
    def output(self) -> Any:
        """A Function's ``ctx.output`` is an attribute like any other it sets (torch's ctx has no
        output of its own): the engine's saved output (``Node.output``) is not a Function's."""
        try:
            return self.__dict__["output"]
        except KeyError:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute 'output'") from None

    @output.setter
    def output(self, value: Any) -> None:
        self.__dict__["output"] = value

    @property
    def saved_tensors(self) -> tuple:
        """What ``save_for_backward`` kept. An output kept there is an alias without ``grad_fn``
        (``_wrap_outputs``); read while grad mode is on (a backward under ``create_graph``), it is
        the output again, so a gradient of what backward computes from it reaches this node."""
        saved = Node.saved_tensors.fget(self)  # type: ignore[attr-defined]
        if not self._saved_outputs or not _grad_state.enabled:
            return saved
        saved = list(saved)
        for pos, index, ref in self._saved_outputs:
            fn = ref() if ref is not None else self
            saved[pos] = as_result_of(saved[pos], fn if fn is not None else OutputNode(self, index))
        return tuple(saved)

    def saved_name(self, i: int) -> str:
        return f"saved tensor {i}"

    # -- torch's ctx API -------------------------------------------------------------------
    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Keep ``tensors`` (or None) for backward, where ``ctx.saved_tensors`` returns them after
        checking that no in-place op modified them since."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {i} is of "
                                f"type {type(t).__name__}")
        self._to_save = tensors

    def save_for_forward(self, *tensors: Tensor | None) -> None:
        """Keep ``tensors`` for ``jvp`` (forward-mode AD), where ``ctx.saved_tensors`` returns them."""
        self._for_forward = tensors

    def mark_dirty(self, *tensors: Tensor) -> None:
        """Say that forward modified these inputs in place (and returns them)."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        """These outputs do not require grad; their gradient in backward is zeros (or None)."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """False: backward gets None, not zeros, for outputs that received no gradient."""
        self._materialize = bool(value)

    # -- what apply does after forward -----------------------------------------------------
    def _wrap_outputs(self, inputs, out, recording: bool):
        """torch's rules for a Function's outputs: returned inputs, dirty, non-differentiable."""
        is_tuple = type(out) is tuple
        outs = list(out) if is_tuple else [out]
        input_ids = {id(x) for x in inputs if isinstance(x, Tensor)}
        dirty = {id(t) for t in self._dirty}
        if dirty - input_ids:
            warnings.warn("ctx.mark_dirty() received a tensor that was not an input. Only input "
                          "Tensors that have been mutated should be passed to ctx.mark_dirty().",
                          stacklevel=3)
        if dirty - {id(o) for o in outs}:
            raise RuntimeError(
                "Some elements marked as dirty during the forward method were not returned as "
                "output. The inputs that are modified inplace must all be outputs of the Function.")
        if recording:
            for t in self._dirty:
                if t.grad_fn is None and t.requires_grad:
                    raise RuntimeError(
                        "a leaf Variable that requires grad has been used in an in-place operation.")
        for t in self._dirty:
            t._vc[0] += 1
        non_diff = {id(t) for t in self._non_differentiable}
        diff = []
        metas: list[tuple[Any, Any, Any] | None] = []
        for i, t in enumerate(outs):
            if not isinstance(t, Tensor):
                metas.append(None)
                continue
            differentiable = recording and id(t) not in non_diff and t.dtype.is_floating_point
            if id(t) in input_ids and not (differentiable and id(t) in dirty):
                # An input returned as it is (and not rebased as a dirty one) becomes a new tensor
                # on the same memory and version counter, as torch's view of it: the caller's
                # tensor keeps its history. Other outputs are rebased in place, as in torch.
                t = outs[i] = t.detach()
            metas.append((t.shape, t.dtype, t.backend))
            if differentiable:
                diff.append(i)
        self._outputs = tuple(metas)
        self.n_outputs = len(outs)
        if diff:
            if len(diff) == 1:
                self._single = diff[0]
                outs[diff[0]].grad_fn = self
                outs[diff[0]].requires_grad = True
            else:
                for i in diff:
                    outs[i].grad_fn = OutputNode(self, i)
                    outs[i].requires_grad = True
            saved = self.saved = self._saved_without_outputs(self._to_save, outs, diff)
            if any(t is not None for t in saved):
                # taken after the dirty inputs' bumps: the versions backward must still find
                self.versions = tuple(None if t is None else t._vc[0] for t in saved)
            if anomaly._state.enabled:
                self.trace = anomaly.creation_trace()
        # `saved` holds what backward needs (and is dropped after it); keep no other reference
        self._to_save = self._dirty = self._non_differentiable = ()
        return tuple(outs) if is_tuple else outs[0]


    def _saved_without_outputs(self, to_save: tuple, outs: list, diff: list) -> tuple:
        """``to_save`` with each differentiable output replaced by an alias without ``grad_fn``, as
        torch's SavedVariable keeps an output: the output itself would hold this node, which holds
        it (a cycle only the garbage collector frees). Under forward AD the output itself, whose
        tangent the mode keeps by the tensor object (``DispatchMode.keeps_outputs``)."""
        if MODES.keep_outputs:
            return to_save
        index_of = {id(outs[i]): i for i in diff if type(outs[i]) is Tensor}
        kept, aliases = list(to_save), []
        for pos, t in enumerate(to_save):
            i = index_of.get(id(t)) if t is not None else None
            if i is not None:
                fn = t.grad_fn
                aliases.append((pos, i, None if fn is self else weakref.ref(fn)))
                kept[pos] = _saved_output(t)
        self._saved_outputs = tuple(aliases)
        return tuple(kept) if aliases else to_save


def _function_rule(ctx, g):
    """The engine's rule for a Function node: one gradient per output in, one per input out."""
    cls = ctx._forward_cls
    if ctx._single is None:
        grads = g  # the engine's list of per-output gradients
    else:
        grads = [None] * ctx.n_outputs
        grads[ctx._single] = g
    if ctx._materialize:
        from ..core.ops.creation import zeros
        for i, m in enumerate(ctx._outputs):
            if grads[i] is None and m is not None:
                grads[i] = zeros(m[0], dtype=m[1], device=m[2])
    result = cls.backward(ctx, *grads)
    if type(result) is not tuple:
        result = (result,)
    n = len(ctx.next)
    if len(result) != n:
        if len(result) > n and all(r is None for r in result[n:]):
            result = result[:n]
        else:
            raise RuntimeError(f"function {ctx.name()} returned an incorrect number of gradients "
                               f"(expected {n}, got {len(result)})")
    for i, (r, m) in enumerate(zip(result, ctx.meta)):
        if r is None:
            continue
        if not isinstance(r, Tensor):
            raise RuntimeError(f"expected Variable or None (got {type(r).__name__})")
        if m is None:
            raise RuntimeError(
                f"function {ctx.name()} returned a gradient different than None at position "
                f"{i + 1}, but the corresponding forward input was not a Variable")
    return result


class Function:
    """Subclass with ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)`` static methods
    (or ``forward(*args)`` plus ``setup_context(ctx, inputs, output)``), then call ``apply``."""

    _backward_cls: type[FunctionCtx]  # made per subclass (and for Function itself, below)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # torch names the node after the Function: MyOp -> MyOpBackward
        cls._backward_cls = type(cls.__name__ + "Backward", (FunctionCtx,),
                                 {"__slots__": (), "_forward_cls": cls})
        if cls.backward is Function.backward and cls.vjp is not Function.vjp:
            cls.backward = staticmethod(cls.vjp)  # type: ignore[method-assign]  # torch's alias, per subclass

    @staticmethod
    def forward(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Any) -> Any:
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward  # torch's alias: a Function may write either

    @staticmethod
    def jvp(ctx: Any, *grad_inputs: Any) -> Any:
        raise NotImplementedError("You must implement the jvp function for custom autograd.Function to use it "
                                  "with forward mode AD.")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        setup = cls.setup_context is not Function.setup_context
        if setup:  # torch binds the arguments (defaults included) when forward takes no ctx
            bound = inspect.signature(cls.forward).bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = bound.args, bound.kwargs
        inputs = args + tuple(kwargs.values()) if kwargs else args
        ctx = cls._backward_cls(inputs)
        # under forward-mode AD, a dual input's tangent reaches the outputs through the Function's
        # jvp, as in torch, not through the ops its forward happens to run (with the level off)
        level = forward_ad._current if MODES.on else None
        if level is not None and all(level.get(x) is None for x in inputs):
            level = None
        with no_grad(), (level.suspended() if level is not None else contextlib.nullcontext()):
            if setup:
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        recording = _grad_state.enabled and any(n is not None for n in ctx.next)
        result = ctx._wrap_outputs(inputs, out, recording)
        if level is not None:
            level.function_tangents(cls, ctx, inputs, result)
        return result


Function._backward_cls = type("FunctionBackward", (FunctionCtx,), {"__slots__": (), "_forward_cls": Function})


def once_differentiable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a ``backward`` that is not differentiable itself: it runs under no_grad, and
    differentiating its result (create_graph=True, then backward again) raises."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            outputs = fn(ctx, *args)
        if not _grad_state.enabled:
            return outputs
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            return outputs
        single = not isinstance(outputs, tuple)
        wrapped = tuple(_delayed_error(o) for o in ((outputs,) if single else outputs))
        return wrapped[0] if single else wrapped
    return wrapper


def _raise_twice(ctx, g):
    raise RuntimeError("trying to differentiate twice a function that was marked with @once_differentiable")


def _delayed_error(t):
    """``t`` again, as a tensor whose own backward raises (torch's DelayedError node)."""
    if not isinstance(t, Tensor) or not t.dtype.is_floating_point:
        return t
    t = t.detach()
    t.grad_fn = Node("error", _raise_twice, (), (), None, None, {})
    t.requires_grad = True
    return t
