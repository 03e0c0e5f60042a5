"""Activation checkpointing: ``checkpoint`` and ``checkpoint_sequential``, as torch's.

A checkpointed function runs its forward under ``no_grad``, so none of its intermediate
activations are kept; only its inputs (and the RNG state, so dropout draws the same masks
again) are saved. Backward runs the function again with grad enabled and backpropagates
through that recomputed graph.

Both ``use_reentrant`` variants are one :class:`~plugtorch.autograd.Function` whose backward
recomputes (plugtorch has no saved-tensor hooks, which torch's non-reentrant variant is built
on). ``use_reentrant=False`` adds what torch's non-reentrant variant offers on top of the
reentrant one: keyword arguments, ``context_fn``, and gradients for the parameters the
function uses even when none of its inputs requires grad. Differences from torch: gradients
of tensors the function reaches other than its inputs (parameters, captured tensors) are
accumulated into their graph by a nested ``backward`` even under ``autograd.grad``, and with
``use_reentrant=False`` the output requires grad whenever grad mode is on.
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import plugtorch

from ..autograd.function import Function
from ..core.grad_mode import enable_grad, is_grad_enabled, no_grad
from ..core.tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential", "noop_context_fn"]

_DETERMINISM_MODES = ("default", "none")


def noop_context_fn() -> tuple[contextlib.AbstractContextManager, contextlib.AbstractContextManager]:
    return contextlib.nullcontext(), contextlib.nullcontext()


def _flatten(out: Any) -> tuple[tuple, Callable[[tuple], Any]]:
    """The function's result as a flat tuple (for Function.apply) and how to rebuild it."""
    if isinstance(out, (tuple, list)):
        kind = type(out)
        make = getattr(kind, "_make", kind)  # a namedtuple is rebuilt from its fields
        return tuple(out), make
    return (out,), (lambda flat: flat[0])


def _metas(flat: tuple) -> list:
    return [(tuple(t.shape), t.dtype) if isinstance(t, Tensor) else None for t in flat]


