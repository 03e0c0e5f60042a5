"""Dispatch: read the op's current definition, run the backend's kernel or the decomposition,
wrap the result, and record a graph node when a gradient is needed.

This is the hot path of every op, so it is written for speed: one test for dispatch modes
(``optable.MODES``: the profiler, autocast, forward AD, vmap), one dict lookup for the
definition and one for the kernel. Hot elementwise ops inline
the same steps in their own functions (``ops/elementwise.py``); whichever path ran a
kernel, the node it records runs ``OpDef.rule``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import anomaly, native
from .errors import BackendMismatchError, MissingKernelError
from .grad_mode import _state as _grad_state
from .graph import AccumulateGrad, Node
from .optable import INTERCEPT, MODES, TABLE

if TYPE_CHECKING:
    from .backend import Backend
    from .tensor import Tensor as TensorT

__all__ = ["call_op", "call_op1", "record", "record_one", "record_pair", "wrap", "edge", "needs_grad",
           "same_backend", "backend_of", "NO_ATTRS"]

_new = object.__new__
Tensor: Any = None  # bound by core.tensor to avoid an import cycle
NO_ATTRS: dict = {}  # shared by calls without attrs; never written


def wrap(data: Any, backend: Backend, requires_grad: bool = False) -> TensorT:
    """A new Tensor around a native array (no copy)."""
    t = _new(Tensor)
    t._data = data
    t._backend = backend
    t.dtype = backend.dtype_of(data)
    t.requires_grad = requires_grad
    t.grad = None
    t.grad_fn = None
    t._vc = [0]
    t._accum = None
    t._retains_grad = False
    t._view = None
    return t


python_wrap = wrap  # the reference, which tests compare _native.c's with
if native.ext is not None:  # the same, in C (_native.c; tensor.py gives it the Tensor class)
    wrap = native.ext.wrap



def python_make_node(cls: type[Node], *fields: Any) -> Node:
    """``cls(*fields)``: a graph node of class ``cls`` (a Node that adds no fields)."""
    return cls(*fields)


# the records below make their nodes with it: in C where the core's C paths run (the same fields)
make_node = native.ext.node if native.ext is not None else python_make_node


def edge(t):
    """The graph node gradients for ``t`` flow into, or None if ``t`` needs no grad."""
    fn = t.grad_fn
    if t._view is not None and len(t._vc) > 1 and t._view[4] != t._vc[1]:
        fn = refresh_view(t)
    if fn is not None:
        return fn
    if t.requires_grad:
        acc = t._accum
        if acc is None:
            acc = t._accum = AccumulateGrad(t)
        return acc
    return None


def refresh_view(t):
    """``t``'s graph node after an in-place op with a graph changed the tensor it views: the
    view taken again from that tensor's new node (torch regenerates a view's grad_fn so)."""
    from .ops.inplace import refresh_view as refresh
    return refresh(t)


python_edge = edge  # the reference, which tests compare _native.c's with
if native.ext is not None:  # the same, in C: every recorded operand runs it
    native.ext.configure_edge(refresh_view, python_edge)
    edge = native.ext.edge


def needs_grad(*tensors: object) -> bool:
    if not _grad_state.enabled:
        return False
    for t in tensors:
        if isinstance(t, Tensor) and t.requires_grad:
            return True
    return False


def same_backend(op: str, tensors: Sequence[TensorT]) -> Backend:
    """The one backend all ``tensors`` live on, or a clear error naming both."""
    b = tensors[0]._backend
    for t in tensors:
        if t._backend is not b:
            raise BackendMismatchError(op, b.name, t._backend.name)
    return b


def backend_of(name: str, operands: Sequence[Any]) -> Backend:
    """The backend of an op's tensor operands (numbers and None are skipped)."""
    b = None
    for o in operands:
        if isinstance(o, Tensor):
            if b is None:
                b = o._backend
            elif o._backend is not b:
                raise BackendMismatchError(name, b.name, o._backend.name)
    if b is None:
        got = ", ".join(type(o).__name__ for o in operands) or "nothing"
        raise TypeError(f"{name}(): expected a Tensor argument, got {got}")
    return b


