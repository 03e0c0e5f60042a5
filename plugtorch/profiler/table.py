"""The profiler's table, laid out as torch's ``EventList.table`` lays it out: the same columns,
widths, units and footer, so a table reads the same on either."""
from __future__ import annotations

import math
from typing import Any

from .events import _format_time

__all__ = ["build_table"]

_SORT_KEYS = ("cpu_time", "cpu_time_total", "self_cpu_time_total", "cpu_memory_usage", "self_cpu_memory_usage",
              "count", "device_time_total", "self_device_time_total", "cuda_time_total",
              "self_cuda_time_total")
_COL = 12  # torch's DEFAULT_COLUMN_WIDTH
_SPACING = 2


def _share(time_us: float, total_us: float) -> str:
    return "NaN" if total_us == 0 else f"{time_us * 100.0 / total_us:.2f}%"


def _format_memory(nbytes: float) -> str:
    kb, mb, gb = 1024, 1024 ** 2, 1024 ** 3
    if abs(nbytes) >= gb:
        return f"{nbytes / gb:.2f} GB"
    if abs(nbytes) >= mb:
        return f"{nbytes / mb:.2f} MB"
    if abs(nbytes) >= kb:
        return f"{nbytes / kb:.2f} KB"
    return f"{nbytes} B"


def _time(time_us: float, unit: str | None) -> str:
    if unit == "s":
        return f"{time_us / 1e6:.3f}s"
    if unit == "ms":
        return f"{time_us / 1e3:.3f}ms"
    if unit == "us":
        return f"{time_us:.3f}us"
    return _format_time(time_us)


def _flops_scale(flops: int) -> tuple[float, str]:
    """The unit torch shows FLOPs in: the largest power of 1000 under the smallest count."""
    units = ["FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs"]
    k = min(int(math.log10(flops) // 3), len(units) - 1)
    return 10.0 ** (-3 * k), units[k]


def _trim_path(path: str, width: int) -> str:
    if len(path) > width:
        path = path[len(path) - width:]
        if len(path) > 3:
            path = "..." + path[3:]
    return path


def build_table(events: Any, *, sort_by: str | None, row_limit: int, header: str | None, max_src_column_width: int,
                max_name_column_width: int, max_shapes_column_width: int, profile_memory: bool,
                with_flops: bool, top_level_events_only: bool, time_unit: str | None) -> str:
    if len(events) == 0:
        return ""
    if sort_by is not None:
        if sort_by not in _SORT_KEYS:
            raise AttributeError(f"table(): cannot sort by '{sort_by}'; sort_by is one of {', '.join(_SORT_KEYS)}")
        key = sort_by.replace("cuda", "device")
        events = sorted(events, key=lambda e: getattr(e, key), reverse=True)
    has_device_time = any(e.self_device_time_total > 0 for e in events)
    has_shapes = any(e.input_shapes for e in events)
    stacks = [e.stack for e in events if e.stack]
    name_width = min(max(len(e.key) for e in events) + 4, max_name_column_width)
    shapes_width = min(max(len(str(e.input_shapes)) for e in events) + 4, max_shapes_column_width)
    src_width = min(max(len(s) for st in stacks for s in st) + 4, max_src_column_width) if stacks else 0

    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if has_device_time:
        headers += ["Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"]
    if profile_memory:
        headers += ["CPU Mem", "Self CPU Mem"]
    headers.append("# of Calls")
    widths = [name_width] + [_COL] * (len(headers) - 1)
    aligns = [">"] * len(headers)
    if has_shapes:
        headers.append("Input Shapes")
        widths.append(shapes_width)
        aligns.append(">")
    flops = [e.flops for e in events if e.flops > 0] if with_flops else []
    if flops:
        scale, flops_header = _flops_scale(min(flops))
        headers.append(f"Total {flops_header}")
        widths.append(_COL)
        aligns.append(">")
    if stacks:
        headers.append("Source Location")
        widths.append(src_width)
        aligns.append("<")
    row_format = "".join("{: " + a + str(w) + "}" + " " * _SPACING for a, w in zip(aligns, widths))
    sep = "".join("-" * w + " " * _SPACING for w in widths)
    line_length = sum(w + _SPACING for w in widths) - _SPACING

    self_total = sum(e.self_cpu_time_total for e in events)
    device_total = sum(e.self_device_time_total for e in events if not e.is_user_annotation)
    out: list[str] = []
    if header is not None:
        out += ["=" * line_length, header]
    if top_level_events_only:
        out += ["=" * line_length, "This report only display top-level ops statistics"]
    out += [sep, row_format.format(*headers), sep]
    shown = 0
    for e in events:
        if shown == row_limit:
            break
        if top_level_events_only and e.cpu_parent is not None:
            continue
        shown += 1
        name = e.key
        if len(name) >= max_name_column_width - 3:
            name = name[:max_name_column_width - 3] + "..."
        row = [name, _share(e.self_cpu_time_total, self_total), _time(e.self_cpu_time_total, time_unit),
               _share(e.cpu_time_total, self_total), _time(e.cpu_time_total, time_unit), _time(e.cpu_time, time_unit)]
        if has_device_time:
            row += [_time(e.self_device_time_total, time_unit), _share(e.self_device_time_total, device_total),
                    _time(e.device_time_total, time_unit), _time(e.device_time_total / e.count, time_unit)]
        if profile_memory:
            row += [_format_memory(e.cpu_memory_usage), _format_memory(e.self_cpu_memory_usage)]
        row.append(e.count)
        if has_shapes:
            row.append(str(e.input_shapes)[:shapes_width])
        if flops:
            row.append(f"{e.flops * scale:8.3f}" if e.flops > 0 else "--")
        if stacks:
            row.append(_trim_path(e.stack[0], src_width) if e.stack else "")
        out.append(row_format.format(*row))
        if stacks:
            blank = [""] * (len(headers) - 1)
            out += [row_format.format(*blank, _trim_path(s, src_width)) for s in e.stack[1:]]
            out.append(row_format.format(*blank, ""))
    out += [sep, f"Self CPU time total: {_time(self_total, time_unit)}"]
    if has_device_time:
        out.append(f"Self CUDA time total: {_time(device_total, time_unit)}")
    return "\n".join(out) + "\n"
