"""Forward-mode automatic differentiation, as ``torch.autograd.forward_ad``.

A *dual tensor* carries a tangent beside its value; every op computed on dual tensors gives its
output the tangent the op's forward derivative says (a Jacobian-vector product, one forward
pass). A dual level is a dispatch mode (``optable.DispatchMode``): while it is in force, each op
call reaches :meth:`_DualLevel.dispatch`, which computes the op and then its output's tangent:

* the op's own ``jvp`` (``OpDef.jvp``), written with plugtorch ops;
* else, for an op built from others with no derivative of its own, its decomposition run with
  the level in force, so the ops it is made of carry the tangents;
* else, for an op with a reverse rule, that rule transposed: the JVP is the gradient with respect
  to ``u`` of ``<vjp(u), t>`` (the rules are linear in ``u`` and differentiable), on fresh
  detached operands;
* else the op has no derivative: an error names it (ops with integer or bool results, which have
  no tangent, just compute).

Tangents are kept in the level, by the id of their tensor (a weak reference drops the entry with
the tensor; ``Tensor.__eq__`` is elementwise, so no WeakKeyDictionary). In-place ops move the
tangent of their result to the tensor they write (``DispatchMode.rebind``); a tensor that had a
tangent gets the new one written into it, so the tangents of its views, which are views of it,
stay in step.
"""
from __future__ import annotations

import contextlib
import weakref
from collections import namedtuple
from typing import Any

from ..core.dispatch import call_op
from ..core.grad_mode import enable_grad, no_grad
from ..core.optable import MODES, DispatchMode
from ..core.tensor import Tensor

__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual"]

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])
UnpackedDualTensor.__doc__ = "What ``unpack_dual`` returns: the primal (a view) and the tangent (or None)."


