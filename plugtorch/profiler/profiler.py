"""``plugtorch.profiler.profile``: torch.profiler's context manager, its schedule and trace handler.

A profile records through a :class:`~plugtorch.core.profiling.ProfilingMode`, a dispatch mode in
force only while a step is recorded: with no profile, an op pays nothing more than the mode test
dispatch always makes. Events are named as the op table names ops (``matmul``, not
``aten::matmul``).
"""
from __future__ import annotations

import enum
import os
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from ..core import profiling
from .events import EventList, FunctionEvent
from .ranges import record_function

__all__ = ["profile", "schedule", "supported_activities", "tensorboard_trace_handler", "ProfilerAction",
           "ProfilerActivity", "kineto_available", "record_function"]


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 3


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def kineto_available() -> bool:
    return False  # plugtorch's profiler is its own: no Kineto library behind it


def supported_activities() -> set[ProfilerActivity]:
    """CPU, and CUDA where a backend declaring the CUDA accelerator is available."""
    from .. import cuda
    return {ProfilerActivity.CPU, ProfilerActivity.CUDA} if cuda.is_available() else {ProfilerActivity.CPU}


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0) -> Callable[[int], ProfilerAction]:
    """torch's schedule: skip ``skip_first`` steps, then cycles of ``wait`` idle, ``warmup`` and
    ``active`` recorded steps (the last one saved), ``repeat`` times (0: until the profile ends)."""
    def schedule_fn(step: int) -> ProfilerAction:
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait != 0:
            step += wait
        num_steps = wait + warmup + active
        if repeat > 0 and step / num_steps >= repeat:
            return ProfilerAction.NONE
        mod_step = step % num_steps
        if mod_step < wait:
            return ProfilerAction.NONE
        if mod_step < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod_step < num_steps - 1 else ProfilerAction.RECORD_AND_SAVE

    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), warmup={warmup} (need >= 0), "
            f"active={active} (need > 0), repeat={repeat} (need >= 0), skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results", stacklevel=2)
    return schedule_fn


def _default_schedule_fn(_: int) -> ProfilerAction:
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None, use_gzip: bool = False,
                              use_python_export: bool = False) -> Callable[[Any], None]:
    """An ``on_trace_ready`` that writes ``<worker_name>.<time_ns>.pt.trace.json`` into ``dir_name``
    (``worker_name`` defaults to ``<hostname>_<pid>``), the files TensorBoard's plugin reads."""
    def handler_fn(prof) -> None:
        nonlocal worker_name
        if not os.path.isdir(dir_name):
            try:
                os.makedirs(dir_name, exist_ok=True)
            except Exception as e:
                raise RuntimeError("Can't create directory: " + dir_name) from e
        if not worker_name:
            import socket
            worker_name = f"{socket.gethostname()}_{os.getpid()}"
        file_name = f"{worker_name}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, file_name))
    return handler_fn


class Recording:
    """One recording: the mode, in force from :meth:`start` to :meth:`stop`, and its events."""

    def __init__(self, record_shapes: bool, profile_memory: bool, with_stack: bool, device_timing: bool,
                 with_flops: bool = False) -> None:
        self.mode = profiling.ProfilingMode(record_shapes or with_flops, profile_memory, with_stack, device_timing)
        self.with_flops = with_flops
        self.origin_ns = 0
        self.events: EventList | None = None

    def start(self) -> None:
        self.origin_ns = time.perf_counter_ns()
        self.mode.__enter__()
        profiling.ACTIVE.append(self.mode)

    def stop(self) -> EventList:
        profiling.ACTIVE.remove(self.mode)
        self.mode.__exit__(None, None, None)
        self.mode.finish()
        by_id: dict[int, FunctionEvent] = {}
        events = EventList((), self.mode.profile_memory, self.origin_ns, self.with_flops)
        for ev in self.mode.events:
            fe = by_id[ev.id] = FunctionEvent(ev, self.origin_ns)
            if ev.parent is not None:
                fe.cpu_parent = by_id[ev.parent.id]
                fe.cpu_parent.cpu_children.append(fe)
            if self.with_flops:
                fe.flops = _flops(fe.name, fe.input_shapes)
            events.append(fe)
        self.events = events
        return events


def _flops(name: str, shapes: list) -> int:
    """Multiply-adds of the matmul family, counted as torch counts them (2 per multiply-add)."""
    if name in ("matmul", "mm", "bmm", "linear", "addmm") and len(shapes) >= 2:
        a, b = (shapes[1], shapes[2]) if name == "addmm" else (shapes[0], shapes[1])
        if len(a) >= 1 and len(b) >= 1:
            k = a[-1]
            n = b[0] if name == "linear" else (b[-1] if len(b) >= 2 else 1)
            rows = 1
            for d in a[:-1]:
                rows *= d
            return 2 * rows * k * n
    return 0


