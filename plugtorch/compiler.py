"""``plugtorch.compile``: capture the kernel calls of a forward pass once, replay them after.

The first call for a given *guard* (shapes, dtypes and backends of the tensor arguments, the
other arguments, grad and debug mode, a module's training flags and parameter arrays) runs
the function eagerly while every backend's dispatch table records the top-level kernel and
primitive calls it makes. Later calls with the same guard replay that list: each recorded
kernel called on the new input arrays, the outputs of earlier calls and the arrays that
existed before the capture (parameters, buffers) — no Tensor wrappers for intermediates, no
op definitions read, no Python-level dispatch. In-place kernels (BatchNorm's running
statistics) update the real arrays; random ops draw fresh values from the Generator they
drew from while capturing, at its current state. It is the CPU counterpart of CUDA-graph
replay.

A whole training step can be captured (forward, ``backward()`` and ``optimizer.step()``):
the first call of each guard runs eagerly as a warm-up (optimizer state and momentum buffers
are made there, as CUDA-graph capture wants), the second is captured. Optimizers whose update
is a registered op (Adam, AdamW, SGD) mark it *dynamic*: on replay its attributes (step
count, learning rate from the live param group, so schedulers work) are recomputed by the
optimizer itself. Gradients and out-of-place parameter updates made during the capture are
written back into the real tensors after each replay (``p.grad`` is current), and a tensor
whose array was replaced since the capture (``p.data = ...``), an optimizer whose
parameters changed, or a new guard, triggers a new capture.

Checks that read tensor values on the host (labels in range, indices in bounds) are left out
of captured code, as they are on device backends outside debug mode: a replay cannot repeat
a host read. Debug mode (part of the guard) keeps them, and so runs eagerly.

What cannot be replayed runs eagerly instead, with a one-time warning naming the reason
(``fullgraph=True`` raises it instead), as ``torch.compile`` does on a graph break:

* tensor values read on the host mid-function (``.item()``, ``bool(t)``, value checks);
* Python-side state changed inside the function that the kernels depend on: an LR scheduler
  stepped, a generator reseeded (step or seed them outside the compiled function);
* an optimizer whose update is computed from Python state a replay would not see (every
  optimizer but Adam, AdamW and SGD, today);
* a result that carries an autograd graph no ``backward()`` inside the function consumed;
* arrays that reached a kernel without passing through the dispatcher (computed outside
  plugtorch's ops), or random-generator state saved or restored;
* arguments that cannot be part of a guard (unhashable non-tensor values).

A replay returns tensors without autograd history (a loss it returns has had its backward).
Python state the function reads besides its arguments and the above (a counter on ``self``,
a global) is not guarded: as with CUDA graphs, a captured function must compute the same
kernel sequence for the same guard.
"""
from __future__ import annotations

import contextlib
import gc
import threading
import warnings
from typing import Any, Callable

import numpy

from .core import debug, engine
from .core.dispatch import wrap
from .core.grad_mode import _state as _grad_state
from .core.plugins import get_registry
from .core.random import ALL_GENERATORS
from .core.tensor import Tensor

__all__ = ["compile", "CompiledFunction", "CaptureError"]

_RNG_PRIMITIVES = frozenset({"uniform", "normal", "randint", "permutation"})
_STATE_PRIMITIVES = frozenset({"generator_get_state", "generator_set_state"})


class CaptureError(RuntimeError):
    """Raised by ``plugtorch.compile(..., fullgraph=True)`` where capture is impossible."""


class _Recorder(threading.local):
    active: bool = False
    depth: int = 0
    calls: list | None = None
    reason: str | None = None
    dynamic: Callable | None = None  # refreshes the attrs of the next top-level call on replay
    guards: list | None = None  # (function, value at capture) pairs checked before each replay


_rec = _Recorder()
_install_lock = threading.Lock()


def capturing() -> bool:
    """Whether this thread is capturing for plugtorch.compile (for code that must say so)."""
    return _rec.active


