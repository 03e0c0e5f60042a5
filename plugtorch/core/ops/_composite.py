"""Running composite ops: a backend's kernel when it has one, else the core's decomposition.

Two flavours, both giving a backend the chance to register a faster kernel:

* ``call_op`` (dispatch): the decomposition runs op by op, so autograd differentiates
  it; the op's ``derivative`` is only used with a backend kernel.
* :func:`call_fused`: the decomposition runs under ``no_grad`` as if it were a kernel,
  and one graph node with the op's own ``derivative`` is recorded. Used where the
  decomposition's autograd would be wasteful (many nodes for one activation) or
  wrong at a point where PyTorch picks a subgradient (``norm`` at zero).

Either way the derivative rule is exercised on every backend, so the conformance
suite checks it even before any backend provides a fused kernel.
"""
from __future__ import annotations

import functools
import inspect

from ..dispatch import call_op, needs_grad, record, same_backend
from ..grad_mode import no_grad
from ..registry import OpDef


def composite(ops: list, name: str, decompose, doc: str, derivative=None, save=()) -> OpDef:
    op = OpDef(name, decompose=decompose, derivative=derivative, save=tuple(save), doc=doc)
    ops.append(op)
    return op


def composite_op(ops: list, name: str | None = None):
    """Decorator: register ``fn`` (its docstring's first line is the op's doc) as a composite op.

    The returned function runs ``fn`` itself unless the first argument's backend has a
    kernel named like the op; the kernel then receives the native array and the other
    arguments by name (as with ``call_op``). The common path costs one dict lookup.
    """
    def deco(fn):
        doc = (fn.__doc__ or "").strip().split("\n")[0]
        opdef = composite(ops, name or fn.__name__, fn, doc)
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def op(input, *args, **kwargs):
            backend = getattr(input, "_backend", None)
            if backend is not None and opdef.name in backend.kernels:
                bound = sig.bind(input, *args, **kwargs)
                bound.apply_defaults()
                attrs = dict(list(bound.arguments.items())[1:])
                return call_op(opdef, (input,), attrs, backend)
            return fn(input, *args, **kwargs)
        op.opdef = opdef
        return op
    return deco


def call_fused(opdef: OpDef, tensors: tuple, attrs: dict):
    backend = same_backend(opdef.name, tensors)
    if opdef.name in backend.kernels:
        return call_op(opdef, tensors, attrs, backend)
    if not needs_grad(*tensors):
        return opdef.decompose(*tensors, **attrs)
    with no_grad():
        out = opdef.decompose(*tensors, **attrs)
    if any(out is t for t in tensors):
        out = out.detach()  # never attach a node to an input
    save_in = "inputs" in opdef.save
    return record(out, opdef.name, opdef.derivative, tensors,
                  saved=tuple(tensors) if save_in else None,
                  save_output="output" in opdef.save, attrs=attrs)
