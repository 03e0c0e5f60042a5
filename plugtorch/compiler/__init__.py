"""``plugtorch.compile``: capture the kernel calls of a call once, replay them after.

The first call with given arguments runs the function eagerly (a warm-up: optimizer state and
momentum buffers are made there, as CUDA-graph capture wants); the second runs it eagerly
again while every backend's dispatch table records the top-level kernel and primitive calls it
makes (a *capture*). Later calls replay that list: each recorded kernel called on the new input
arrays, the outputs of earlier calls and the arrays that existed before the capture
(parameters, buffers, optimizer state) — no Tensor wrappers for intermediates, no op
definitions read, no Python-level dispatch. The list is rewritten before it is replayed: each
result is dropped after its last use (as eager code frees its temporaries), chains of
elementwise primitives become one kernel where the backend has a fuser (``fusion.py``; CuPy)
and otherwise write into a temporary that is dead anyway (``reuse.py``; NumPy). A replay runs
the list as one generated Python function of straight-line calls (``trace.py``; its
``replay.source`` shows it). In-place kernels (BatchNorm's running statistics) update the real
arrays; random ops draw fresh values from the Generator they drew from while capturing, at its
current state. It is the CPU counterpart of CUDA-graph replay.

A whole training step can be captured (forward, ``backward()`` and ``optimizer.step()``).
Optimizers whose update is a registered op (Adam, AdamW, SGD) mark it *dynamic*: on replay its
attributes (step count; learning rate, betas, weight decay from the live param group, so
schedulers and edits work) are recomputed by the optimizer itself. Gradients and
out-of-place parameter updates made during the capture are written back after each replay
(``p.grad`` is current; an argument's gradient goes to that call's argument), and version
counters move as eager moved them.

**What is guarded** (``guards.py``). A replay runs only where it computes what eager would;
otherwise the call is captured again (up to 8 traces per argument structure are kept, so
``train()``/``eval()`` alternation replays both):

* the arguments: tensors' shapes, strides, dtypes, backends and ``requires_grad``; which
  tensor arguments are the same array; every other argument by type and exact value; grad
  mode, debug mode and the default dtype;
* an argument whose array is a parameter's, a buffer's or optimizer state's must be that
  array again (the function may read it through the module as well);
* every tensor the trace reads as a constant (parameters, buffers, optimizer state,
  closed-over tensors) still holds the same array, with the same ``requires_grad``; gradients
  the trace reads or makes are ``None`` where they were;
* the modules called while capturing, and every module of each model that owns a constant:
  their attributes (``training``, a dropout's ``p``), parameters, buffers, submodules and
  hooks are the same objects (``model.eval()``, ``model.fc = nn.Linear(...)``,
  ``model.fc.weight = nn.Parameter(...)``);
* each optimizer stepped: its param groups, their parameters, its state dicts and their
  tensors are the same objects (``load_state_dict``, ``add_param_group``), and SGD's
  momentum is on or off as it was;
* no autograd hook has been registered on a tensor since the capture;
* the Python state the function reads besides its tensors (``python_state.py``): the
  globals its code names, its closure cells and the objects passed to it, and through them
  the user functions it reaches and the contents of plain dicts, lists, tuples and
  namespaces (``argparse``'s, a user class's instance), three levels and 64 entries deep,
  under the names and constants that code uses; numbers and strings by type and exact value,
  anything else by identity (``SCALE = 3.0``, ``cfg["clip"] = 0.5``, ``args.lr = 0.01``).

What cannot be replayed runs eagerly instead, with a one-time warning naming the reason
(``fullgraph=True`` raises it instead), as ``torch.compile`` does on a graph break:

* tensor values read on the host mid-function (``.item()``, ``bool(t)``, value checks);
* a call under a dispatch mode that changes what ops compute (an ``autocast`` region, forward
  AD's dual level, ``vmap``), which a replay would skip (under a profiler, which only watches,
  it replays);
* Python-side state changed inside the function that the kernels depend on: an LR scheduler
  stepped, a generator made or reseeded, a module's attribute, parameter, buffer or hook
  assigned, a guarded global or closed-over value (a counter, a list appended to) changed
  (step, seed or assign outside the compiled function);
* modules with forward hooks, and autograd hooks that run (a replay would not run their Python);
* an optimizer whose update is computed from Python state a replay would not see (every
  optimizer but Adam, AdamW and SGD, today);
* a result that carries an autograd graph no ``backward()`` inside the function consumed;
* arrays that reached a kernel without passing through the dispatcher (computed outside
  plugtorch's ops), or random-generator state saved or restored;
* arguments that cannot be part of a guard (unhashable non-tensor values).

An optimizer making its state lazily during a capture makes that call eager and the next
one captures. Checks that read tensor values on the host (labels in range, indices in bounds)
are left out of captured code, as they are on device backends outside debug mode: a replay
cannot repeat a host read. Debug mode (part of the guard) keeps them, and so runs eagerly.

A replay returns tensors without autograd history (a loss it returns has had its backward).
**Not guarded**: Python state reached only through a module's own containers (a list
mutated in place on a module), a library object's internals, and what lies past the depth
and size limits above: as with CUDA graphs, a captured function must compute the same kernel
sequence for the same guard.
``tests/compile/test_compile_fuzz.py`` checks replays against eager execution under the changes
a training script makes between steps.
"""
from __future__ import annotations

