"""A captured call as data: where each argument of each recorded kernel call comes from
(an input, an earlier call's output, a constant, a generator, a gradient), and its replay."""
from __future__ import annotations

import keyword
import math
from collections.abc import Callable

import numpy

from ..core.dispatch import wrap
from ..core.plugins import get_registry
from ..core.random import ALL_GENERATORS
from ..core.tensor import Tensor
from .guards import Guards, unflatten

_IN, _SLOT, _CONST, _GEN, _SEQ, _GRAD = range(6)


class Build:
    """Turns the recorded calls into specs; remembers which tensor owns each constant array.

    A tensor the function was given as an argument is named by its position (``target``), not
    kept: a replay's write-backs, gradient reads and guards then reach the tensors of *that*
    call, as eager code would."""

    def __init__(self, args: list[Tensor], owners: dict[int, tuple]):
        self.sources: dict[int, tuple] = {}
        for i, t in reversed(list(enumerate(args))):  # an array passed twice is the first position
            self.sources[id(t._data)] = (_IN, i)
        self.positions = {id(t): i for i, t in reversed(list(enumerate(args)))}
        self.owners = owners  # id(array) -> ("data" or "grad", a tensor alive before the capture)
        self.consts: dict[int, tuple] = {}  # id(array) -> (owner, array, requires_grad): checked before each replay
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
                return (_GRAD, self.target(owner[1]))
            if owner is not None:
                self.consts[id(obj)] = (owner[1], obj, owner[1].requires_grad)
            elif self.reason is None:
                self.reason = ("an array reached a kernel without passing through plugtorch's dispatcher "
                               f"(shape {tuple(obj.shape)}, dtype {obj.dtype}): it was computed outside plugtorch ops")
        return (_CONST, obj)

    def target(self, t: Tensor) -> Tensor | int:
        """An argument tensor as its position, any other tensor as itself."""
        return self.positions.get(id(t), t)

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
        grad_guards = [(self.target(t), False) for t in self.grad_reads.values()]
        for t in tensors:
            src = self.sources.get(id(t._data))
            if src is not None and src[0] == _SLOT:
                out.append((self.target(t), "data", src))
            g = t.grad
            if g is not None:
                src = self.sources.get(id(g._data))
                if src is not None and src[0] == _SLOT:
                    out.append((self.target(t), "grad", src))
                    grad_guards.append((self.target(t), grad_was_none.get(id(t), True)))
        return out, grad_guards


class _Source:
    """Writes the replay of a trace as one Python function: straight-line calls on local
    variables, with the kernels and the constant objects as names of its namespace. The
    interpreted loop it replaces resolved each argument through a closure and built a list per
    call."""

    def __init__(self):
        self.namespace: dict = {"wrap": wrap, "unflatten": unflatten}
        self.inputs: set[int] = set()
        self.args: set[int] = set()

    def name(self, prefix: str, obj) -> str:
        key = f"{prefix}{len(self.namespace)}"
        self.namespace[key] = obj
        return key

    def expr(self, spec) -> str:
        kind = spec[0]
        if kind == _IN:
            self.inputs.add(spec[1])
            return f"i{spec[1]}"
        if kind == _SLOT:
            return f"s{spec[1]}" if spec[2] is None else f"s{spec[1]}[{spec[2]}]"
        if kind == _CONST:
            return self.const(spec[1])
        if kind == _GRAD:
            return f"{self.tensor(spec[1])}.grad._data"  # as it is now (guarded: not None)
        if kind == _GEN:
            gen, backend = spec[1], spec[2]  # the generator's current stream on that backend
            return f"{self.name('g', gen)}.native({self.name('r', get_registry)}().backends[{backend!r}])"
        seq = spec[1]
        if seq is tuple and all(s[0] == _CONST for s in spec[2]):
            return self.name("c", tuple(s[1] for s in spec[2]))  # built once: a tuple cannot change
        parts = [self.expr(s) for s in spec[2]]
        if seq is tuple:
            return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"
        return f"[{', '.join(parts)}]"  # a list: a new one each call, as recorded

    def tensor(self, target) -> str:
        """An argument tensor (its position) as this call's argument, any other as a name."""
        if type(target) is int:
            self.args.add(target)
            return f"a{target}"
        return self.name("t", target)

    def const(self, value) -> str:
        # literals that read back as the same value are written out; anything else is a name
        if value is None or type(value) in (bool, int, str) or (type(value) is float and math.isfinite(value)):
            return repr(value)
        return self.name("c", value)

    def call(self, fn, args, kwargs, refresh) -> str:
        parts = [self.expr(s) for s in args]
        if refresh is not None:  # attrs recomputed for each replay (an optimizer's step count)
            parts.append(f"**{self.name('a', refresh)}()")
        elif all(n.isidentifier() and not keyword.iskeyword(n) for n, _ in kwargs):
            parts += [f"{n}={self.expr(s)}" for n, s in kwargs]
        else:
            parts.append("**{" + ", ".join(f"{n!r}: {self.expr(s)}" for n, s in kwargs) + "}")
        return f"{self.name('f', fn)}({', '.join(parts)})"