def record(out, opdef, operands, attrs=NO_ATTRS):
    """Attach a node to ``out`` whose rule (``opdef.rule``: the op's derivative, or its
    decomposition differentiated) gives gradients for ``operands``. Every differentiable op with
    a graph to keep runs this (or ``record_one``/``record_pair``), so it is written for speed:
    the rule's complex checks are decided here, once, from the operands' dtypes (a node none of
    whose operands is complex runs ``opdef.real_rule``, which has none).
    """
    tensor = Tensor
    edges: list[Node | None] = []
    meta: list[tuple[Any, Any] | None] = []
    for o in operands:
        if isinstance(o, tensor):
            edges.append(edge(o))
            meta.append((o._data.shape, o.dtype))
        else:
            edges.append(None)
            meta.append(None)
    positions = opdef.saved_positions
    if positions is None:
        saved = None
    elif positions is True:
        saved = operands if type(operands) is tuple else tuple(operands)
    else:
        saved = tuple([o if i in positions else None for i, o in enumerate(operands)])
    metas = tuple(meta)
    rule = opdef.real_rule
    if rule is not opdef.rule and _any_complex(metas):
        rule = opdef.rule
    node = make_node(opdef.node_class or opdef.node_namer(metas, attrs), opdef.name, rule, tuple(edges),
                     metas, saved, None, attrs)
    return _attach(out, node, opdef, saved)


def record_one(out, opdef, x, attrs=NO_ATTRS):
    """``record(out, opdef, (x,), attrs)`` unrolled for one tensor operand (unary ops, reshapes,
    reductions): the commonest nodes, so the loop and its lists are worth saving."""
    positions = opdef.saved_positions
    if positions is None:
        saved = None
    elif positions is True or 0 in positions:
        saved = (x,)
    else:
        saved = (None,)
    dtype = x.dtype
    meta = ((x._data.shape, dtype),)
    rule = opdef.real_rule
    if rule is not opdef.rule and dtype.is_complex:
        rule = opdef.rule
    node = make_node(opdef.node_class or opdef.node_namer(meta, attrs), opdef.name, rule, (edge(x),),
                     meta, saved, None, attrs)
    return _attach(out, node, opdef, saved)


def record_pair(out, opdef, a, b):
    """``record(out, opdef, (a, b))`` unrolled for two tensor operands and no attrs (binary ops)."""
    positions = opdef.saved_positions
    if positions is None:
        saved = None
    elif positions is True:
        saved = (a, b)
    else:
        saved = (a if 0 in positions else None, b if 1 in positions else None)
    da, db = a.dtype, b.dtype
    meta = ((a._data.shape, da), (b._data.shape, db))
    rule = opdef.real_rule
    if rule is not opdef.rule and (da.is_complex or db.is_complex):
        rule = opdef.rule
    node = make_node(opdef.node_class or opdef.node_namer(meta, NO_ATTRS), opdef.name, rule,
                     (edge(a), edge(b)), meta, saved, None, NO_ATTRS)
    if positions is True and not opdef.saves_output and not anomaly._state.enabled:
        # mul's and div's: _attach's work for two saved tensors, inline (0.2 us of a 2 us op)
        node.versions = (a._vc[0], b._vc[0])
        out.grad_fn = node
        out.requires_grad = True
        return out
    return _attach(out, node, opdef, saved)


def _any_complex(metas) -> bool:
    for m in metas:
        if m is not None and m[1].is_complex:
            return True
    return False


def _attach(out, node, opdef, saved):
    """Make ``node`` the ``grad_fn`` of ``out``: the saved values' versions, and the creation
    trace under anomaly detection (the common tail of the records above)."""
    if opdef.saves_output:
        node._output = out if MODES.keep_outputs or type(out) is not Tensor else _saved_output(out)
        node.versions = (*_versions(saved), out._vc[0]) if saved else (out._vc[0],)
    elif saved is not None:
        node.versions = _versions(saved)
    if anomaly._state.enabled:
        node.trace = anomaly.creation_trace()
    out.grad_fn = node
    out.requires_grad = True
    return out


def _saved_output(out):
    """What a node keeps of the output its rule reads: an alias of it (the same array, dtype and
    version counter, so an in-place change is still caught) without its ``grad_fn``, which would
    make a cycle (``Node.output``)."""
    s = wrap(out._data, out._backend)
    s.dtype = out.dtype
    s._vc = out._vc
    return s


def as_result_of(saved, node):
    """``saved`` (a node's alias of its output) as ``node``'s result again: what a rule reads as
    ``ctx.output`` under ``create_graph``, so that gradients of the rule's result reach ``node``."""
    r = _saved_output(saved)
    r.grad_fn = node
    r.requires_grad = True
    return r


