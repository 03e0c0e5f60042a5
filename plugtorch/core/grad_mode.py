"""Thread-local switch for recording the autograd graph (no_grad and friends)."""
from __future__ import annotations

import functools
import threading


class _State(threading.local):
    enabled = True


_state = _State()


def is_grad_enabled() -> bool:
    return _state.enabled


class _GradModeContext:
    """A context manager that is also a decorator, like torch's."""

    _mode: bool

    def __enter__(self):
        self._prev = _state.enabled
        _state.enabled = self._mode
        return self

    def __exit__(self, *exc):
        _state.enabled = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradModeContext):
    _mode = False


class enable_grad(_GradModeContext):
    _mode = True


class set_grad_enabled(_GradModeContext):
    """``set_grad_enabled(False)`` takes effect immediately (as in torch) and as a context manager."""

    def __init__(self, mode: bool):
        self._prev = _state.enabled
        self._mode = bool(mode)
        _state.enabled = self._mode

    def __enter__(self):
        return self

    def __call__(self, fn):
        mode = self._mode
        _state.enabled = self._prev

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper
