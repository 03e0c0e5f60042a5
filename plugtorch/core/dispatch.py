"""Dispatch: look up (op, backend), call, wrap, and record a graph node when needed.

This is the hot path of every op, so it is written for speed: no hook calls, no
scans over arguments beyond the tensors an op takes, a dict lookup per call.
"""
from __future__ import annotations

from .errors import BackendMismatchError
from .grad_mode import _state as _grad_state
from .graph import AccumulateGrad, Node
from . import anomaly

_new = object.__new__
Tensor = None  # bound by core.tensor to avoid an import cycle


def wrap(data, backend, requires_grad=False):
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
    return t


def edge(t):
    """The graph node gradients for ``t`` flow into, or None if ``t`` needs no grad."""
    fn = t.grad_fn
    if fn is not None:
        return fn
    if t.requires_grad:
        acc = t._accum
        if acc is None:
            acc = t._accum = AccumulateGrad(t)
        return acc
    return None


def record(out, name, rule, inputs, saved=None, save_output=False, attrs=None):
    """Attach a node to ``out`` whose rule computes gradients for ``inputs``."""
    node = Node(name, rule, tuple([edge(t) for t in inputs]),
                tuple([(t._data.shape, t.dtype) for t in inputs]),
                saved, out if save_output else None, attrs)
    if saved is not None:
        node.versions = tuple([t._vc[0] if t is not None else None for t in saved])
    if save_output:
        node.versions = (node.versions or ()) + (out._vc[0],)
    if anomaly._state.enabled:
        node.trace = anomaly.creation_trace()
    out.grad_fn = node
    out.requires_grad = True
    return out


def needs_grad(*tensors) -> bool:
    if not _grad_state.enabled:
        return False
    for t in tensors:
        if t.requires_grad:
            return True
    return False


def same_backend(op: str, tensors):
    """The one backend all ``tensors`` live on, or a clear error naming both."""
    b = tensors[0]._backend
    for t in tensors:
        if t._backend is not b:
            raise BackendMismatchError(op, b.name, t._backend.name)
    return b


def call_op(opdef, tensors, attrs, backend=None):
    """Run a registered op: a backend kernel if it has one, else the op's decomposition."""
    backend = backend or same_backend(opdef.name, tensors)
    kernel = backend.kernels.get(opdef.name)
    if kernel is None:
        if opdef.decompose is None:
            backend.kernels[opdef.name]  # raises MissingKernelError
        return opdef.decompose(*tensors, **attrs)
    out = wrap(kernel(*[t._data for t in tensors], **attrs), backend)
    if needs_grad(*tensors):
        rule, save_in = opdef.derivative, "inputs" in opdef.save
        if rule is None and opdef.decompose is not None:
            rule, save_in = decomposition_rule(opdef), True
        if rule is not None:
            record(out, opdef.name, rule, tensors,
                   saved=tuple(tensors) if save_in else None,
                   save_output="output" in opdef.save, attrs=attrs)
    return out


_derived_rules: dict = {}


def decomposition_rule(opdef):
    """A derivative for a fused kernel whose op has none written: differentiate the decomposition.

    The decomposition is re-run from the saved inputs and differentiated with
    autograd.grad, so a backend's fused forward (a cuDNN convolution, say) needs no
    backward of its own and the gradient is the one the core's ops define. With
    create_graph the re-run stays in the graph, so higher derivatives work too.
    """
    rule = _derived_rules.get(opdef.name)
    if rule is None:
        def rule(ctx, g, decompose=opdef.decompose):
            from ..autograd.functional import grad
            from .grad_mode import enable_grad
            create = _grad_state.enabled
            wanted = [t for t, nxt in zip(ctx.saved, ctx.next) if nxt is not None]
            with enable_grad():
                out = decompose(*ctx.saved, **ctx.attrs)
                grads = iter(grad(out, wanted, g, create_graph=create, allow_unused=True))
            return tuple(next(grads) if nxt is not None else None for nxt in ctx.next)
        _derived_rules[opdef.name] = rule
    return rule
