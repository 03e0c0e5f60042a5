"""``plugtorch.autograd.profiler``: torch.autograd.profiler's ``profile`` (the older front: one
recording from ``__enter__`` to ``__exit__``, printed as its events in order) and
``record_function``, the same class as ``plugtorch.profiler.record_function``."""
from __future__ import annotations

import warnings
from typing import Any

from ..profiler.events import EventList, FunctionEventAvg
from ..profiler.profiler import Recording
from ..profiler.ranges import record_function

__all__ = ["profile", "record_function", "EventList"]


class profile:
    """Records op calls, ``record_function`` ranges and backward nodes while in force."""

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False, use_device: str | None = None,
                 record_shapes: bool = False, with_flops: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_modules: bool = False, use_kineto: bool = False,
                 use_cpu: bool = True) -> None:
        if use_cuda:
            warnings.warn("The attribute `use_cuda` will be deprecated soon, please use "
                          "``use_device = 'cuda'`` instead.", FutureWarning, stacklevel=2)
            use_device = "cuda"
        if use_device not in (None, "cuda"):
            raise ValueError(f"profile(): use_device '{use_device}' is not one plugtorch can time; use 'cuda' "
                             "(a backend declaring the CUDA accelerator) or None")
        if use_device == "cuda":
            from .. import cuda
            if not cuda.is_available():
                warnings.warn("CUDA is not available, disabling CUDA profiling", stacklevel=2)
                use_device = None
        self.enabled = enabled
        self.use_device = use_device
        self.with_modules = with_modules  # torch reads it for TorchScript modules only
        self._recording = Recording(record_shapes, profile_memory, with_stack, use_device == "cuda", with_flops)
        self._events: EventList | None = None
        self.entered = False

    def __enter__(self) -> profile:
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self.entered = True
        self._recording.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._events = self._recording.stop()

    @property
    def function_events(self) -> EventList:
        if self._events is None:
            raise RuntimeError("Profiler didn't finish running")
        return self._events

    def table(self, sort_by: str | None = None, row_limit: int = 100, **kwargs: Any) -> str:
        return self.function_events.table(sort_by=sort_by, row_limit=row_limit, **kwargs)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n)

    def total_average(self) -> FunctionEventAvg:
        return self.function_events.total_average()

    @property
    def self_cpu_time_total(self) -> float:
        return self.function_events.self_cpu_time_total

    def export_chrome_trace(self, path: str) -> None:
        self.function_events.export_chrome_trace(path)

    def __str__(self) -> str:
        return "<unfinished plugtorch.autograd.profile>" if self._events is None else str(self._events)

    def __repr__(self) -> str:
        return "<unfinished plugtorch.autograd.profile>" if self._events is None else repr(self._events)
