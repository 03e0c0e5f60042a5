"""A captured call as data: where each argument of each recorded kernel call comes from
(an input, an earlier call's output, a constant, a generator, a gradient), and its replay."""
from __future__ import annotations

from typing import Callable

import numpy

from ..core.dispatch import wrap
from ..core.plugins import get_registry
from ..core.random import ALL_GENERATORS
from ..core.ops.shape import _strides
from ..core.tensor import Tensor


_IN, _SLOT, _CONST, _GEN, _SEQ, _GRAD = range(6)


class Build:
    """Turns the recorded calls into specs; remembers which tensor owns each constant array."""

    def __init__(self, inputs: list, owners: dict[int, tuple]):
        self.sources: dict[int, tuple] = {id(a): (_IN, i) for i, a in enumerate(inputs)}
        self.owners = owners  # id(array) -> ("data" or "grad", a tensor alive before the capture)
        self.consts: dict[int, tuple] = {}  # id(array) -> (owner, array): checked before each replay
        self.grad_reads: dict[int, Tensor] = {}  # tensors whose .grad a replay reads as it is then
        self.reason: str | None = None
        self.generators = {id(g): (gen, name) for gen in list(ALL_GENERATORS) for name, g in gen._native.items()}

    def spec(self, obj) -> tuple:
        if obj is None or isinstance(obj, (bool, int, float, str, numpy.generic)):
            return (_CONST, obj)  # immutable values, part of what the guard fixes
        if type(obj) in (tuple, list):
            return (_SEQ, type(obj), tuple(self.spec(o) for o in obj))
        src = self.sources.get(id(obj))
        if src is not None:
            return src
        if id(obj) in self.generators:
            return (_GEN,) + self.generators[id(obj)]
        if hasattr(obj, "shape") and hasattr(obj, "dtype"):
            owner = self.owners.get(id(obj))
            if owner is not None and owner[0] == "grad":  # p.grad is a new tensor after each step
                self.grad_reads[id(owner[1])] = owner[1]
                return (_GRAD, owner[1])
            if owner is not None:
                self.consts[id(obj)] = (owner[1], obj)
            elif self.reason is None:
                self.reason = ("an array reached a kernel without passing through plugtorch's dispatcher "
                               f"(shape {tuple(obj.shape)}, dtype {obj.dtype}): it was computed outside plugtorch ops")
        return (_CONST, obj)

    def produced(self, out, slot: int) -> None:
        if hasattr(out, "shape"):
            self.sources[id(out)] = (_SLOT, slot, None)
        elif type(out) is tuple:
            for k, o in enumerate(out):
                if hasattr(o, "shape"):
                    self.sources[id(o)] = (_SLOT, slot, k)

    def writebacks(self, tensors, grad_was_none: dict[int, bool]) -> tuple[list, list]:
        """What a replay stores into tensors alive before the capture: (tensor, "data", spec) where
        the capture replaced a tensor's array (``p.data = ...``), (tensor, "grad", spec) where it
        made or replaced its gradient; and (tensor, grad was None) guards, since a gradient that
        was None is made afresh and one that was not may be accumulated into."""
        out = []
        grad_guards = [(t, False) for t in self.grad_reads.values()]
        for t in tensors:
            src = self.sources.get(id(t._data))
            if src is not None and src[0] == _SLOT:
                out.append((t, "data", src))
            g = t.grad
            if g is not None:
                src = self.sources.get(id(g._data))
                if src is not None and src[0] == _SLOT:
                    out.append((t, "grad", src))
                    grad_guards.append((t, grad_was_none.get(id(t), True)))
        return out, grad_guards


def _resolver(spec) -> Callable:
    """A function (inputs, slots) -> the value ``spec`` names, for a fast replay loop."""
    kind = spec[0]
    if kind == _IN:
        i = spec[1]
        return lambda inputs, slots: inputs[i]
    if kind == _SLOT:
        j, k = spec[1], spec[2]
        if k is None:
            return lambda inputs, slots: slots[j]
        return lambda inputs, slots: slots[j][k]
    if kind == _CONST:
        value = spec[1]
        return lambda inputs, slots: value
    if kind == _GRAD:
        t = spec[1]
        return lambda inputs, slots: t.grad._data  # as it is now (guarded: not None)
    if kind == _GEN:
        gen, name = spec[1], spec[2]
        return lambda inputs, slots: gen.native(get_registry().backends[name])  # its current stream
    seq, parts = spec[1], [_resolver(s) for s in spec[2]]
    return lambda inputs, slots: seq(r(inputs, slots) for r in parts)


