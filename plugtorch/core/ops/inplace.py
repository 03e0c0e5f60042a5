"""In-place ops (``add_``, ``mul_``, ``zero_``, ``x[i] = v``, ...) with version counters.

Two cases:

* No graph involved (grad mode off, or nothing requires grad — optimizer steps,
  initialisation): the result lands in the tensor's memory, so views see it. An
  elementwise op whose kernel is the backend's primitive writes it there directly
  through the primitive's out= variant (``_into``); any other op is computed and then
  copied in with the ``setitem`` primitive.
* The graph is involved: the op is computed out of place from an alias of the
  old value, and the tensor takes the result's graph node. A tensor no other tensor
  sees the memory of is rebound to the result (the old memory is never overwritten, so
  nodes that saved it stay correct); one that shares its memory (a view, or a tensor with
  views or detached copies) gets the result written into that memory, the alias being a
  copy then, so every tensor sharing it sees the new value as in torch. A view's
  in-place op also gives the tensor it views a new graph node (torch's CopySlices): its
  gradient flows to the old value outside the view and to the result inside it.

Either way the version counter is bumped, so a backward that needs the old
value of a tensor modified since raises torch's "modified by an inplace
operation" error instead of computing a wrong gradient; and a tensor whose
elements share memory (an ``expand()``ed view) is refused first, as torch refuses it.

``Tensor.<op>_`` for every op declared ``inplace=True`` is ``inplace(op)``. ``x[i] = v`` runs
out of place as ``index_put`` (declared with the other index ops) for a tensor ``v`` and as
``index_fill``, declared here, for a number.
"""
from __future__ import annotations

import sys

from ..dispatch import call_op, record, wrap
from ..errors import BackendMismatchError
from ..grad_mode import _state as _grad
from ..opdef import OpDef
from ..optable import MODES, TABLE, op, public
from ..tensor import Tensor
from ._args import broadcast_shapes
from .conversion import move
from .creation import tensor
from .index import native_index, put_native
from .shape import _strides, clone


def _check_leaf(x, op_name):
    if _grad.enabled and x.requires_grad and x.grad_fn is None:
        raise RuntimeError(
            f"a leaf Variable that requires grad is being used in an in-place operation ({op_name}). "
            "Wrap the update in 'with plugtorch.no_grad():' or operate on x.detach()."
        )
    if _grad.enabled and getattr(x, "_view", None) is not None:
        root = _view_root(x)[0]
        if root.requires_grad and root.grad_fn is None:
            raise RuntimeError(
                f"a view of a leaf Variable that requires grad is being used in an in-place operation "
                f"({op_name}). Wrap the update in 'with plugtorch.no_grad():' or operate on a clone."
            )


def _view_root(x):
    """The tensor whose memory the view ``x`` shares, and the view calls from it to ``x``."""
    steps = []
    while (made := getattr(x, "_view", None)) is not None:
        steps.append(made[1:4])
        x = made[0]
    steps.reverse()
    return x, tuple(steps)


def _replay(t, steps):
    """The views ``steps`` (from ``_view_root``) applied to ``t``."""
    for fn, operands, attrs in steps:
        t = call_op(fn, (t, *operands[1:]), attrs)
    return t


def _shares_memory(x) -> bool:
    """Whether another tensor may see ``x``'s memory: ``x`` is a view, or a view or a detached
    copy of ``x`` holds its version counter (a list no other tensor refers to has two references
    here: ``x``'s and the argument's; a stray one only costs a copy)."""
    return getattr(x, "_view", None) is not None or sys.getrefcount(x._vc) > 2


def _new_generation(x) -> None:
    """A tracked write into memory other tensors share: their views' graph nodes are now stale."""
    vc = x._vc
    if len(vc) > 1:
        vc[1] += 1
    else:
        vc.append(1)
    made = getattr(x, "_view", None)
    if made is not None:  # x's own node is the write's, current
        x._view = (*made[:4], vc[1])


def refresh_view(t):
    """Give the view ``t`` the node of the view taken again from its base's current graph, as
    torch regenerates a view's grad_fn after its base changed in place; returns that node."""
    made = t._view
    t._view = (*made[:4], t._vc[1])
    if not (t.requires_grad or t.grad_fn is not None):  # made without a graph: stays so
        return None
    root, steps = _view_root(t)
    from ..grad_mode import enable_grad
    with enable_grad():
        again = _replay(root, steps)
    t.grad_fn, t.requires_grad = again.grad_fn, again.requires_grad
    return t.grad_fn