_ACTIONS = {  # (previous, next) -> what happens between them, as torch's profiler does it
    (ProfilerAction.NONE, ProfilerAction.RECORD): ("start",),
    (ProfilerAction.NONE, ProfilerAction.RECORD_AND_SAVE): ("start",),
    (ProfilerAction.WARMUP, ProfilerAction.RECORD): ("start",),
    (ProfilerAction.WARMUP, ProfilerAction.RECORD_AND_SAVE): ("start",),
    (ProfilerAction.RECORD, ProfilerAction.NONE): ("warn", "stop"),
    (ProfilerAction.RECORD, ProfilerAction.WARMUP): ("warn", "stop"),
    (ProfilerAction.RECORD_AND_SAVE, ProfilerAction.NONE): ("stop", "ready"),
    (ProfilerAction.RECORD_AND_SAVE, ProfilerAction.WARMUP): ("stop", "ready"),
    (ProfilerAction.RECORD_AND_SAVE, ProfilerAction.RECORD): ("stop", "ready", "start"),
    (ProfilerAction.RECORD_AND_SAVE, ProfilerAction.RECORD_AND_SAVE): ("stop", "ready", "start"),
    (ProfilerAction.WARMUP, ProfilerAction.NONE): ("warn",),
    (ProfilerAction.RECORD, None): ("stop", "ready"),
    (ProfilerAction.RECORD_AND_SAVE, None): ("stop", "ready"),
}


class profile:
    """torch.profiler.profile: records op calls, ``record_function`` ranges and backward nodes
    while in force; ``step()`` moves the ``schedule`` on; see ``docs/profiler.md``."""

    def __init__(self, *, activities: Iterable[ProfilerActivity | dict] | None = None,
                 schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable[..., Any] | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, use_cuda: bool | None = None) -> None:
        acts = set() if activities is not None else supported_activities()
        for a in activities or ():  # an activity, or {activity: [its event kinds]} (all are timed here)
            for one in (a.keys() if isinstance(a, dict) else (a,)):
                if not isinstance(one, ProfilerActivity):
                    raise TypeError(f"profile(): activities must be ProfilerActivity values (or dicts keyed by "
                                    f"them), got {one!r}")
                acts.add(one)
        if use_cuda is not None:
            warnings.warn("`use_cuda` is deprecated, use `activities` argument instead", FutureWarning,
                          stacklevel=2)
            if use_cuda:
                acts.add(ProfilerActivity.CUDA)
            else:
                acts.discard(ProfilerActivity.CUDA)
        if not acts:
            raise AssertionError("No valid profiler activities found")
        self.activities = acts
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules  # torch reads it for TorchScript modules only: nothing to record
        self.schedule = schedule or _default_schedule_fn
        self.record_steps = schedule is not None  # ProfilerStep#<n> ranges, as torch adds them
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        self._recording: Recording | None = None
        self._events: EventList | None = None
        self._step_range: record_function | None = None
        self._warned_cuda = False

    # -- the context manager and its steps -----------------------------------------------
    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._transit(ProfilerAction.NONE, self.current_action)
        self._open_step_range()

    def stop(self) -> None:
        self._close_step_range()
        self._transit(self.current_action, None)

    def step(self) -> None:
        """The next step begins: what the schedule says for it starts, stops or saves recording."""
        self._close_step_range()
        prev = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(prev, self.current_action)
        self._open_step_range()

    def _open_step_range(self) -> None:
        if self.record_steps:
            self._step_range = record_function(f"ProfilerStep#{self.step_num}").__enter__()

    def _close_step_range(self) -> None:
        if self._step_range is not None:
            self._step_range.__exit__(None, None, None)
            self._step_range = None

    def _transit(self, prev: ProfilerAction, nxt: ProfilerAction | None) -> None:
        for what in _ACTIONS.get((prev, nxt), ()):
            if what == "warn":
                warnings.warn(f"Incorrect schedule: {prev.name} followed by {nxt.name if nxt else None}",
                              stacklevel=3)
            elif what == "start":
                self.start_trace()
            elif what == "stop":
                self.stop_trace()
            elif self.on_trace_ready is not None:
                self.on_trace_ready(self)

    def start_trace(self) -> None:
        if ProfilerActivity.CUDA in self.activities and not self._warned_cuda:
            from .. import cuda
            if not cuda.is_available():
                self._warned_cuda = True
                warnings.warn("CUDA is not available, disabling CUDA profiling", stacklevel=5)
        device_timing = ProfilerActivity.CUDA in self.activities
        self._recording = Recording(self.record_shapes, self.profile_memory, self.with_stack, device_timing,
                                    self.with_flops)
        self._recording.start()

    def stop_trace(self) -> None:
        if self._recording is not None:
            self._events = self._recording.stop()
            self._recording = None

    # -- what was recorded ---------------------------------------------------------------
    def events(self) -> EventList:
        """The events of the last recorded cycle, in the order they began."""
        if self._events is None:
            raise AssertionError("events(): the profiler has recorded nothing yet: use it as a context "
                                 "manager, or call start() and stop(), and read it after a recorded step")
        return self._events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path: str) -> None:
        self.events().export_chrome_trace(path)