class Trace:
    def __init__(self, steps, outputs, out_structure, backends, consts, writebacks, guards, grad_guards,
                 names=()):
        self.names = list(names)  # the recorded op or primitive name of each step, for profiles and reprs
        # attrs that are all constants (the usual case) are one prebuilt dict, not resolved per call
        self.steps = [(fn, tuple(_resolver(s) for s in a),
                       {n: s[1] for n, s in k} if all(s[0] == _CONST for _, s in k)
                       else tuple((n, _resolver(s)) for n, s in k), refresh)
                      for fn, a, k, refresh in steps]
        self.outputs = [_resolver(s) for s in outputs]
        self.structure, self.backends = out_structure, backends
        self.consts = list(consts.values())
        self.writebacks = [(t, kind, _resolver(s)) for t, kind, s in writebacks]
        self.release = liveness(steps, list(outputs) + [s for _, _, s in writebacks])[0]
        self.guards = guards
        self.grad_guards = grad_guards

    def valid(self) -> bool:
        """Whether the constants are still the tensors' arrays and the Python guards hold."""
        for owner, array in self.consts:
            if owner._data is not array:
                return False
        for t, was_none in self.grad_guards:
            if (t.grad is None) != was_none:
                return False
        return all(fn() == value for fn, value in self.guards)

    def replay(self, inputs: list):
        slots: list = []
        append = slots.append
        for (fn, args, kwargs, refresh), release in zip(self.steps, self.release):
            if refresh is not None:
                append(fn(*[r(inputs, slots) for r in args], **refresh()))
            elif type(kwargs) is dict:
                append(fn(*[r(inputs, slots) for r in args], **kwargs))
            else:
                append(fn(*[r(inputs, slots) for r in args], **{n: r(inputs, slots) for n, r in kwargs}))
            for j in release:  # results no later step reads go now, as eager frees its temporaries
                slots[j] = None
        for t, kind, r in self.writebacks:
            value = r(inputs, slots)
            if kind == "data":
                t._data = value
                t._vc[0] += 1
            else:  # a new tensor, as eager's backward gives .grad (it never writes into the old one)
                t.grad = wrap(value, t._backend)
        tensors = [wrap(r(inputs, slots), b) for r, b in zip(self.outputs, self.backends)]
        return unflatten(self.structure, iter(tensors))


def slots_read(spec, into: set) -> None:
    if spec[0] == _SLOT:
        into.add(spec[1])
    elif spec[0] == _SEQ:
        for s in spec[2]:
            slots_read(s, into)


def liveness(steps, kept) -> tuple[list[tuple[int, ...]], dict[int, int], set[int]]:
    """(for each step, the slots to drop once it has run; the step each dropped slot dies at;
    the slots kept to the end). A slot dies after the last step, output or write-back that
    reads it (one nothing reads, right after the step that made it). Without this a replay
    would hold every temporary of the step until its end, where eager frees each as soon as
    its last use is done, and the allocator hands back warm memory."""
    last = {}
    for i, (_fn, args, kwargs, _refresh) in enumerate(steps):
        read: set = set()
        for s in list(args) + [s for _, s in kwargs]:
            slots_read(s, read)
        for j in read:
            last[j] = i
    forever: set = set()
    for s in kept:
        slots_read(s, forever)
    release: list[list[int]] = [[] for _ in steps]
    dies_at: dict[int, int] = {}
    for j in range(len(steps)):
        if j not in forever:
            dies_at[j] = max(last.get(j, j), j)
            release[dies_at[j]].append(j)
    return [tuple(r) for r in release], dies_at, forever


# -- flattening arguments and results ---------------------------------------------------------

def flatten(obj, tensors: list):
    """A hashable structure of ``obj`` with its tensors replaced by positions in ``tensors``."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        # the layout too: kernels lay out their results after their inputs', and the trace's
        # views, copies and reused buffers were decided for the layouts seen at capture
        return ("T", obj.shape, _strides(obj), obj.dtype.name, obj._backend.name, obj.requires_grad)
    if type(obj) in (tuple, list):
        return (type(obj).__name__,) + tuple(flatten(o, tensors) for o in obj)
    if type(obj) is dict:
        return ("dict",) + tuple((k, flatten(v, tensors)) for k, v in sorted(obj.items(), key=repr))
    hash(obj)  # TypeError for an unhashable argument: it cannot be part of a guard
    return ("V", obj)


def unflatten(structure, tensors):
    tag = structure[0]
    if tag == "T":
        return next(tensors)
    if tag in ("tuple", "list"):
        items = [unflatten(s, tensors) for s in structure[1:]]
        return tuple(items) if tag == "tuple" else items
    if tag == "dict":
        return {k: unflatten(s, tensors) for k, s in structure[1:]}
    return structure[1]


