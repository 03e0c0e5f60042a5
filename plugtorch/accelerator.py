"""``plugtorch.accelerator``: torch.accelerator, answered from the registered backends.

A backend that declares ``Backend(accelerator="cuda")`` (or "mps", "xpu", ...) and is
available makes these true; the built-in NumPy backend is the host CPU, so without such a
plugin there is no accelerator, and scripts that pick their device the modern way::

    device = plugtorch.accelerator.current_accelerator() if plugtorch.accelerator.is_available() \\
        else plugtorch.device("cpu")

run unchanged on the CPU.
"""
from __future__ import annotations

from .core.device import Device
from .core.plugins import get_registry

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index",
           "set_device_index", "synchronize", "accelerator_backend"]


def accelerator_backend(kind: str | None = None):
    """The available backend computing on accelerator ``kind`` (any kind when None), or None."""
    for b in get_registry().backends.values():
        if b.available and b.accelerator is not None and (kind is None or b.accelerator == kind):
            return b
    return None


def is_available(check_available: bool = True) -> bool:
    """Whether an accelerator backend is registered and available."""
    return accelerator_backend() is not None


def current_accelerator(check_available: bool = False) -> Device | None:
    """The device of the accelerator backend (``device(type='cuda')`` when the backend answers
    to its kind's name, else its own name), or None when there is none."""
    b = accelerator_backend()
    if b is None:
        return None
    answers_to_kind = get_registry().resolve_name(b.accelerator) == b.name
    return Device(b.accelerator if answers_to_kind else b.name)


def device_count() -> int:
    """How many devices the accelerator backend can use (0 without one)."""
    return _count(accelerator_backend())


def _count(b) -> int:
    if b is None:
        return 0
    return int(b.device_count()) if b.device_count is not None else 1


def current_device_index() -> int:
    """The index of the current accelerator device (0), or -1 without an accelerator."""
    return 0 if accelerator_backend() is not None else -1


def set_device_index(device) -> None:
    """Select an accelerator device; plugtorch's backends use their first device."""
    index = device.index if isinstance(device, Device) else device
    if index not in (None, 0, -1) and not 0 <= int(index) < device_count():
        raise RuntimeError(f"set_device_index: device index {index} is out of range: "
                           f"{device_count()} accelerator device(s)")


def synchronize(device=None) -> None:
    """Wait for the accelerator backend's queued work (its ``Backend.synchronize``); without
    an accelerator, or on a backend that computes synchronously, there is nothing to wait for."""
    b = accelerator_backend()
    if b is not None and b.synchronize is not None:
        b.synchronize()