def replay_function(steps, release, outputs, backends, structure, writebacks, versions=()) -> Callable:
    """The function (input arrays, argument tensors) -> the trace's result: each step's kernel
    call in order, the write-backs, the version counters moved as eager moved them (so autograd
    still sees an in-place change), then the outputs wrapped as tensors."""
    src = _Source()
    body = []
    for i, ((fn, args, kwargs, refresh), dropped) in enumerate(zip(steps, release)):
        body.append(f"s{i} = {src.call(fn, args, kwargs, refresh)}")
        # results no later step reads go now, as eager frees its temporaries
        body += [f"del s{j}" for j in dropped]
    for t, kind, spec in writebacks:
        value, name = src.expr(spec), src.tensor(t)
        if kind == "data":
            body += [f"{name}._data = {value}"]
        else:  # a new tensor, as eager's backward gives .grad (it never writes into the old one)
            body.append(f"{name}.grad = wrap({value}, {name}._backend)")
    for t, delta in versions:  # an argument (position) or a version counter shared by tensors
        body.append(f"{src.tensor(t)}._vc[0] += {delta}" if type(t) is int else f"{src.name('v', t)}[0] += {delta}")
    results = [f"wrap({src.expr(s)}, {src.name('b', b)})" for s, b in zip(outputs, backends)]
    body.append(f"return unflatten({src.name('u', structure)}, iter([{', '.join(results)}]))")
    head = [f"i{i} = inputs[{i}]" for i in sorted(src.inputs)] + [f"a{i} = args[{i}]" for i in sorted(src.args)]
    code = "def replay(inputs, args=()):\n" + "".join(f"    {line}\n" for line in head + body)
    exec(compile(code, "<plugtorch.compile replay>", "exec"), src.namespace)
    replay = src.namespace["replay"]
    replay.source = code  # what a replay runs, for debugging
    return replay


class Trace:
    """A captured call: its steps, what a replay returns and writes back, and its ``guards``."""

    dead = False  # set once a constant tensor holds another array: it can never replay again

    def __init__(self, steps, outputs, out_structure, backends, writebacks, guards: Guards, names=(),
                 versions=()):
        self.names = list(names)  # the recorded op or primitive name of each step, for profiles and reprs
        self.outputs, self.structure, self.backends = list(outputs), out_structure, backends
        self.writebacks = list(writebacks)
        self.versions = list(versions)
        self.release = liveness(steps, self.outputs + [s for _, _, s in self.writebacks])[0]
        self.guards = guards
        self.steps = steps

    @property
    def steps(self) -> list:
        """(kernel, arg specs, kwarg specs, refresh) per call. Setting them (a profiler wrapping
        each kernel) writes the replay function again."""
        return self._steps

    @steps.setter
    def steps(self, steps) -> None:
        self._steps = list(steps)
        self.replay = replay_function(self._steps, self.release, self.outputs, self.backends, self.structure,
                                      self.writebacks, self.versions)


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
