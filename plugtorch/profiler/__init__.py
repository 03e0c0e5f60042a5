"""``plugtorch.profiler``: torch.profiler's API (``docs/profiler.md``)."""
from __future__ import annotations

from .events import EventList, FunctionEvent, FunctionEventAvg
from .profiler import (
    ProfilerAction,
    ProfilerActivity,
    kineto_available,
    profile,
    record_function,
    schedule,
    supported_activities,
    tensorboard_trace_handler,
)

__all__ = ["profile", "schedule", "supported_activities", "tensorboard_trace_handler", "ProfilerAction",
           "ProfilerActivity", "kineto_available", "record_function", "EventList", "FunctionEvent",
           "FunctionEventAvg"]
