"""Recording the kernel calls of one call for plugtorch.compile, and the hooks code uses to
tell a capture what it cannot see (``not_capturable``), what to refresh on replay
(``dynamic_attrs``) and what to check before one (``guard``)."""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from ..core import engine
from ..core.plugins import get_registry

_STATE_PRIMITIVES = frozenset({"generator_get_state", "generator_set_state"})
# reads of layout metadata: code decides with them (a gradient's layout), no kernel consumes them
_METADATA_PRIMITIVES = frozenset({"strides"})


class CaptureError(RuntimeError):
    """Raised by ``plugtorch.compile(..., fullgraph=True)`` where capture is impossible."""


class _Recorder(threading.local):
    active: bool = False
    depth: int = 0
    calls: list | None = None
    reason: str | None = None
    dynamic: Callable | None = None  # refreshes the attrs of the next top-level call on replay
    guards: list | None = None  # (function, value at capture, by identity) checked before each replay
    retry: bool = False  # the reason is passing: the next call may capture
    modules: dict | None = None  # id -> module, for the modules called while capturing


rec = _Recorder()
_install_lock = threading.Lock()


def capturing() -> bool:
    """Whether this thread is capturing for plugtorch.compile (for code that must say so)."""
    return rec.active


def not_capturable(reason: str, *, retry: bool = False) -> None:
    """Make the current capture fall back to eager, naming ``reason`` (no-op when not capturing).
    ``retry``: the reason passes with this call (state made lazily, as an optimizer's moment
    buffers), so the next call may capture; otherwise calls with these arguments stay eager."""
    if rec.active and rec.reason is None:
        rec.reason, rec.retry = reason, retry


class _DynamicAttrs:
    def __init__(self, op: str, refresh: Callable[[], dict]):
        self.op, self.refresh = op, refresh

    def __enter__(self) -> None:
        assert rec.calls is not None, "made only while capturing"
        self.before, rec.dynamic = len(rec.calls), self.refresh

    def __exit__(self, *exc: object) -> None:
        rec.dynamic = None
        assert rec.calls is not None, "made only while capturing"
        made = rec.calls[self.before:]
        if len(made) != 1 or made[0][0] != self.op or made[0][5] is not self.refresh:
            not_capturable(f"{self.op} runs as {len(made)} dispatched calls here (no fused kernel on this "
                           "backend), so its per-step attributes (step count, learning rate) cannot be refreshed")


_NOT_CAPTURING = contextlib.nullcontext()


def dynamic_attrs(op: str, refresh: Callable[[], dict]) -> contextlib.AbstractContextManager[None]:
    """The call of ``op`` in this block gets its attrs from ``refresh()`` on each replay (an
    optimizer's step count and learning rate); ``refresh`` also makes the Python-side changes
    the eager code makes (counting the step). The block must make exactly that one top-level
    call, i.e. ``op`` must be served by a kernel: a decomposition's many calls would replay
    with the attrs of the capture, so the capture falls back instead. Outside a capture (every
    eager optimizer step) it is a shared do-nothing context."""
    return _DynamicAttrs(op, refresh) if rec.active else _NOT_CAPTURING


def guard(value: Callable[[], Any], *, identity: bool = False) -> None:
    """While capturing: replay only while ``value()`` equals what it is now (else capture again).
    With ``identity``, ``value()`` is a sequence whose items must be the same objects (tensors,
    dicts: things whose ``==`` is not identity)."""
    if rec.active:
        assert rec.guards is not None, "a capture has its list of guards"
        rec.guards.append((value, value(), identity))


class ModuleCalls:
    """While capturing, ``nn.Module.__call__`` notes each module called (their attributes and
    members are guarded) and refuses modules with forward hooks (whose Python a replay skips)."""

    def __enter__(self) -> ModuleCalls:
        from ..nn.modules.module import Module
        self.cls, self.original = Module, Module.__dict__["__call__"]
        original = self.original

        def call(module: Module, *args: Any, **kwargs: Any) -> Any:
            r = rec
            if r.active and r.modules is not None:
                r.modules[id(module)] = module
                if module._forward_hooks or module._forward_pre_hooks:
                    not_capturable(f"{type(module).__name__} has forward hooks, whose Python a replay would not run")
            return original(module, *args, **kwargs)
        # a patch of the class for the capture's duration (restored on exit), which mypy refuses
        # for a method; ``call`` names its first parameter ``module``, not ``self``
        Module.__call__ = call  # type: ignore[method-assign, assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        self.cls.__call__ = self.original  # type: ignore[method-assign]


def _recording(name: str, fn: Callable, primitive: bool, owner) -> Callable:
    """``fn`` recording its top-level calls; ``owner``: the backend whose primitive ``name`` it
    is (so that backend's ``out_variants`` and fuser know what it computes), else None."""
    def call(*args, **kwargs):
        r = rec
        if not r.active:
            return fn(*args, **kwargs)
        if primitive and name == "to_host" and r.reason is None:
            r.reason = "it reads tensor values on the host (.item(), bool(t), .numpy() or a value check) mid-call"
        if primitive and name in _STATE_PRIMITIVES and r.reason is None:
            r.reason = "it saves or restores random-generator state"
        if r.depth or (primitive and (name == "generator" or name in _METADATA_PRIMITIVES)):
            return fn(*args, **kwargs)
        refresh, r.dynamic = r.dynamic, None
        r.depth += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            r.depth -= 1
        calls = r.calls
        assert calls is not None, "a capture has its list of calls"
        calls.append((name, fn, args, kwargs, out, refresh, owner))
        return out
    return call


def _recorded_refs(array: Any) -> int:
    """How many of this thread's recorded results are ``array`` itself: the references the
    record adds to a gradient the backward engine may hand to ``.grad`` without a copy."""
    calls = rec.calls if rec.active else None
    return sum(1 for c in calls if c[4] is array) if calls else 0


class Installed:
    """Recording wrappers on every available backend's dispatch tables, removed on exit."""

    def __enter__(self) -> Installed:
        _install_lock.acquire()
        engine.recorded_refs = _recorded_refs
        self.saved = []
        for b in get_registry().backends.values():
            # a backend still unprobed has no tensors yet: asking would import CuPy, say, for nothing
            if not b.probed or not b.available:
                continue
            own = dict(b.primitives)
            for table, primitive in ((b.kernels, False), (b.primitives, True)):
                original = dict(table)
                self.saved.append((table, original))
                for name, fn in original.items():
                    # an op served by the primitive itself reaches it through the kernels table
                    table[name] = _recording(name, fn, primitive, b if own.get(name) is fn else None)
        return self

    def __exit__(self, *exc: object) -> None:
        for table, original in self.saved:
            table.clear()
            table.update(original)
        engine.recorded_refs = None
        _install_lock.release()


