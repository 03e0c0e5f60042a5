"""``plugtorch.compile``: capture the kernel calls of a forward pass once, replay them after.

The first call for a given *guard* (shapes, strides, dtypes and backends of the tensor arguments, the
other arguments, grad and debug mode, a module's training flags and parameter arrays) runs
the function eagerly while every backend's dispatch table records the top-level kernel and
primitive calls it makes. Later calls with the same guard replay that list: each recorded
kernel called on the new input arrays, the outputs of earlier calls and the arrays that
existed before the capture (parameters, buffers) — no Tensor wrappers for intermediates, no
op definitions read, no Python-level dispatch. The recorded list is rewritten before it is
replayed: each result is dropped after its last use (as eager code frees its temporaries),
chains of elementwise primitives become one kernel where the backend has a fuser
(``fusion.py``; CuPy) and otherwise write into a temporary that is dead anyway (``reuse.py``;
NumPy). A replay runs the list as one generated Python function of straight-line calls
(``trace.py``; its ``replay.source`` shows it). The guard includes the tensor arguments'
layouts (strides), since the kernels lay out their results after their inputs'. In-place
kernels (BatchNorm's running statistics) update the real arrays; random ops draw fresh values
from the Generator they drew from while capturing, at its current state. It is the CPU
counterpart of CUDA-graph replay.

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

import gc
import warnings
from typing import Any, Callable

from ..core import debug, engine
from ..core.grad_mode import _state as _grad_state
from ..core.tensor import Tensor
from .recording import CaptureError, Installed, capturing, dynamic_attrs, guard, not_capturable, rec
from .fusion import fuse_elementwise
from .reuse import reuse_dead_buffers
from .trace import Build, Trace, flatten

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

    def _guard(self, args, kwargs):
        tensors: list[Tensor] = []
        key: list[Any] = [_grad_state.enabled, debug.is_debug(), flatten((args, kwargs), tensors)]
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
        if rec.active:  # called inside another capture: run eagerly, so that one records the kernels
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
        rec.calls, rec.reason, rec.depth, rec.dynamic, rec.guards = [], None, 0, None, []
        with Installed():
            rec.active = debug.capture.active = True
            try:
                out = self._fn(*args, **kwargs)
            finally:
                rec.active = debug.capture.active = False
        calls, reason, guards = rec.calls, rec.reason, rec.guards
        rec.calls = rec.guards = None
        if reason is not None:
            return out, None, reason
        build = Build([t._data for t in tensors], owners)
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
        del keep
        return out, Trace(steps, outputs, structure, [t._backend for t in out_tensors], build.consts,
                           writebacks, guards, grad_guards, names), None


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
        from ..nn.modules.module import Module
        if isinstance(target, Module):
            return CompiledFunction(target.__call__, fullgraph=fullgraph, module=target)
        if not callable(target):
            raise TypeError(f"plugtorch.compile expects a function or an nn.Module, got {type(target).__name__}")
        return CompiledFunction(target, fullgraph=fullgraph)
    return apply if model is None else apply(model)

