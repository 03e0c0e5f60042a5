"""The profiler's dispatch mode: one :class:`Event` per op call, user range (``record_function``)
and backward node, nested as they ran. ``plugtorch.profiler`` builds its tables and traces from
them.

An op that runs a backend kernel is one event. An op with no kernel on the backend runs its
decomposition with the mode back in force, so the ops it is written with are events nested in
it, as torch shows ``aten::linear`` holding ``aten::t`` and ``aten::addmm``. The backward pass
runs each node inside two ranges named as torch names them (``autograd::engine::evaluate_function:
MmBackward0`` holding ``MmBackward0``; the engine calls :meth:`ProfilingMode.node_step`), and the
ops of the node's rule come through dispatch, nested in them.
"""
from __future__ import annotations

import os
import threading
import time
import traceback
from typing import Any

from . import dispatch
from .dispatch import _decomposed, call_op
from .graph import OutputNode
from .optable import DispatchMode

__all__ = ["Event", "ProfilingMode", "ACTIVE", "begin_range", "end_range"]

# the modes recording now (a record_function range is opened in each)
ACTIVE: list[ProfilingMode] = []

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# frames of these are the profiler's own, never shown as where an op was called from
_OWN = (os.path.join(_PKG, "core") + os.sep, os.path.join(_PKG, "profiler") + os.sep,
        os.path.join(_PKG, "autograd", "profiler.py"))


class Event:
    """One op call, user range or backward node: times in ns of ``time.perf_counter_ns``."""

    __slots__ = ("id", "name", "kind", "backend", "kernel", "shapes", "dtypes", "start_ns", "end_ns", "tid",
                 "stack", "memory", "parent", "children", "device_ns", "_device_marks")

    def __init__(self, id_: int, name: str, kind: str, tid: int) -> None:
        self.id = id_
        self.name = name
        self.kind = kind              # "cpu_op" (an op, a backward range) or "user_annotation"
        self.backend: str | None = None
        self.kernel: bool | None = None  # True: a kernel ran; False: the decomposition did
        self.shapes: list | None = None  # per operand: its shape, [] for a number or None
        self.dtypes: list | None = None  # per operand: its dtype's name, "Scalar" or ""
        self.tid = tid
        self.stack: list[str] = []
        self.memory = 0               # bytes allocated for the op's outputs (profile_memory)
        self.parent: Event | None = None
        self.children: list[Event] = []
        self.device_ns = 0            # time on the device (CUDA activity, a device backend)
        self._device_marks: Any = None
        self.start_ns = time.perf_counter_ns()
        self.end_ns = self.start_ns