class _DualLevel(DispatchMode):
    """One forward-AD level: the tangents of its dual tensors, and the mode that computes them."""

    keeps_outputs = True  # a tangent belongs to its tensor object: a rule under jvp must see the output's

    def __init__(self, index: int) -> None:
        self.index = index
        self.tangents: dict[int, tuple[weakref.ref, Tensor]] = {}

    # -- the tangent table ------------------------------------------------------------------

    def get(self, t: Any) -> Tensor | None:
        entry = self.tangents.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else None

    def set(self, t: Tensor, tangent: Tensor) -> None:
        key, table = id(t), self.tangents

        def drop(ref: weakref.ref) -> None:  # t died: its id may be reused, so its entry goes
            entry = table.get(key)
            if entry is not None and entry[0] is ref:
                del table[key]
        table[key] = (weakref.ref(t, drop), tangent)

    def discard(self, t: Tensor) -> None:
        if self.get(t) is not None:
            del self.tangents[id(t)]

    # -- the mode -----------------------------------------------------------------------------

    def dispatch(self, opdef, operands, attrs):
        tangents = [self.get(o) if isinstance(o, Tensor) else None for o in operands]
        if all(t is None for t in tangents):
            return call_op(opdef, operands, attrs)
        if opdef.jvp is None and opdef.derivative is None and opdef.decompose is not None:
            with self:  # the ops it is built from carry the tangents
                return opdef.decompose(*((list(operands),) if opdef.variadic else operands), **attrs)
        out = call_op(opdef, operands, attrs)
        if any(o.dtype.is_complex for o in _tensors(out)):
            raise _no_complex(f"op '{opdef.name}' gave a complex result from a dual tensor")
        if not any(o.dtype.is_floating_point for o in _tensors(out)):
            return out  # integer and bool results have no tangent
        if opdef.jvp is not None:
            tangent = opdef.jvp(tuple(operands), tangents, out, attrs)
        elif opdef.derivative is not None:
            tangent = _jvp_by_transpose(opdef, operands, tangents, attrs)
        else:
            raise RuntimeError(f"forward-mode AD is not implemented for op '{opdef.name}': it has no jvp and "
                               "no derivative (give its OpDef a jvp=, a derivative= or a decomposition)")
        outs = _tensors(out)
        parts = tangent if isinstance(tangent, (tuple, list)) else (tangent,)
        for o, t in zip(outs, parts):
            if o.dtype.is_floating_point:
                if t is not None and not opdef.view and any(t is u for u in tangents):
                    t = t.clone()  # an output's tangent is its own: in-place ops write into it
                self.set(o, _fit(t, o, opdef.name))
        return out

    @contextlib.contextmanager
    def suspended(self):
        """The level off while the block runs (a custom Function's forward: its jvp gives the
        tangents); left on when modes entered after it are still in force."""
        if not MODES.stack or MODES.stack[-1] is not self:
            yield
            return
        MODES.pop(self)
        try:
            yield
        finally:
            MODES.push(self)

    def function_tangents(self, cls, ctx, inputs, result) -> None:
        """Give a custom Function's outputs the tangents its ``jvp(ctx, *input tangents)`` returns."""
        from .function import Function
        if cls.jvp is Function.jvp:
            Function.jvp(ctx)  # torch's NotImplementedError
        outs = list(result) if isinstance(result, tuple) else [result]
        saved, released = ctx.saved, ctx.released
        ctx.saved, ctx.released = ctx._for_forward, False  # ctx.saved_tensors in jvp: what save_for_forward kept
        try:
            tangents = cls.jvp(ctx, *[self.get(x) if isinstance(x, Tensor) else None for x in inputs])
        finally:
            ctx.saved, ctx.released, ctx._for_forward = saved, released, ()
        parts = tangents if isinstance(tangents, tuple) else (tangents,)
        if len(parts) != len(outs):
            raise RuntimeError(f"{cls.__name__}.jvp returned {len(parts)} tangents for {len(outs)} outputs")
        for o, t in zip(outs, parts):
            if isinstance(o, Tensor) and o.dtype.is_floating_point:
                self.set(o, _fit(t, o, cls.__name__))

    def rebind(self, target, source):
        new = None if source is None else self.get(source)
        old = self.get(target)
        if new is None and old is None:
            return
        if new is None or not target.dtype.is_floating_point:
            if not target.dtype.is_floating_point:
                self.discard(target)
                return
            new = target.new_zeros(target.shape)
        new = _fit(new, target, "in-place op")
        if old is not None and old is not new and not (old.requires_grad or new.requires_grad):
            try:  # written in place: the tangents of target's views are views of old
                with no_grad():
                    old.copy_(new)
                return
            except (RuntimeError, ValueError):  # an expanded (overlapping) tangent: replaced instead
                pass
        # its own copy: an alias made for a graph (inplace._alias) keeps the old tangent while the
        # tensor's is written over
        self.set(target, new.clone() if source is not None and new is self.get(source) else new)


def _no_complex(what: str) -> NotImplementedError:
    # the reverse rules of complex ops follow torch's conjugate convention, which the transposed
    # and diagonal forms here do not undo: refused rather than wrong
    return NotImplementedError(f"forward-mode AD of complex tensors is not supported: {what}; differentiate "
                               "the real and imaginary parts (view_as_real) as real tensors instead")


def _tensors(out) -> list:
    if isinstance(out, Tensor):
        return [out]
    return [o for o in out if isinstance(o, Tensor)] if isinstance(out, (tuple, list)) else []


def _fit(t: Tensor | None, o: Tensor, name: str) -> Tensor:
    """``t`` as the tangent of ``o``: zeros for None, broadcast to its shape, in its dtype."""
    if t is None:
        return o.new_zeros(o.shape)
    if t._backend is not o._backend:  # a tensor moved to another backend (Tensor.to): so is its tangent
        t = t.to(o.device)
    if tuple(t.shape) != tuple(o.shape):
        try:
            t = t.expand(o.shape)
        except RuntimeError:
            raise RuntimeError(f"forward-mode AD: the jvp of op '{name}' gave a tangent of shape {list(t.shape)} "
                               f"for an output of shape {list(o.shape)}") from None
    return t if t.dtype is o.dtype else t.to(o.dtype)