def not_capturable(reason: str) -> None:
    """Make the current capture fall back to eager, naming ``reason`` (no-op when not capturing)."""
    if _rec.active and _rec.reason is None:
        _rec.reason = reason


@contextlib.contextmanager
def dynamic_attrs(op: str, refresh: Callable[[], dict]):
    """The call of ``op`` in this block gets its attrs from ``refresh()`` on each replay (an
    optimizer's step count and learning rate); ``refresh`` also makes the Python-side changes
    the eager code makes (counting the step). The block must make exactly that one top-level
    call, i.e. ``op`` must be served by a kernel: a decomposition's many calls would replay
    with the attrs of the capture, so the capture falls back instead."""
    if not _rec.active:
        yield
        return
    calls = _rec.calls
    before, _rec.dynamic = len(calls), refresh
    try:
        yield
    finally:
        _rec.dynamic = None
        made = calls[before:]
        if len(made) != 1 or made[0][0] != op or made[0][5] is not refresh:
            not_capturable(f"{op} runs as {len(made)} dispatched calls here (no fused kernel on this backend), "
                           "so its per-step attributes (step count, learning rate) cannot be refreshed")


def guard(value: Callable[[], Any]) -> None:
    """While capturing: replay only while ``value()`` equals what it is now (else capture again)."""
    if _rec.active:
        _rec.guards.append((value, value()))


def _recording(name: str, fn: Callable, primitive: bool) -> Callable:
    def call(*args, **kwargs):
        r = _rec
        if not r.active:
            return fn(*args, **kwargs)
        if primitive and name == "to_host" and r.reason is None:
            r.reason = "it reads tensor values on the host (.item(), bool(t), .numpy() or a value check) mid-call"
        if primitive and name in _STATE_PRIMITIVES and r.reason is None:
            r.reason = "it saves or restores random-generator state"
        if primitive and name == "generator" and r.reason is None:
            # the warm-up call made every generator this function draws from: a new one now
            # means it reseeds (manual_seed) inside, which a replay would not repeat
            r.reason = "it reseeds a random generator (manual_seed) inside the function"
        if r.depth or (primitive and name == "generator"):
            return fn(*args, **kwargs)
        refresh, r.dynamic = r.dynamic, None
        r.depth += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            r.depth -= 1
        r.calls.append((name, fn, args, kwargs, out, refresh))
        return out
    return call


class _Installed:
    """Recording wrappers on every available backend's dispatch tables, removed on exit."""

    def __enter__(self):
        _install_lock.acquire()
        self.saved = []
        for b in get_registry().backends.values():
            if not b.available:
                continue
            for table, primitive in ((b.kernels, False), (b.primitives, True)):
                original = dict(table)
                self.saved.append((table, original))
                for name, fn in original.items():
                    table[name] = _recording(name, fn, primitive)
        return self

    def __exit__(self, *exc):
        for table, original in self.saved:
            table.clear()
            table.update(original)
        _install_lock.release()


# -- argument specs: where each array of a recorded call comes from -------------------------

_IN, _SLOT, _CONST, _GEN, _SEQ, _GRAD = range(6)


class _Build:
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


class _Trace:
    def __init__(self, steps, outputs, out_structure, backends, consts, writebacks, guards, grad_guards):
        self.steps = [(fn, tuple(_resolver(s) for s in a), tuple((n, _resolver(s)) for n, s in k), refresh)
                      for fn, a, k, refresh in steps]
        self.outputs = [_resolver(s) for s in outputs]
        self.structure, self.backends = out_structure, backends
        self.consts = list(consts.values())
        self.writebacks = [(t, kind, _resolver(s)) for t, kind, s in writebacks]
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
        for fn, args, kwargs, refresh in self.steps:
            if refresh is not None:
                append(fn(*[r(inputs, slots) for r in args], **refresh()))
            elif kwargs:
                append(fn(*[r(inputs, slots) for r in args], **{n: r(inputs, slots) for n, r in kwargs}))
            else:
                append(fn(*[r(inputs, slots) for r in args]))
        for t, kind, r in self.writebacks:
            value = r(inputs, slots)
            if kind == "data":
                t._data = value
                t._vc[0] += 1
            elif t.grad is None:  # zeroed to None since (outside the function): a new gradient
                t.grad = wrap(value, t._backend)
            else:
                t.grad._data = value
                t.grad._vc[0] += 1
        tensors = [wrap(r(inputs, slots), b) for r, b in zip(self.outputs, self.backends)]
        return _unflatten(self.structure, iter(tensors))


