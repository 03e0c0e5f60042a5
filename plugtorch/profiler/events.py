"""What a profile holds, as torch.autograd.profiler_util has it: :class:`FunctionEvent` per op call
or range, :class:`FunctionEventAvg` per group of them, :class:`EventList` of either, whose
``table()`` prints torch's columns. Times are in microseconds, as torch's are."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["FunctionEvent", "FunctionEventAvg", "EventList", "Interval"]


class Interval:
    """torch's ``time_range``: ``start`` and ``end`` in microseconds."""

    __slots__ = ("start", "end")

    def __init__(self, start: float, end: float) -> None:
        self.start = start
        self.end = end

    def elapsed_us(self) -> float:
        return self.end - self.start


class FunctionEvent:
    """One op call (named as the op table names it: ``matmul``), user range or backward range."""

    def __init__(self, ev: Any, origin_ns: int) -> None:
        self.id = ev.id
        self.trace_name = ev.name
        # the steps' ranges share one name, so that they add up in key_averages, as torch's do
        self.name = self.key = "ProfilerStep*" if ev.name.startswith("ProfilerStep#") else ev.name
        self.thread = ev.tid
        self.is_user_annotation = ev.kind == "user_annotation"
        self.backend = ev.backend
        self.kernel = ev.kernel
        self.input_shapes = ev.shapes if ev.shapes is not None else []
        self.input_dtypes = ev.dtypes if ev.dtypes is not None else []
        self.stack = list(ev.stack)
        self.start_us = (ev.start_ns - origin_ns) / 1e3
        self.end_us = (ev.end_ns - origin_ns) / 1e3
        self.self_cpu_memory_usage = ev.memory
        self.device_time_total = ev.device_ns / 1e3
        self.cpu_parent: FunctionEvent | None = None
        self.cpu_children: list[FunctionEvent] = []
        self.count = 1
        self.flops = 0  # floating-point operations, counted under with_flops for the matmul family

    @property
    def time_range(self) -> Interval:
        return Interval(self.start_us, self.end_us)

    @property
    def cpu_time_total(self) -> float:
        return self.end_us - self.start_us

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total

    @property
    def cpu_memory_usage(self) -> int:
        """Bytes allocated for outputs in the range, its nested ops' included."""
        return self.self_cpu_memory_usage + sum(c.cpu_memory_usage for c in self.cpu_children)

    @property
    def self_device_time_total(self) -> float:
        return self.device_time_total

    def __repr__(self) -> str:
        return (f"<FunctionEvent id={self.id} name={self.name} backend={self.backend} kernel={self.kernel} "
                f"cpu_time={_format_time(self.cpu_time_total)} start_us={self.start_us:.3f} "
                f"end_us={self.end_us:.3f} cpu_children={[c.id for c in self.cpu_children]} "
                f"thread={self.thread} input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage}>")


class FunctionEventAvg:
    """The sum of a group of events (``key_averages``), and their average ``cpu_time``."""

    def __init__(self, key: str | None = None) -> None:
        self.key = key
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.self_device_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.flops = 0
        self.input_shapes: list | None = None
        self.stack: list[str] = []
        self.is_user_annotation = False
        self.cpu_parent = None

    def add(self, other: Any) -> FunctionEventAvg:
        if self.key is None:  # the first of the group sets what it shows
            self.key = other.key
            self.input_shapes = other.input_shapes
            self.stack = other.stack
            self.is_user_annotation = other.is_user_annotation
            self.cpu_parent = other.cpu_parent
        self.count += other.count
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.device_time_total += other.device_time_total
        self.self_device_time_total += other.self_device_time_total
        self.cpu_memory_usage += other.cpu_memory_usage
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        self.flops += other.flops
        return self

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={_format_time(self.self_cpu_time_total)} "
                f"cpu_time={_format_time(self.cpu_time)} input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage}>")


class EventList(list):
    """A list of events (or of averages) that prints as torch's table."""

    def __init__(self, events: Iterable = (), profile_memory: bool = False, origin_ns: int = 0,
                 with_flops: bool = False) -> None:
        super().__init__(events)
        self._profile_memory = profile_memory
        self._with_flops = with_flops
        self._origin_ns = origin_ns  # what the events' times count from (perf_counter_ns)

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shapes: bool = False, group_by_stack_n: int = 0) -> EventList:
        """One :class:`FunctionEventAvg` per name (and input shapes, and top stack frames, if asked),
        in the order the names first ran."""
        stats: dict[tuple, FunctionEventAvg] = {}
        for e in self:
            key: tuple = (e.key, e.is_user_annotation)
            if group_by_input_shapes:
                key += (str(e.input_shapes),)
            if group_by_stack_n > 0:
                key += tuple(e.stack[:group_by_stack_n])
            stats.setdefault(key, FunctionEventAvg()).add(e)
        return EventList(stats.values(), self._profile_memory, self._origin_ns, self._with_flops)

    def total_average(self) -> FunctionEventAvg:
        total = FunctionEventAvg()
        for e in self:
            total.add(e)
        total.key = "Total"
        return total

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_src_column_width: int = 75,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False, time_unit: str | None = None) -> str:
        from .table import build_table
        return build_table(self, sort_by=sort_by, row_limit=row_limit, header=header,
                           max_src_column_width=max_src_column_width, max_name_column_width=max_name_column_width,
                           max_shapes_column_width=max_shapes_column_width, profile_memory=self._profile_memory,
                           with_flops=self._with_flops,
                           top_level_events_only=top_level_events_only, time_unit=time_unit)

    def export_chrome_trace(self, path: str) -> None:
        from .trace import write_chrome_trace
        write_chrome_trace(self, path, self._origin_ns)

    def __str__(self) -> str:
        return self.table()


def _format_time(time_us: float) -> str:
    if time_us >= 1e6:
        return f"{time_us / 1e6:.3f}s"
    if time_us >= 1e3:
        return f"{time_us / 1e3:.3f}ms"
    return f"{time_us:.3f}us"
