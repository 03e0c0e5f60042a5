"""The Chrome trace of a profile (chrome://tracing, Perfetto): each event one complete ("X")
event, ts and dur in microseconds, with its process and thread, and in ``args`` what torch puts
there (input dims and types) and what plugtorch adds (the backend, whether a kernel ran)."""
from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

__all__ = ["write_chrome_trace"]

# the profile's start on the wall clock, so traces of several processes line up
_WALL_OFFSET_US = time.time_ns() / 1e3 - time.perf_counter_ns() / 1e3


def _trace_event(e: Any, origin_us: float, pid: int) -> dict:
    args: dict[str, Any] = {"External id": e.id + 1}
    if e.input_shapes:
        args["Input Dims"] = e.input_shapes
    if e.input_dtypes:
        args["Input type"] = e.input_dtypes
    if e.backend is not None:
        args["backend"] = e.backend
        args["kernel"] = "kernel" if e.kernel else "decomposition"
    if e.stack:
        args["stack"] = e.stack
    if e.self_cpu_memory_usage:
        args["memory"] = e.self_cpu_memory_usage
    if e.device_time_total:
        args["device_dur"] = e.device_time_total
    return {"ph": "X", "cat": "user_annotation" if e.is_user_annotation else "cpu_op", "name": e.trace_name,
            "pid": pid, "tid": e.thread, "ts": round(origin_us + e.start_us, 3),
            "dur": round(e.cpu_time_total, 3), "args": args}


def write_chrome_trace(events: Any, path: str, origin_ns: int | None = None) -> None:
    """Write ``events`` (FunctionEvents whose times count from ``origin_ns`` of perf_counter_ns)."""
    pid = os.getpid()
    origin_us = _WALL_OFFSET_US + (origin_ns or 0) / 1e3
    tids = sorted({e.thread for e in events})
    names = {t.ident: t.name for t in threading.enumerate()}
    meta: list[dict] = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}}]
    meta += [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
              "args": {"name": f"thread {tid} ({names.get(tid, 'python')})"}} for tid in tids]
    trace = {"schemaVersion": 1, "displayTimeUnit": "ms", "traceName": path,
             "traceEvents": meta + [_trace_event(e, origin_us, pid) for e in events]}
    if path.endswith(".gz"):  # as torch's: a .gz path is written compressed
        import gzip
        with gzip.open(path, "wt") as gz:
            json.dump(trace, gz)
    else:
        with open(path, "w") as f:
            json.dump(trace, f)