def _copy_slices_rule(ctx, g):
    """CopySlices' gradient: the old value's outside the view, the written value's inside it."""
    steps = ctx.attrs["steps"]
    need = ctx.needs_input_grad
    g_old = g_src = None
    if need[0]:
        from ..grad_mode import no_grad
        with no_grad():
            mask = g.new_ones(g.shape)
            _replay(mask, steps).zero_()
        g_old = g * mask
    if need[1]:
        g_src = _replay(g, steps)
    return g_old, g_src


_COPY_SLICES = OpDef("copy_slices", derivative=_copy_slices_rule,
                     doc="The node a view's in-place op gives the tensor it views (torch's CopySlices).")


def _rebase(x, src):
    """After ``x`` (a view) took the value of ``src`` in its memory, the tensor it views gets the
    node that routes its gradient: to its old graph outside the view, to ``src``'s inside it."""
    root, steps = _view_root(x)
    if not (root.requires_grad or src.requires_grad):
        return
    old = wrap(root._data, root._backend)  # only its graph and shape are used
    old.grad_fn, old.requires_grad, old._accum = root.grad_fn, root.requires_grad, root._accum
    new = record(wrap(root._data, root._backend), _COPY_SLICES, (old, src), {"steps": steps})
    root.grad_fn, root.requires_grad = new.grad_fn, True


def _check_overlap(x, op_name):
    """Refuse to write into a tensor whose elements share memory (an expand()ed view), as torch
    does: NumPy would raise its own read-only error, and CuPy would race its writes."""
    strides = getattr(x._data, "strides", None)  # NumPy's and CuPy's arrays: a 0 is rare and cheap to spot
    if strides is not None and 0 not in strides:
        return
    if 0 not in x.shape and any(st == 0 and n > 1 for n, st in zip(x.shape, _strides(x))):  # (empty: no elements)
        raise RuntimeError(
            f"{op_name}: unsupported operation: more than one element of the written-to tensor "
            f"(shape {list(x.shape)}, strides {list(_strides(x))}) refers to a single memory location. "
            "Please clone() the tensor before performing the operation.")


def _tracking(x, *others) -> bool:
    return _grad.enabled and _graph_involved(x, others, None)


def _graph_involved(x, args, kwargs) -> bool:
    """Whether ``x`` or a tensor among ``args`` and ``kwargs`` (a dict or None) requires grad;
    ``_tracking`` less its grad-mode test, which in-place methods make first."""
    if x.requires_grad:
        return True
    for o in args:
        if isinstance(o, Tensor) and o.requires_grad:
            return True
    if kwargs:
        for o in kwargs.values():
            if isinstance(o, Tensor) and o.requires_grad:
                return True
    return False


def _alias(x, copy=False):
    """The old value of ``x`` as its own tensor: same memory (a copy with ``copy``) and graph
    node, own version counter."""
    a = wrap(x._backend.primitives["copy"](x._data) if copy else x._data, x._backend)
    a.grad_fn, a.requires_grad, a._accum = x.grad_fn, x.requires_grad, x._accum
    a._vc = [x._vc[0]]
    if MODES.on:  # a mode's per-tensor state (a forward-AD tangent) goes with the old value
        MODES.rebind(a, x)
    return a


def _commit(x, result, op_name, tracking, shared=False):
    """Make ``result`` the new value of ``x``; ``shared``: ``x`` shares its memory (so a
    tracked result is written into it, not rebound)."""
    if result.shape != x.shape:
        raise RuntimeError(
            f"{op_name}: output with shape {list(x.shape)} doesn't match the broadcast shape "
            f"{list(result.shape)}"
        )
    if result.dtype is not x.dtype:
        if result.dtype.category > x.dtype.category:
            raise RuntimeError(
                f"{op_name}: result type {result.dtype.name} can't be cast to the desired output type "
                f"{x.dtype.name}"
            )
        result = result.to(x.dtype)
    if tracking:
        if shared:
            x._backend.primitives["setitem"](x._data, (Ellipsis,), result._data)
            if getattr(x, "_view", None) is not None:
                _rebase(x, result)
        else:
            x._data = result._data
        x.grad_fn = result.grad_fn
        x.requires_grad = result.requires_grad
        if shared:
            _new_generation(x)
    else:
        x._backend.primitives["setitem"](x._data, (Ellipsis,), result._data)
    if MODES.on:  # x now holds result: so does its tangent under forward AD
        MODES.rebind(x, result)
    x._vc[0] += 1
    return x