def _versions(saved) -> tuple:
    tensor = Tensor
    if len(saved) == 1:  # the commonest (a unary op that saves its input): a third of the list's cost
        o = saved[0]
        return (o._vc[0] if isinstance(o, tensor) else None,)
    return tuple([o._vc[0] if isinstance(o, tensor) else None for o in saved])


def call_op(op, operands: tuple, attrs: dict = NO_ATTRS):
    """Run the op named ``op`` (or the op an ``OpDef`` names) on ``operands`` with ``attrs``.

    The current definition is read from the op table, so an overriding definition
    takes effect everywhere at once (an ``OpDef`` not registered yet runs as itself,
    so the conformance kit can check it first). A backend kernel for the op (its own,
    or the primitive the definition maps to) is preferred to the decomposition.
    """
    if type(op) is str:
        name = op
        d = TABLE.get(name)
        if d is None:
            raise _unknown_op(name)
    else:  # an OpDef: its registered (current) definition, or itself before it is registered
        name = op.name
        d = TABLE.get(name, op)
    if MODES.on and MODES.here():
        return MODES.dispatch(d, operands, attrs)
    # one pass over the operands: their backend, their arrays, whether any needs a gradient
    tensor, b, grad = Tensor, None, False
    arrays = []
    for o in operands:
        if isinstance(o, tensor):
            if b is None:
                b = o._backend
            elif o._backend is not b:
                raise BackendMismatchError(name, b.name, o._backend.name)
            if o.requires_grad:
                grad = True
            arrays.append(o._data)
        else:
            arrays.append(o)
    if b is None:
        if INTERCEPT.on and (out := INTERCEPT.call(d.function, operands, attrs)) is not NotImplemented:
            return out  # an fx.Proxy operand: the call is recorded
        got = ", ".join(type(o).__name__ for o in operands) or "nothing"
        raise TypeError(f"{name}(): expected a Tensor argument, got {got}")
    try:
        fn = b.kernels[name]
    except KeyError:
        return _decomposed(d, b, operands, attrs)
    out = wrap(fn(arrays, **attrs) if d.variadic else fn(*arrays, **attrs), b)
    if d.view:
        out._vc = vc = operands[0]._vc
        out._view = (operands[0], d, operands, attrs, vc[1] if len(vc) > 1 else 0)
    if grad and _grad_state.enabled and d.rule is not None:
        record(out, d, operands, attrs)
    return out


def call_op1(name: str, x, attrs: dict = NO_ATTRS):
    """``call_op`` for the many ops with one tensor operand (reshape, sum, ...): the same steps
    without the pass over an operand tuple, since these run several times per layer."""
    d = TABLE.get(name)
    if d is None:
        raise _unknown_op(name)
    if not isinstance(x, Tensor):
        if INTERCEPT.on and (out := INTERCEPT.call(d.function, (x,), attrs)) is not NotImplemented:
            return out
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if MODES.on and MODES.here():
        return MODES.dispatch(d, (x,), attrs)
    b = x._backend
    try:
        fn = b.kernels[name]
    except KeyError:
        return _decomposed(d, b, (x,), attrs)
    out = wrap(fn(x._data, **attrs), b)
    if d.view:
        out._vc = vc = x._vc
        out._view = (x, d, (x,), attrs, vc[1] if len(vc) > 1 else 0)
    if x.requires_grad and _grad_state.enabled and d.rule is not None:
        record_one(out, d, x, attrs)
    return out


def _decomposed(d, b, operands, attrs):
    """The op as its decomposition: differentiated by its own rule when it has one, else through."""
    decompose = d.decompose
    if decompose is None:
        raise MissingKernelError(d.name, b.name, _plugin_names(), _needs(d))
    args = (list(operands),) if d.variadic else operands
    if d.derivative is None or not needs_grad(*operands):
        return decompose(*args, **attrs)
    from .grad_mode import no_grad
    with no_grad():
        out = decompose(*args, **attrs)
    if any(out is o for o in operands):
        out = out.detach()  # never attach a node to an input
    return record(out, d, operands, attrs)


def _needs(d) -> str:
    if d.primitive is not None:
        return f"the primitive '{d.primitive}'"
    if d.lower is not None:
        return "a kernel (its lowering to primitives could not be built here)"
    return "a kernel (it has no decomposition)"


def _plugin_names():
    from .plugins import get_registry
    return get_registry().plugin_names()


def _unknown_op(name):
    from .errors import PluginError
    return PluginError(f"no op named '{name}' is registered; loaded plugins: "
                       f"{', '.join(_plugin_names()) or '(none)'}")
