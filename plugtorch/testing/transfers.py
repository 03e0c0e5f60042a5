"""Count host transfers: how often the backends' ``to_host`` / ``from_host`` primitives run.

On a device backend every ``to_host`` waits for the device (a synchronisation), so a
training step should make none beyond the ones the user asks for (``.item()``,
``.numpy()``, printing). A plugin author checks their backend, or a library author
their code, with::

    with plugtorch.testing.count_transfers() as counts:
        loss = step(model, x, y)
        loss.item()
    assert counts.to_host["mybackend"] == 1, counts.report()

``counts.to_host`` and ``counts.from_host`` map backend name -> calls (0 for a backend
that made none). With ``trace=True`` each call also keeps the stack it came from, and
``counts.report()`` prints them: that is how to find a hidden sync.

The primitives of the backends registered when the block starts are wrapped for its
duration (a backend registered inside the block is not counted) and restored when the
last open block ends, also on an exception. Calls from every thread are counted, since
the wrappers are process-wide; blocks may nest and may be open in several threads.
"""
from __future__ import annotations

import contextlib
import threading
import traceback
from collections import Counter
from collections.abc import Callable, Iterator

from plugtorch.core.backend import Backend
from plugtorch.core.plugins import get_registry

DIRECTIONS = ("to_host", "from_host")

__all__ = ["TransferCounts", "count_transfers"]


class TransferCounts:
    """What one ``count_transfers`` block saw, per direction and backend."""

    def __init__(self, trace: bool = False, on_transfer: Callable[[str, str], None] | None = None):
        self.to_host: Counter[str] = Counter()
        self.from_host: Counter[str] = Counter()
        self.traces: list[tuple[str, str, list[str]]] = []  # (direction, backend, stack lines)
        self._trace = trace
        self._on_transfer = on_transfer

    def _add(self, direction: str, backend: str, stack: list[str] | None) -> None:
        getattr(self, direction)[backend] += 1
        if self._trace:
            self.traces.append((direction, backend, stack or []))

    def total(self, direction: str = "to_host") -> int:
        return sum(getattr(self, direction).values())

    def report(self, direction: str | None = None, frames: int = 6) -> str:
        """The counts, and with ``trace=True`` the innermost ``frames`` frames of each call."""
        lines = [f"to_host: {dict(self.to_host)}, from_host: {dict(self.from_host)}"]
        for d, backend, stack in self.traces:
            if direction is None or d == direction:
                lines.append(f"-- {d} on '{backend}' from:")
                lines.extend(s.rstrip("\n") for s in stack[-frames:])
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"TransferCounts(to_host={dict(self.to_host)}, from_host={dict(self.from_host)})"


_lock = threading.Lock()
_active: list[TransferCounts] = []
# id(backend) -> (backend, {direction: (original primitive, its wrapper)})
_wrapped: dict[int, tuple[Backend, dict[str, tuple[Callable, Callable]]]] = {}


def _wrapper(direction: str, backend_name: str, fn: Callable) -> Callable:
    def counted(*args, **kwargs):
        with _lock:
            active = list(_active)
            stack = (traceback.format_stack()[:-1]  # without this frame
                     if any(c._trace for c in active) else None)
            for counts in active:
                counts._add(direction, backend_name, stack)
        for counts in active:  # outside the lock: a callback may open its own block
            if counts._on_transfer is not None:
                counts._on_transfer(direction, backend_name)
        return fn(*args, **kwargs)

    return counted


def _install() -> None:
    for backend in list(get_registry().backends.values()):
        if id(backend) in _wrapped:
            continue
        table = backend.primitives
        entries = {}
        for direction in DIRECTIONS:
            fn = dict.get(table, direction)  # plain get: a missing primitive is not ours to report
            if fn is not None:
                entries[direction] = (fn, _wrapper(direction, backend.name, fn))
                table[direction] = entries[direction][1]
        _wrapped[id(backend)] = (backend, entries)


def _uninstall() -> None:
    for backend, entries in _wrapped.values():
        table = backend.primitives
        for direction, (fn, wrapper) in entries.items():
            # leave an entry someone replaced meanwhile (a plugin override) as they set it
            if dict.get(table, direction) is wrapper:
                table[direction] = fn
    _wrapped.clear()


@contextlib.contextmanager
def count_transfers(*, trace: bool = False,
                    on_transfer: Callable[[str, str], None] | None = None) -> Iterator[TransferCounts]:
    """Count ``to_host`` / ``from_host`` calls per backend inside the block.

    trace:       keep each call's stack; ``counts.report()`` shows where they came from.
    on_transfer: called as ``on_transfer(direction, backend_name)`` at each call, e.g. to
                 raise or to print ``traceback.print_stack()`` at the first sync.
    """
    counts = TransferCounts(trace, on_transfer)
    with _lock:
        _install()
        _active.append(counts)
    try:
        yield counts
    finally:
        with _lock:
            _active.remove(counts)
            if not _active:
                _uninstall()