# Elementwise primitives whose kernel, given a floating tensor and an operand of its dtype (or a
# Python number), computes in that dtype and nothing else: with no graph to keep, their backend's
# out= variant writes the result straight into the tensor (ops with dtype checks of their own,
# comparisons and bitwise ops stay on the general path).
_WRITES_IN_PLACE = frozenset({
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2", "copysign",
    "neg", "exp", "log", "log1p", "expm1", "sqrt", "abs", "sign", "sin", "cos", "tan", "tanh", "asin",
    "acos", "atan", "asinh", "acosh", "atanh", "floor", "ceil", "round"})
_NUMBER = (int, float, bool)


def _learn_variant(op_name, b, kernel, seen):
    """(``kernel``, ``b``'s out= variant for ``op_name`` where ``_into`` may run it, else None,
    that variant as ``_positional`` gives it),
    kept in ``seen`` (one dict per in-place method) for ``b``: the registry rebuilds
    ``b.kernels`` when an op, a kernel or a backend changes, and plugtorch.compile wraps the
    kernels it records, so ``_into`` asks again whenever it finds another kernel."""
    d = TABLE.get(op_name)
    variant = None
    if d is not None and d.primitive in _WRITES_IN_PLACE:
        found = b.out_variants.get(d.primitive)
        # a kernel registered over the primitive, or plugtorch.compile's recording wrappers, must run
        if found is not None and kernel is b.primitives.get(d.primitive):
            variant = found
    seen[b] = known = (kernel, variant, _positional(variant))
    if MODES.on:  # a mode entered while this ran: it may have cleared seen before the line above
        seen.pop(b, None)
    return known


def _positional(variant):
    """``variant`` as ``fn(a, b, out)``, the in-place methods' fast call: a binary ufunc (NumPy's
    or CuPy's, which say so by their nin and nout) takes its output positionally as it is, which
    spares it parsing the keyword (~300 of add_'s ~8,400 instructions); any other out= variant
    through a call that names the keyword."""
    if variant is None:
        return None
    if getattr(variant, "nin", None) == 2 and getattr(variant, "nout", None) == 1:
        return variant
    return lambda a, b, out: variant(a, b, out=out)


def _into(x, op_name, args, kwargs, seen):
    """``x`` with the op written into its memory by the backend's out= variant, or None where
    that is not the op's exact result (then the general path runs: it computes out of place and
    copies back). Runs only without a graph to keep, so no node saved ``x``'s old value.
    Written for speed: optimizer updates and initialisation run it once per parameter."""
    if not x.dtype.is_floating_point or MODES.on:
        return None
    b = x._backend
    kernel = b.kernels.get(op_name)
    known = seen.get(b)
    if known is None or known[0] is not kernel:
        known = _learn_variant(op_name, b, kernel, seen)
    variant = known[1]
    if variant is None:
        return None
    if kwargs:
        if op_name not in ("add", "sub") or kwargs.keys() != {"alpha"} or len(args) != 1:
            return None
        alpha = kwargs["alpha"]
        if alpha != 1:  # what add's and sub's public function does with it
            args = (args[0] * alpha,)
    data = x._data
    if len(args) == 1:
        other = args[0]
        if isinstance(other, Tensor):
            if other._backend is not b or other.dtype is not x.dtype:
                return None
            operand = other._data
            if operand.shape != data.shape and not _broadcasts_to(other.shape, x.shape):
                return None
        elif type(other) in _NUMBER:
            operand = other
        else:
            return None
        try:
            variant(data, operand, out=data)
        except ValueError:  # read-only memory (a NumPy array wrapped as it was): the general path says so
            return None
    elif not args:
        try:
            variant(data, out=data)
        except ValueError:
            return None
    else:
        return None
    x._vc[0] += 1
    return x


def _broadcasts_to(shape, target) -> bool:
    try:
        return broadcast_shapes(target, shape) == target
    except RuntimeError:  # broadcast_shapes' error for shapes that clash
        return False