class _Recompute(Function):
    """Forward: run ``fn`` without keeping activations; backward: run it again and backprop."""

    @staticmethod
    def forward(ctx, state: dict, *args: Any) -> Any:  # type: ignore[override]
        ctx.state = state
        if state["preserve"]:
            state["rng"] = plugtorch.get_rng_state()
        ctx.save_for_backward(*(a if isinstance(a, Tensor) else None for a in args))
        ctx.save_for_forward(*(a if isinstance(a, Tensor) else None for a in args))
        ctx.args = tuple(None if isinstance(a, Tensor) else a for a in args)
        forward_ctx, _ = state["context_fn"]()
        call = args[:-1] if state["dummy"] else args
        with forward_ctx:
            out = state["fn"](*call, **state["kwargs"])
        flat, state["rebuild"] = _flatten(out)
        state["metas"] = _metas(flat)
        return flat if isinstance(out, (tuple, list)) or state["dummy"] else out

    @staticmethod
    def jvp(ctx, _state: Any, *tangents: Any) -> Any:
        """Forward-mode AD: the function run again on dual tensors (with forward's random state)."""
        from plugtorch.autograd import forward_ad as fwad
        state = ctx.state
        args = [s if s is not None else a for s, a in zip(ctx.saved_tensors, ctx.args)]
        duals = [fwad.make_dual(a, t) if t is not None else a for a, t in zip(args, tangents)]
        here = plugtorch.get_rng_state() if state["preserve"] else None
        if state["preserve"]:
            plugtorch.set_rng_state(state["rng"])
        try:
            with no_grad():
                out = state["fn"](*(duals[:-1] if state["dummy"] else duals), **state["kwargs"])
        finally:
            if here is not None:
                plugtorch.set_rng_state(here)
        return tuple(fwad.unpack_dual(o).tangent if isinstance(o, Tensor) else None for o in _flatten(out)[0])

    @staticmethod
    def backward(ctx, *grads: Any) -> Any:
        state = ctx.state
        if is_grad_enabled():  # the engine runs backward with grad on only for create_graph=True
            raise RuntimeError("checkpoint: double backward (create_graph=True) through a checkpointed function "
                               "is not supported; differentiate the function without checkpoint to take "
                               "higher-order gradients")
        args = [s if s is not None else a for s, a in zip(ctx.saved_tensors, ctx.args)]
        detached = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a for a in args]
        here = plugtorch.get_rng_state() if state["preserve"] else None
        if state["preserve"]:
            plugtorch.set_rng_state(state["rng"])
        try:
            _, recompute_ctx = state["context_fn"]()
            with enable_grad(), recompute_ctx:
                out = state["fn"](*(detached[:-1] if state["dummy"] else detached), **state["kwargs"])
        finally:
            if here is not None:
                plugtorch.set_rng_state(here)
        flat, _ = _flatten(out)
        if state["determinism_check"] == "default" and _metas(flat) != state["metas"]:
            raise RuntimeError(
                "torch.utils.checkpoint: Recomputed values for the following tensors have different metadata "
                f"than during the forward pass.\nforward: {state['metas']}\nrecompute: {_metas(flat)}\n"
                "Make the checkpointed function deterministic in its output shapes and dtypes, or pass "
                "determinism_check='none'.")
        pairs = [(o, g) for o, g in zip(flat, grads)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if pairs:
            plugtorch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        elif not state["dummy"]:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        return (None, *(d.grad if isinstance(d, Tensor) else None for d in detached))


def checkpoint(function: Callable[..., Any], *args: Any, use_reentrant: bool | None = None,
               context_fn: Callable[[], tuple[Any, Any]] = noop_context_fn, determinism_check: str = "default",
               debug: bool = False, early_stop: bool = True, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` without keeping its activations: backward recomputes them."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting in "
            "PyTorch 2.9, calling checkpoint without use_reentrant will raise an exception. use_reentrant=False "
            "is recommended, but if you need to preserve the current default behavior, you can pass "
            "use_reentrant=True. Refer to docs for more details on the differences between the two variants.",
            stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if use_reentrant and (context_fn is not noop_context_fn or debug is not False):
        raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
    if determinism_check not in _DETERMINISM_MODES:
        raise ValueError(f"determinism_check should be one of {list(_DETERMINISM_MODES)}, but got "
                         f"{determinism_check}")
    if use_reentrant and is_grad_enabled() and not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)
    # The non-reentrant variant gives the function's parameters their gradients even when no
    # input requires grad: an empty input that does keeps the output attached to the graph.
    dummy = not use_reentrant and is_grad_enabled()
    state: dict[str, Any] = {"fn": function, "kwargs": kwargs, "preserve": bool(preserve),
                             "context_fn": context_fn, "dummy": dummy, "determinism_check": determinism_check}
    extra = (plugtorch.empty(0, requires_grad=True),) if dummy else ()
    out = _Recompute.apply(state, *args, *extra)
    if isinstance(out, tuple):
        return state["rebuild"](out)
    return out


def checkpoint_sequential(functions: Any, segments: int, input: Any, use_reentrant: bool | None = None,
                          **kwargs: Any) -> Any:
    """Run ``functions`` (a list or ``nn.Sequential``) in order, checkpointing all but the last of
    ``segments`` chunks."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed "
            "explicitly. In version 2.9 we will raise an exception if use_reentrant is not passed. "
            "use_reentrant=False is recommended, but if you need to preserve the current default behavior, "
            "you can pass use_reentrant=True. Refer to docs for more details on the differences between the "
            "two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))

    def run_function(start: int, end: int, fns: list) -> Callable[[Any], Any]:
        def forward(x: Any) -> Any:
            for j in range(start, end + 1):
                x = fns[j](x)
            return x
        return forward

    if isinstance(functions, plugtorch.nn.Sequential):
        functions = list(functions.children())
    elif isinstance(functions, Iterable):
        functions = list(functions)
    segment_size = len(functions) // segments
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(run_function(start, end, functions), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run_function(end + 1, len(functions) - 1, functions)(input)
