"""Debug mode: the checks that would read device memory on the host.

Some checks need tensor *values* on the host (class labels in range, embedding
indices in the table). On a backend whose memory is host memory that read is free,
so they always run there; on a device backend each would synchronise the device on
every step, so they run only in debug mode — ``plugtorch.set_debug(True)`` or
``PLUGTORCH_DEBUG=1`` — as Chainer's ``is_debug()`` did. Without them, bad values
reach the kernels, whose behaviour is the backend's (CuPy wraps indices around).
"""
from __future__ import annotations

import contextlib
import os
import threading

__all__ = ["set_debug", "is_debug", "debug_mode", "checks_values"]

_debug = os.environ.get("PLUGTORCH_DEBUG", "") not in ("", "0", "false", "False")


def set_debug(enabled: bool) -> None:
    """Run value checks on every backend (True) or only on host-memory backends (False)."""
    global _debug
    _debug = bool(enabled)


def is_debug() -> bool:
    return _debug


@contextlib.contextmanager
def debug_mode(enabled: bool = True):
    """``with plugtorch.debug_mode():`` — debug mode for a block."""
    prev = _debug
    set_debug(enabled)
    try:
        yield
    finally:
        set_debug(prev)


class _Capture(threading.local):
    active = False  # set by plugtorch.compile while it records a call


capture = _Capture()

# Bumped whenever an autograd hook is registered on a tensor: a trace plugtorch.compile
# recorded before then would skip it, so it is not replayed again.
tensor_hooks_version = [0]


def hook_runs_in_capture() -> None:
    """An autograd hook ran while plugtorch.compile captured: its Python would not run on replay."""
    from ..compiler.recording import not_capturable
    not_capturable("an autograd hook on a tensor runs in it (a replay would not run its Python)")


def checks_values(tensor) -> bool:
    """Whether a check that reads ``tensor``'s values on the host should run now: not while
    plugtorch.compile captures (a replay could not repeat the read), except in debug mode; never on a
    tensor under plugtorch.func.vmap, which shows one example whose values cannot be read (its
    checks are the kernel's, as on a device backend)."""
    if getattr(type(tensor), "vmap_batched", False):
        return False
    return _debug or (tensor._backend.host_memory and not capture.active)
