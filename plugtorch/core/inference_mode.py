"""``inference_mode``: torch's faster no_grad for code that never needs gradients.

Here it is no_grad with its own flag (``is_inference_mode_enabled``): plugtorch records no
graph under no_grad already, which is what inference mode saves in torch; tensors made
inside are ordinary tensors (torch's refuse to enter autograd later).
"""
from __future__ import annotations

import functools
import threading

from .grad_mode import _state as _grad

__all__ = ["inference_mode", "is_inference_mode_enabled"]


class _Inference(threading.local):
    enabled = False


_state = _Inference()


def is_inference_mode_enabled() -> bool:
    return _state.enabled


class inference_mode:
    """``with plugtorch.inference_mode():`` or ``@plugtorch.inference_mode()`` (or bare
    ``@plugtorch.inference_mode``): no graph is recorded inside; ``mode=False`` turns it off
    (and gradients back on) for a block."""

    def __new__(cls, mode=True):
        if callable(mode):  # used bare, as a decorator: @inference_mode
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        self.mode = bool(mode)
        self._saved: list = []

    def __enter__(self):
        self._saved.append((_grad.enabled, _state.enabled))
        _grad.enabled, _state.enabled = not self.mode, self.mode
        return self

    def __exit__(self, *exc):
        _grad.enabled, _state.enabled = self._saved.pop()
        return False

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)
        return wrapper

    def clone(self) -> inference_mode:
        return inference_mode(self.mode)