def _jvp_by_transpose(opdef, operands, tangents, attrs):
    """J t from the reverse rule: d/du <J^T u, t> at u = 0, on detached copies of the operands."""
    from .functional import grad
    with enable_grad():
        primals = [o.detach().requires_grad_() if t is not None else (o.detach() if isinstance(o, Tensor) else o)
                   for o, t in zip(operands, tangents)]
        outs = _tensors(call_op(opdef, tuple(primals), attrs))
        live = [o for o in outs if o.requires_grad]
        if not live:
            return None
        us = [o.new_zeros(o.shape).requires_grad_() for o in live]
        wanted = [(p, t) for p, t in zip(primals, tangents) if t is not None]
        vjps = grad(live, [p for p, _ in wanted], us, create_graph=True, allow_unused=True)
        terms = [(g * t.to(g.dtype)).sum() for g, (_, t) in zip(vjps, wanted) if g is not None and g.requires_grad]
        if not terms:
            return None
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        jt = iter(grad(total, us, allow_unused=True))
    return tuple(next(jt) if o.requires_grad else None for o in outs)


# -- levels ----------------------------------------------------------------------------------

_current: _DualLevel | None = None


def enter_dual_level() -> int:
    """Start a forward-AD level and return its index (one level at a time, as in torch)."""
    global _current
    if _current is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    level = _DualLevel(0)
    level.__enter__()
    _current = level
    return level.index


def exit_dual_level(*, level: int | None = None) -> None:
    """End the current level: its dual tensors lose their tangents."""
    global _current
    if _current is None:
        raise RuntimeError("Dual level must be a positive number." if level is None else
                           "Trying to exit a forward AD level that was not the last one that was created. "
                           "This is not supported.")
    if level is not None and level != _current.index:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created. "
                           "This is not supported.")
    current, _current = _current, None
    current.tangents.clear()
    current.__exit__(None, None, None)


class dual_level:
    """Context manager for a forward-AD level: ``with dual_level(): ...`` (torch's)."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc: object) -> None:
        exit_dual_level()


def _level(level: int | None, what: str) -> _DualLevel | None:
    if level is None:
        return _current
    if _current is None or level != _current.index:
        if what == "_make_dual" and _current is None:
            raise RuntimeError("Trying to access a forward AD level with an invalid index. This index was either "
                               "not created or is already deleted.")
        raise RuntimeError(f"Invalid level given to {what}")
    return _current


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """A view of ``tensor`` whose tangent is ``tangent`` (same shape, floating), at the current level."""
    current = _level(level, "_make_dual")
    if current is None:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, make sure to "
                           "enter_dual_level() first.")
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError(f"make_dual(): expected two Tensors, got {type(tensor).__name__} and "
                        f"{type(tangent).__name__}")
    if tensor.dtype.is_complex or tangent.dtype.is_complex:
        raise _no_complex(f"make_dual() of a {tensor.dtype} primal with a {tangent.dtype} tangent")
    if not tensor.dtype.is_floating_point:
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if not tangent.dtype.is_floating_point:
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the given "
                           f"forward gradient is of size {list(tangent.shape)}.")
    if tangent._backend is not tensor._backend:
        raise RuntimeError(f"make_dual(): the tangent is on {tangent._backend.name}, the primal on "
                           f"{tensor._backend.name}; move it first (tangent.to(primal.device))")
    dual = tensor.view_as(tensor)
    current.discard(tangent)
    # its own copy: in-place ops on the dual write into their tangent, never into the caller's
    copy = tangent.clone()
    current.discard(copy)
    current.set(dual, copy)
    return dual


def unpack_dual(tensor: Tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)``: a view of ``tensor`` without tangent, and its tangent (None if it has none)."""
    current = _level(level, "_fw_primal")
    tangent = current.get(tensor) if current is not None else None
    if current is None or tangent is None:
        return UnpackedDualTensor(tensor, None)
    primal = tensor.view_as(tensor)
    current.discard(primal)
    return UnpackedDualTensor(primal, tangent)