import gc
import warnings
from collections.abc import Callable

from ..core import debug, engine
from ..core.dtypes import get_default_dtype
from ..core.grad_mode import _state as _grad_state
from ..core.optable import MODES
from ..core.tensor import Tensor
from .fusion import fuse_elementwise
from .guards import MODULE_VERSION, Guards, arguments_key, flatten, guarded_modules
from .python_state import changed_inside, python_state_guards
from .recording import CaptureError, Installed, ModuleCalls, capturing, dynamic_attrs, guard, not_capturable, rec
from .reuse import reuse_dead_buffers
from .trace import Build, Trace

__all__ = ["compile", "CompiledFunction", "CaptureError", "capturing", "not_capturable", "dynamic_attrs", "guard"]


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
        self.reused = 0  # elementwise calls of the latest capture that write into a dead temporary
        self.fused = 0  # elementwise chains of the latest capture fused into one kernel by the backend
        self.__wrapped__ = fn
        self.__doc__ = getattr(fn, "__doc__", None)

    def __repr__(self) -> str:
        return f"<plugtorch.compile of {self._fn!r}: {self.captures} capture(s), {self.replays} replay(s)>"

    def __getattr__(self, name):  # a compiled module still answers as the module
        module = self.__dict__.get("_module")
        if module is None:
            raise AttributeError(name)
        return getattr(module, name)

    def traces(self) -> list:
        """The traces recorded so far, most recently replayed first within each guard."""
        return [t for entry in self._traces.values() for t in entry.traces]

    def _fallback(self, reason: str):
        if self.fullgraph:
            raise CaptureError(f"plugtorch.compile(fullgraph=True): cannot capture {self._fn!r}: {reason}")
        if reason not in self._warned:
            self._warned.add(reason)
            warnings.warn(f"plugtorch.compile: running {getattr(self._fn, '__name__', self._fn)!r} eagerly: "
                          f"{reason}", stacklevel=3)

    def __call__(self, *args, **kwargs):
        if rec.active:  # called inside another capture: run eagerly, so that one records the kernels
            return self._fn(*args, **kwargs)
        if MODES.on and any(not mode.observes_only for mode in MODES.here() or ()):
            self._fallback("a dispatch mode that changes what ops compute is in force (autocast, forward AD, "
                           "vmap), and a replay would skip it")
            return self._fn(*args, **kwargs)
        tensors: list[Tensor] = []
        try:
            key = (_grad_state.enabled, debug.is_debug(), get_default_dtype(), arguments_key(args, kwargs, tensors))
        except TypeError as e:
            self._fallback(f"an argument cannot be guarded ({e})")
            return self._fn(*args, **kwargs)
        entry = self._traces.get(key)
        if entry is None:  # warm-up: optimizer state and buffers are made here, eagerly
            self._traces[key] = _Entry()
            return self._fn(*args, **kwargs)
        if entry.eager:
            return self._fn(*args, **kwargs)
        inputs = [t._data for t in tensors]
        traces = entry.traces
        for i, trace in enumerate(traces):
            ok = trace.guards.check(inputs, tensors)
            if ok:
                if i:  # the trace that holds now is likely to hold next time too
                    traces.insert(0, traces.pop(i))
                self.replays += 1
                return trace.replay(inputs, tensors)
            if ok is None:  # a constant tensor holds another array: this trace can never replay
                trace.dead = True
        if traces:
            entry.traces = traces = [t for t in traces if not t.dead]
        out, trace, reason = self._capture(args, kwargs, tensors)
        if reason is not None:
            if not rec.retry:  # a passing reason (state made lazily) is a longer warm-up: capture next call
                entry.eager = True
                self._fallback(reason)
            return out
        traces.insert(0, trace)
        del traces[_TRACES_PER_GUARD:]
        self.captures += 1
        return out

    def _capture(self, args, kwargs, tensors):
        from ..nn.modules.module import Module
        from ..optim.optimizer import Optimizer
        # arrays alive before the call may be used as constants (parameters, buffers, closures)
        # type(), not isinstance: isinstance asks lazily imported modules for __class__ and imports them
        alive, modules, optimizers = [], [], []
        for o in gc.get_objects():
            kind = type(o)
            if issubclass(kind, Tensor):
                alive.append(o)
            elif issubclass(kind, Module):
                modules.append(o)
            elif issubclass(kind, Optimizer):
                optimizers.append(o)
        owners = {id(o._data): ("data", o) for o in alive}
        owners.update({id(o.grad._data): ("grad", o) for o in alive if o.grad is not None})
        grad_was_none = {id(o): o.grad is None for o in alive if o.requires_grad}
        versions = {id(o._vc): (o._vc, o._vc[0]) for o in alive}
        # held until the trace is built, so that no array the capture frees lends its id to a new one
        keep = [o._data for o in alive] + [o.grad._data for o in alive if o.grad is not None]
        backward_runs, module_version = engine.RUNS[0], MODULE_VERSION[0]
        state_guards = python_state_guards(self._fn, args, kwargs)  # the Python state it reads, as it is now
        rec.calls, rec.reason, rec.retry, rec.depth, rec.dynamic, rec.guards = [], None, False, 0, None, []
        rec.modules = {} if self._module is None else {id(self._module): self._module}
        with Installed(), ModuleCalls():
            rec.active = debug.capture.active = True
            try:
                out = self._fn(*args, **kwargs)
            finally:
                rec.active = debug.capture.active = False
        calls, reason, python_guards, called = rec.calls, rec.reason, rec.guards, list(rec.modules.values())
        rec.calls = rec.guards = rec.modules = None
        if reason is not None:
            return out, None, reason
        reason = changed_inside(state_guards)
        if reason is not None:
            return out, None, reason
        if MODULE_VERSION[0] != module_version:
            return out, None, ("it changes a module inside the function (assigns an attribute, parameter, buffer or "
                               "submodule, or adds a hook), which a replay would not repeat")
        build = Build(tensors, owners)
        steps = []
        for slot, (_name, fn, a, k, result, refresh, _backend) in enumerate(calls):
            steps.append((fn, tuple(build.spec(x) for x in a), tuple((n, build.spec(v)) for n, v in k.items()),
                          refresh))
            build.produced(result, slot)
        try:
            out_tensors: list[Tensor] = []
            structure = flatten(out, out_tensors)
        except TypeError as e:
            return out, None, f"its result cannot be rebuilt ({e})"
        outputs = [build.spec(t._data) for t in out_tensors]
        if any(t.requires_grad for t in out_tensors) and engine.RUNS[0] == backward_runs:
            return out, None, ("its result carries an autograd graph that no backward() inside it consumed "
                               "(replays return tensors without history)")
        if build.reason is not None:
            return out, None, build.reason
        writebacks, grad_guards = build.writebacks(alive, grad_was_none)
        kept = outputs + [s for _, _, s in writebacks]
        steps, names, self.fused = fuse_elementwise(steps, calls, kept, [c[0] for c in calls])
        steps, self.reused = reuse_dead_buffers(steps, calls, kept)
        consts = list(build.consts.values())
        pinned = _state_arrays(modules, optimizers)
        pins = [(i, t._data) for i, t in enumerate(tensors) if id(t._data) in pinned]
        guards = Guards(pins, consts, grad_guards,
                        guarded_modules(called, [owner for owner, _, _ in consts], modules),
                        python_guards + state_guards)
        moved = _moved_versions(versions, tensors)
        del keep
        return out, Trace(steps, outputs, structure, [t._backend for t in out_tensors], writebacks, guards, names,
                          moved), None