_SEEN: list[dict] = []  # every in-place method's ``seen`` (tests clear them to force the general path)


def _forget_variants() -> None:
    # a mode entered: the fast path, which does not test MODES.on, must miss until _into, which
    # learns nothing while a mode is in force anywhere, fills ``seen`` again
    for seen in _SEEN:
        seen.clear()


MODES.on_enter.append(_forget_variants)


def inplace(fn, name):
    """``x.<name>(*args)``: ``x = fn(x, *args)`` done in place."""
    op_name = name[:-1]
    seen: dict = {}  # _learn_variant's answers for this method, per backend
    _SEEN.append(seen)

    def method(x, *args, **kwargs):
        data = x._data
        try:  # _check_overlap's own first test, inline
            overlap = 0 in data.strides
        except AttributeError:
            overlap = True  # an array without strides: _check_overlap looks at the tensor's
        if overlap:
            _check_overlap(x, name)
        if len(args) == 1 and not kwargs:
            # the commonest call (an optimizer's or an initialiser's p.add_(t)): a tensor operand
            # of x's backend and floating dtype, and no graph; _into's steps for it, inline. Its
            # shape is left to the out= variant, which refuses (ValueError) an operand that
            # broadcasts past x and broadcasts a smaller one into it, as the op would
            other, b = args[0], x._backend
            known = seen.get(b)
            if (known is not None and known[1] is not None and isinstance(other, Tensor) and other._backend is b
                    and other.dtype is x.dtype and x.dtype.is_floating_point
                    and not ((x.requires_grad or other.requires_grad) and _grad.enabled)
                    and known[0] is b.kernels.get(op_name)):  # (no MODES.on test: _forget_variants)
                try:
                    known[2](data, other._data, data)
                except ValueError:  # a shape that does not fit, or read-only memory: the general path says so
                    pass
                else:
                    x._vc[0] += 1
                    return x
        if _grad.enabled and _graph_involved(x, args, kwargs):
            _check_leaf(x, name)
            shared = _shares_memory(x)
            return _commit(x, fn(_alias(x, shared), *args, **kwargs), name, True, shared)
        # no graph, so _check_leaf has nothing to refuse
        done = _into(x, op_name, args, kwargs, seen)
        if done is not None:
            return done
        return _commit(x, fn(x, *args, **kwargs), name, False)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In-place version of ``{getattr(fn, '__name__', name[:-1])}``."
    return method


@public("Tensor")
def copy_(input, src, non_blocking=False):
    """Write ``src`` (broadcast, cast and moved as needed) into ``input``."""
    _check_leaf(input, "copy_")
    _check_overlap(input, "copy_")
    tracking = _tracking(input, src)
    if src._backend is not input._backend:
        src = move(src, input._backend)
    if src.dtype is not input.dtype:
        src = src.to(input.dtype)
    if src.shape != input.shape:
        src = src.expand(input.shape)
    if tracking:
        return _commit(input, clone(src), "copy_", True, _shares_memory(input))
    return _commit(input, src, "copy_", False)


def _fill_in_place(x, value, op_name):
    _check_leaf(x, op_name)
    _check_overlap(x, op_name)
    x._backend.primitives["setitem"](x._data, (Ellipsis,), value)
    if _grad.enabled:
        view = getattr(x, "_view", None) is not None
        if view:
            _rebase(x, wrap(x._data, x._backend))  # a constant inside the view: no gradient there
        if (view or x.grad_fn is not None) and _shares_memory(x):
            _new_generation(x)
        if x.grad_fn is not None:
            x.grad_fn, x.requires_grad = None, False  # a constant does not depend on anything
    if MODES.on:
        MODES.rebind(x, None)
    x._vc[0] += 1
    return x


@public("Tensor")
def zero_(input):
    """Fill with zeros."""
    return _fill_in_place(input, 0, "zero_")


@public("Tensor")
def fill_(input, value):
    """Fill with ``value`` (a number or a one-element tensor)."""
    if isinstance(value, Tensor):
        value = value.item()
    return _fill_in_place(input, value, "fill_")


# -- random fills ------------------------------------------------------------------------