# -- flattening arguments and results ---------------------------------------------------------

def _flatten(obj, tensors: list):
    """A hashable structure of ``obj`` with its tensors replaced by positions in ``tensors``."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return ("T", obj.shape, obj.dtype.name, obj._backend.name, obj.requires_grad)
    if type(obj) in (tuple, list):
        return (type(obj).__name__,) + tuple(_flatten(o, tensors) for o in obj)
    if type(obj) is dict:
        return ("dict",) + tuple((k, _flatten(v, tensors)) for k, v in sorted(obj.items(), key=repr))
    hash(obj)  # TypeError for an unhashable argument: it cannot be part of a guard
    return ("V", obj)


def _unflatten(structure, tensors):
    tag = structure[0]
    if tag == "T":
        return next(tensors)
    if tag in ("tuple", "list"):
        items = [_unflatten(s, tensors) for s in structure[1:]]
        return tuple(items) if tag == "tuple" else items
    if tag == "dict":
        return {k: _unflatten(s, tensors) for k, s in structure[1:]}
    return structure[1]


class CompiledFunction:
    """What ``plugtorch.compile`` returns for a function or a module."""

    def __init__(self, fn: Callable, *, fullgraph: bool = False, module=None):
        self._fn = fn
        self._module = module
        self.fullgraph = fullgraph
        self._traces: dict = {}
        self._warned: set[str] = set()
        self.captures = 0  # how many traces were recorded (a re-trace adds one)
        self.replays = 0
        self.__wrapped__ = fn
        self.__doc__ = getattr(fn, "__doc__", None)

    def __repr__(self) -> str:
        return f"<plugtorch.compile of {self._fn!r}: {self.captures} capture(s), {self.replays} replay(s)>"

    def __getattr__(self, name):  # a compiled module still answers as the module
        module = self.__dict__.get("_module")
        if module is None:
            raise AttributeError(name)
        return getattr(module, name)

    def _guard(self, args, kwargs):
        tensors: list[Tensor] = []
        key: list[Any] = [_grad_state.enabled, debug.is_debug(), _flatten((args, kwargs), tensors)]
        module = self._module
        if module is not None:
            modules, params = self._module_members()
            key.append(tuple((id(p._data), p.requires_grad, p._backend.name) for p in params))
            key.append(tuple(m.training for m in modules))
        return tuple(key), tensors

    def _module_members(self):
        """The module's submodules and tensors, walked again only when its structure changes."""
        cached = self.__dict__.get("_members")
        if cached is not None:
            modules, params, shape = cached
            if shape == tuple((len(m._parameters), len(m._buffers), len(m._modules)) for m in modules):
                return modules, params
        modules = list(self._module.modules())
        params = [t for t in list(self._module.parameters()) + list(self._module.buffers())]
        shape = tuple((len(m._parameters), len(m._buffers), len(m._modules)) for m in modules)
        self._members = (modules, params, shape)
        return modules, params

    def _fallback(self, reason: str):
        if self.fullgraph:
            raise CaptureError(f"plugtorch.compile(fullgraph=True): cannot capture {self._fn!r}: {reason}")
        if reason not in self._warned:
            self._warned.add(reason)
            warnings.warn(f"plugtorch.compile: running {getattr(self._fn, '__name__', self._fn)!r} eagerly: "
                          f"{reason}", stacklevel=3)

    def __call__(self, *args, **kwargs):
        if _rec.active:  # called inside another capture: run eagerly, so that one records the kernels
            return self._fn(*args, **kwargs)
        try:
            key, tensors = self._guard(args, kwargs)
        except TypeError as e:
            self._fallback(f"an argument cannot be guarded ({e})")
            return self._fn(*args, **kwargs)
        trace = self._traces.get(key)
        if trace is False:
            return self._fn(*args, **kwargs)
        if trace is None:  # warm-up: optimizer state and buffers are made here, eagerly
            self._traces[key] = _WARM
            return self._fn(*args, **kwargs)
        if trace is not _WARM and trace.valid():
            self.replays += 1
            return trace.replay([t._data for t in tensors])
        out, trace, reason = self._capture(args, kwargs, tensors)
        self._traces[key] = trace if reason is None else False
        if reason is not None:
            self._fallback(reason)
        else:
            self.captures += 1
        return out

    def _capture(self, args, kwargs, tensors):
        # arrays alive before the call may be used as constants (parameters, buffers, closures)
        # type(), not isinstance: isinstance asks lazily imported modules for __class__ and imports them
        alive = [o for o in gc.get_objects() if issubclass(type(o), Tensor)]
        owners = {id(o._data): ("data", o) for o in alive}
        owners.update({id(o.grad._data): ("grad", o) for o in alive if o.grad is not None})
        grad_was_none = {id(o): o.grad is None for o in alive if o.requires_grad}
        # held until the trace is built, so that no array the capture frees lends its id to a new one
        keep = [o._data for o in alive] + [o.grad._data for o in alive if o.grad is not None]
        backward_runs = engine.RUNS[0]
        _rec.calls, _rec.reason, _rec.depth, _rec.dynamic, _rec.guards = [], None, 0, None, []
        with _Installed():
            _rec.active = debug.capture.active = True
            try:
                out = self._fn(*args, **kwargs)
            finally:
                _rec.active = debug.capture.active = False
        calls, reason, guards = _rec.calls, _rec.reason, _rec.guards
        _rec.calls = _rec.guards = None
        if reason is not None:
            return out, None, reason
        build = _Build([t._data for t in tensors], owners)
        steps = []
        for slot, (_name, fn, a, k, result, refresh) in enumerate(calls):
            steps.append((fn, tuple(build.spec(x) for x in a), tuple((n, build.spec(v)) for n, v in k.items()),
                          refresh))
            build.produced(result, slot)
        try:
            out_tensors: list[Tensor] = []
            structure = _flatten(out, out_tensors)
        except TypeError as e:
            return out, None, f"its result cannot be rebuilt ({e})"
        outputs = [build.spec(t._data) for t in out_tensors]
        if any(t.requires_grad for t in out_tensors) and engine.RUNS[0] == backward_runs:
            return out, None, ("its result carries an autograd graph that no backward() inside it consumed "
                               "(replays return tensors without history)")
        if build.reason is not None:
            return out, None, build.reason
        writebacks, grad_guards = build.writebacks(alive, grad_was_none)
        del keep
        return out, _Trace(steps, outputs, structure, [t._backend for t in out_tensors], build.consts,
                           writebacks, guards, grad_guards), None


_WARM = object()  # a guard seen once: the next call captures


def compile(model=None, *, fullgraph: bool = False, dynamic=None, backend="plugtorch", mode=None,
            options=None, disable: bool = False):
    """Capture once and replay: ``plugtorch.compile(fn)`` or ``plugtorch.compile(module)``.

    As ``torch.compile``; ``dynamic``, ``backend``, ``mode`` and ``options`` are accepted for
    compatibility (shapes are always specialised: a new shape is a new capture). Used as a
    decorator with arguments (``@plugtorch.compile(fullgraph=True)``) when ``model`` is None.
    """
    def apply(target):
        if disable:
            return target
        from .nn.modules.module import Module
        if isinstance(target, Module):
            return CompiledFunction(target.__call__, fullgraph=fullgraph, module=target)
        if not callable(target):
            raise TypeError(f"plugtorch.compile expects a function or an nn.Module, got {type(target).__name__}")
        return CompiledFunction(target, fullgraph=fullgraph)
    return apply if model is None else apply(model)
