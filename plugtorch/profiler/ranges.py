"""User ranges: ``record_function`` (a context manager or a decorator), and the functions torch
keeps under ``torch.ops.profiler`` (``_record_function_enter``/``_exit``) that fx demos emit."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..core import profiling
from ..core.optable import INTERCEPT
from ..library import FUNCTIONS

__all__ = ["record_function"]


class record_function:
    """A user range: ops run inside it are nested in it in the table and the trace. A context
    manager or a decorator; it records only while a profile records, and costs one list test else."""

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name = name
        self.args = args
        self._opened: list = []  # per entry still open (a decorated function may recurse)

    def __enter__(self) -> record_function:
        self._opened.append(profiling.begin_range(self.name) if profiling.ACTIVE else [])
        return self

    def __exit__(self, *exc: object) -> None:
        profiling.end_range(self._opened.pop())

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)
        return wrapper


class _RangeHandle:
    """What ``plugtorch.ops.profiler._record_function_enter`` returns: the range to exit."""

    __slots__ = ("range",)

    def __init__(self, rf: record_function) -> None:
        self.range = rf


def _args(name: str, args: str | None) -> tuple:
    return (name,) if args is None else (name, args)


def _record_function_enter(name: str, args: str | None = None) -> Any:
    """torch.ops.profiler._record_function_enter: opens a range; its handle closes it."""
    if INTERCEPT.on and (out := INTERCEPT.call(_record_function_enter, _args(name, args), {})) is not NotImplemented:
        return out
    return _RangeHandle(record_function(name, args).__enter__())


def _record_function_exit(handle: Any) -> None:
    """torch.ops.profiler._record_function_exit: closes the range ``handle`` opened."""
    if INTERCEPT.on and (out := INTERCEPT.call(_record_function_exit, (handle,), {})) is not NotImplemented:
        return out
    if not isinstance(handle, _RangeHandle):
        raise TypeError("_record_function_exit(): expected the handle _record_function_enter returned, got "
                        f"{type(handle).__name__}")
    handle.range.__exit__(None, None, None)
    return None


# generated fx code names them as torch does: plugtorch.ops.profiler.<name>
_record_function_enter.__module__ = _record_function_exit.__module__ = "plugtorch.ops.profiler"


class _ProfilerOps:
    """``plugtorch.ops.profiler``: torch.ops.profiler's range functions."""

    _record_function_enter = staticmethod(_record_function_enter)
    _record_function_exit = staticmethod(_record_function_exit)


FUNCTIONS["profiler"] = _ProfilerOps()