def _state_arrays(modules, optimizers) -> set[int]:
    """The ids of the arrays that hold state: parameters and buffers of every module, and the
    parameters and state of every optimizer. An argument holding one may be read through it too."""
    out: set[int] = set()
    for m in modules:
        for t in list(m._parameters.values()) + list(m._buffers.values()):
            if t is not None:
                out.add(id(t._data))
    for opt in optimizers:
        out.update(id(p._data) for group in opt.param_groups for p in group["params"])
        for state in opt.state.values():
            if isinstance(state, dict):
                out.update(id(v._data) for v in state.values() if isinstance(v, Tensor))
    return out


def _moved_versions(before: dict, args: list) -> list:
    """(argument position or version counter, how far the call moved it) for each counter of a
    tensor alive before the call that moved: a replay moves them alike."""
    position = {}
    for i, t in reversed(list(enumerate(args))):
        position[id(t._vc)] = i
    moved = []
    for key, (vc, was) in before.items():
        if vc[0] != was:
            moved.append((position.get(key, vc), vc[0] - was))
    return moved


class _Entry:
    """The traces of one guard key, and whether calls with it run eagerly for good."""

    __slots__ = ("traces", "eager")

    def __init__(self):
        self.traces: list[Trace] = []
        self.eager = False


_TRACES_PER_GUARD = 8  # as torch.compile's cache_size_limit: beyond it, the oldest is dropped


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
        from ..nn.modules.module import Module
        if isinstance(target, Module):
            return CompiledFunction(target.__call__, fullgraph=fullgraph, module=target)
        if not callable(target):
            raise TypeError(f"plugtorch.compile expects a function or an nn.Module, got {type(target).__name__}")
        return CompiledFunction(target, fullgraph=fullgraph)
    return apply if model is None else apply(model)

