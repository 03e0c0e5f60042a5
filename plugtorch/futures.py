"""torch.futures for plugtorch: a value that is there now, or once it is waited for.

A communication hook returns a :class:`Future` (``work.get_future()``, then
``fut.then(decompress)``). Unlike torch, nothing completes a future behind the
program's back: a pending future completes when it is waited for, or when
``done()`` finds its work finished; its callbacks then run in that thread. This
keeps every write into a tensor on the thread that owns it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Future", "collect_all", "wait_all"]


class Future:
    """torch.futures.Future: ``wait()``, ``value()``, ``done()``, ``then()``, ``set_result()``."""

    __slots__ = ("_done", "_value", "_error", "_drive", "_poll", "_callbacks")

    def __init__(self, *, devices=None):
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._drive: Callable[[], None] | None = None  # completes this future (may block)
        self._poll: Callable[[], bool] | None = None   # True when _drive would not block
        self._callbacks: list = []

    @classmethod
    def _pending(cls, drive: Callable[[], None], poll: Callable[[], bool]) -> Future:
        """A future that ``drive()`` completes (by calling ``set_result``/``set_exception``)."""
        fut = cls()
        fut._drive, fut._poll = drive, poll
        return fut

    def done(self) -> bool:
        if not self._done and self._poll is not None and self._poll():
            self._run_drive()
        return self._done

    def wait(self) -> Any:
        self._run_drive()
        if not self._done:
            raise RuntimeError("Future.wait(): nothing will complete this future; call set_result() on it")
        if self._error is not None:
            raise self._error
        return self._value

    def value(self) -> Any:
        if not self._done:
            raise RuntimeError("Future.value() called on a future that is not complete yet; call wait() first")
        if self._error is not None:
            raise self._error
        return self._value

    def set_result(self, result: Any) -> None:
        self._complete(result, None)

    def set_exception(self, error: BaseException) -> None:
        self._complete(None, error)

    def then(self, callback: Callable[[Future], Any]) -> Future:
        """A future holding ``callback(self)``, run once this future completes."""
        child = Future._pending(self._run_drive, self.done)

        def run(parent: Future) -> None:
            try:
                child.set_result(callback(parent))
            except Exception as e:  # the child carries the callback's error
                child.set_exception(e)

        self.add_done_callback(run)
        return child

    def add_done_callback(self, callback: Callable[[Future], None]) -> None:
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def _run_drive(self) -> None:
        if not self._done and self._drive is not None:
            drive, self._drive = self._drive, None  # a future is driven once
            drive()

    def _complete(self, value, error) -> None:
        if self._done:
            raise RuntimeError("Future can only be marked completed once")
        self._done, self._value, self._error = True, value, error
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(self)

    def __repr__(self) -> str:
        return f"<Future {'done' if self._done else 'pending'}>"


def collect_all(futures: list[Future]) -> Future:
    """A future whose value is ``futures``, complete when all of them are."""
    def drive():
        for f in futures:
            f._run_drive()
        result.set_result(futures)
    result = Future._pending(drive, lambda: all(f.done() for f in futures))
    return result


def wait_all(futures: list[Future]) -> list:
    """Wait for every future; their values, in order."""
    return [f.wait() for f in futures]