class ProfilingMode(DispatchMode):
    """Records what runs while it is in force: ``events`` in the order they began."""

    observes_only = True  # a compiled function replays under it (and shows as no op events)

    def __init__(self, record_shapes: bool = False, profile_memory: bool = False, with_stack: bool = False,
                 device_timing: bool = False) -> None:
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.device_timing = device_timing  # time ops of device backends with their events
        self.events: list[Event] = []
        self._open: dict[int, list[Event]] = {}  # per thread: the events begun and not ended

    # -- ranges ------------------------------------------------------------------------
    def begin(self, name: str, kind: str = "cpu_op") -> Event:
        tid = threading.get_ident()
        ev = Event(len(self.events), name, kind, tid)
        open_ = self._open.setdefault(tid, [])
        if open_:
            ev.parent = open_[-1]
            ev.parent.children.append(ev)
        if self.with_stack:
            ev.stack = _user_stack()
        open_.append(ev)
        self.events.append(ev)
        ev.start_ns = time.perf_counter_ns()  # after the bookkeeping, which is not the event's time
        return ev

    def end(self, ev: Event) -> None:
        ev.end_ns = time.perf_counter_ns()
        open_ = self._open.get(ev.tid, [])
        if open_ and open_[-1] is ev:
            open_.pop()
        elif ev in open_:  # ranges left out of order (a record_function exited late)
            open_.remove(ev)

    # -- what the mode sees ------------------------------------------------------------
    def dispatch(self, opdef, operands, attrs):
        tensor = dispatch.Tensor
        backend = next((o._backend for o in operands if isinstance(o, tensor)), None)
        if backend is None:  # no tensor (an fx Proxy, or the op's own error to raise): nothing ran
            return call_op(opdef, operands, attrs)
        kernel = opdef.name in backend.kernels or opdef.decompose is None
        dtypes = [o.dtype.name if isinstance(o, tensor) else ("" if o is None else "Scalar") for o in operands]
        shapes = [list(o.shape) if isinstance(o, tensor) else [] for o in operands] if self.record_shapes else None
        ev = self.begin(opdef.name)
        ev.backend, ev.kernel, ev.dtypes, ev.shapes = backend.name, kernel, dtypes, shapes
        marks = _device_marks(backend) if self.device_timing and kernel else None
        try:
            if kernel:
                out = call_op(opdef, operands, attrs)
            else:  # the decomposition, op by op, with the mode in force to see them
                with self:
                    out = _decomposed(opdef, backend, operands, attrs)
        finally:
            if marks is not None:
                marks[1].record()
                ev._device_marks = marks
            self.end(ev)
        if self.profile_memory and kernel and not opdef.view:
            ev.memory = _nbytes(out)
        return out

    def node_step(self, step, node, g) -> None:
        """The engine runs backward node ``node`` by ``step(node, g)`` here, in torch's ranges."""
        if g is None or type(node) is OutputNode:  # nothing flows through it, or it only files g for
            step(node, g)                              # its node (a multi-output Function's), run after
            return
        name = node.name()
        outer = self.begin("autograd::engine::evaluate_function: " + name)
        inner = self.begin(name)
        try:
            step(node, g)
        finally:
            self.end(inner)
            self.end(outer)

    def finish(self) -> None:
        """Close what is still open and read the device timings (waits for the device once)."""
        for open_ in self._open.values():
            for ev in reversed(open_):
                ev.end_ns = time.perf_counter_ns()
            open_.clear()
        for ev in self.events:
            marks = ev._device_marks
            if marks is not None:
                marks[1].synchronize()
                ev.device_ns = int(marks[2](marks[0], marks[1]) * 1e6)  # ms -> ns
                ev._device_marks = None


def begin_range(name: str) -> list[tuple[ProfilingMode, Event]]:
    """A user range (``record_function``) opened in every recording mode."""
    return [(mode, mode.begin(name, "user_annotation")) for mode in ACTIVE]


def end_range(opened: list[tuple[ProfilingMode, Event]]) -> None:
    for mode, ev in opened:
        mode.end(ev)


def _device_marks(backend) -> Any:
    """(start, end, elapsed_ms) CUDA events of a device backend's array module, the start recorded
    now; None for a backend computing on the host."""
    if backend.accelerator != "cuda":
        return None
    cuda = getattr(backend.array_module, "cuda", None)
    if cuda is None or not hasattr(cuda, "Event"):
        return None
    start, stop = cuda.Event(), cuda.Event()
    start.record()
    return start, stop, cuda.get_elapsed_time


def _nbytes(out: Any) -> int:
    tensor = dispatch.Tensor
    if isinstance(out, tensor):
        return out.numel() * out.element_size()
    if isinstance(out, (tuple, list)):
        return sum(_nbytes(o) for o in out)
    return 0


def _user_stack() -> list[str]:
    """Where the op was called from, innermost first, as torch writes it: ``file(line): function``."""
    frames = traceback.extract_stack()
    return [f"{f.filename}({f.lineno}): {f.name}" for f in reversed(frames)
            if not f.filename.startswith(_OWN) and not f.filename.startswith("<plugtorch")]  # generated fronts