def _random_fill(x, kind, low_or_mean, high_or_std, generator, op_name):
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op_name}: expected a floating point tensor, got {x.dtype.name}")
    from ..random import default_generator
    b = x._backend
    gen = (generator or default_generator).native(b)
    values = b.primitives[kind](gen, tuple(x.shape), float(low_or_mean), float(high_or_std), x.dtype)
    return _fill_in_place(x, values, op_name)


@public("Tensor")
def normal_(input, mean=0.0, std=1.0, *, generator=None):
    """Fill with samples of the normal distribution N(mean, std**2)."""
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    return _random_fill(input, "normal", mean, std, generator, "normal_")


@public("Tensor")
def uniform_(input, *args, generator=None, **kwargs):
    """Fill with samples of the uniform distribution on [from, to) (torch's names: ``from``,
    ``to``; default [0, 1))."""
    bounds = dict(zip(("from", "to"), args))
    for key, v in kwargs.items():
        if key not in ("from", "to") or key in bounds:
            raise TypeError(f"uniform_() got an unexpected or repeated keyword argument '{key}'")
        bounds[key] = v
    low, high = bounds.get("from", 0.0), bounds.get("to", 1.0)
    if low > high:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={low} > "
                           f"to={high}")
    return _random_fill(input, "uniform", low, high, generator, "uniform_")


# -- x[index] = value ----------------------------------------------------------------

def _lower_index_fill(backend, x, *, index, value):
    p = backend.primitives
    out = p["copy"](x)
    p["setitem"](out, index, value)
    return out


@op(lower=_lower_index_fill, derivative=lambda ctx, g: index_fill(g, ctx.attrs["index"], 0))
def index_fill(input, index, value):
    """``input`` with ``input[index] = value`` for a Python number (out of place)."""


def setitem(x, key, value):
    """``x[key] = value``."""
    _check_leaf(x, "__setitem__")
    _check_overlap(x, "__setitem__")
    index, _ = native_index(x, key)
    b = x._backend
    if isinstance(value, Tensor):
        if value._backend is not b:
            raise BackendMismatchError("__setitem__", b.name, value._backend.name)
        if value.dtype is not x.dtype:
            value = value.to(x.dtype)
    elif not isinstance(value, (int, float, bool)):
        value = tensor(value, dtype=x.dtype, device=b.name)
    tracking = _tracking(x, value)
    if not tracking and not MODES.on:
        _put(b, x._data, index, value._data if isinstance(value, Tensor) else value, value)
        x._vc[0] += 1
        return
    shared = tracking and _shares_memory(x)
    old = _alias(x, shared)
    _check_put_shapes(b, x._data, index, value)
    # a number goes through index_fill, its own op, so its kernels and overrides are what run
    out = put_native(old, index, value) if isinstance(value, Tensor) else index_fill(old, index, value)
    if shared:
        b.primitives["setitem"](x._data, (Ellipsis,), out._data)
        if getattr(x, "_view", None) is not None:
            _rebase(x, out)
        x.grad_fn, x.requires_grad = out.grad_fn, True
        _new_generation(x)
    elif tracking:
        x._data, x.grad_fn, x.requires_grad = out._data, out.grad_fn, True
    else:  # only a mode is in force (forward AD): the op ran out of place for it to see
        b.primitives["setitem"](x._data, (Ellipsis,), out._data)
    if MODES.on:
        MODES.rebind(x, out)
    x._vc[0] += 1


def _check_put_shapes(b, data, index, value):
    try:
        target = b.primitives["getitem"](data, index).shape
    except IndexError as e:
        raise IndexError(f"x[index] = value on a tensor of shape {list(data.shape)}: {e}") from None
    if isinstance(value, Tensor):
        if not _broadcasts_to(value.shape, tuple(target)):
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(value.shape)} cannot be "
                               f"broadcast to indexing result of shape {list(target)}")


def _put(b, data, index, vdata, value):
    try:
        b.primitives["setitem"](data, index, vdata)
    except IndexError as e:
        raise IndexError(f"x[index] = value on a tensor of shape {list(data.shape)}: {e}") from None
    except ValueError:
        target = b.primitives["getitem"](data, index).shape
        shape = list(value.shape) if isinstance(value, Tensor) else []
        raise RuntimeError(f"shape mismatch: value tensor of shape {shape} cannot be broadcast to "
                           f"indexing result of shape {list(target)}") from None
