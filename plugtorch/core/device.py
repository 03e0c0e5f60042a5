"""Devices and backend selection: ``PLUGTORCH_BACKEND``, ``use()``, ``backend()`` and ``device=``.

A device names a backend and, for multi-device backends, an ordinal: ``numpy``,
``cupy:0``. Aliases come from the backends themselves (the NumPy backend answers
to ``cpu``), so the core knows no backend by name.
"""
from __future__ import annotations

import contextlib
import os
import re
import threading

from .errors import BackendUnavailableError

# torch's device types: a script may name any of them (``device("mps")`` to test for one) whether
# or not a backend answers to it; plugtorch's backend names and aliases are valid too
_TORCH_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia",
                "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")
_known_types = set(_TORCH_TYPES)
_DEVICE_STRING = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)(?::(0|[1-9][0-9]*))?")  # torch's, digits allowed after


def _check_type(name: str) -> None:
    if name in _known_types:
        return
    from .plugins import get_registry
    reg = get_registry()
    if name in reg.backends or name in reg.aliases:
        _known_types.add(name)
        return
    names = ", ".join([*_TORCH_TYPES, *sorted(set(reg.backends) | set(reg.aliases) - set(_TORCH_TYPES))])
    raise RuntimeError(f"Expected one of {names} device type at start of device string: {name}")


def _index(value, place: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"device(): argument 'index' ({place}) must be int, not {type(value).__name__}")
    if value < 0:
        raise RuntimeError("Device index must not be negative")
    return value


class Device:
    """``plugtorch.device``, as torch's: ``device("cpu")``, ``device("cupy:0")``, ``device("cuda", 1)``;
    the type is a torch device type or a backend's name or alias, checked when made."""
    __slots__ = ("type", "index")
    type: str
    index: int | None

    def __init__(self, type, index: int | None = None):
        if isinstance(type, Device) and index is None:
            type, index = type.type, type.index
        elif isinstance(type, int) and not isinstance(type, bool) and index is None:  # device(1): the accelerator's
            from ..accelerator import current_accelerator
            acc = current_accelerator()
            if acc is None:
                raise RuntimeError("Cannot access accelerator device when none is available.")
            type, index = acc.type, _index(type, "position 1")
        elif not isinstance(type, str):
            raise TypeError(f"device() received an invalid combination of arguments - got ({type.__class__.__name__}"
                            f"{'' if index is None else ', ' + index.__class__.__name__}), but expected one of: "
                            "(plugtorch.device device), (str type, int index = -1)")
        elif type not in _known_types:  # a string to parse (the common names skip this)
            if not type:
                raise RuntimeError("Device string must not be empty")
            parsed = _DEVICE_STRING.fullmatch(type)
            if parsed is None:
                raise RuntimeError(f"Invalid device string: '{type}'")
            if parsed[2] is not None:
                if index is not None:
                    raise RuntimeError("type (string) must not include an index because index was passed "
                                       f"explicitly: {type}")
                type, index = parsed[1], int(parsed[2])
        if index is not None:
            index = _index(index, "position 2")
        _check_type(type)
        self.type = type
        self.index = index

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + ("" if self.index is None else f", index={self.index}") + ")"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = Device(other)
        if not isinstance(other, Device):
            return NotImplemented
        from .plugins import get_registry
        reg = get_registry()
        same_type = reg.resolve_name(self.type) == reg.resolve_name(other.type)
        return same_type and (self.index is None or other.index is None or self.index == other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))


class _Selection(threading.local):
    stack: list | None = None


_selection = _Selection()
_global_default: str | None = None


def describe_backends() -> str:
    from .plugins import get_registry
    reg = get_registry()
    ok = [n for n, b in reg.backends.items() if b.available]
    bad = [f"{n}: {b.unavailable_reason}" for n, b in reg.backends.items() if not b.available]
    text = f"Available backends: {', '.join(ok) or '(none)'}"
    if bad:
        text += ". Unavailable: " + "; ".join(bad)
    return text + f". Loaded plugins: {', '.join(reg.plugin_names())}."


def get_backend(name):
    """The Backend object for a name, alias, ``Device`` or "name:index" string."""
    from .plugins import get_registry
    if isinstance(name, Device):
        name = str(name)
    elif not isinstance(name, str):
        raise TypeError(f"expected a backend name or device, got {type(name).__name__}")
    reg = get_registry()
    base, _, index = name.partition(":")
    key = reg.resolve_name(base)
    b = reg.backends.get(key)
    if b is None:
        raise BackendUnavailableError(f"unknown backend '{name}'. {describe_backends()}")
    if not b.available:
        raise BackendUnavailableError(
            f"backend '{key}' is unavailable: {b.unavailable_reason}. {describe_backends()}"
        )
    if index:
        _check_index(name, index, b)
    return b


def _check_index(name: str, index: str, b) -> None:
    """``cupy:N``: N must name one of the backend's devices (a single-device backend takes any, as torch's cpu)."""
    try:
        i = int(index)
    except ValueError:
        raise RuntimeError(f"invalid device string '{name}': expected '{b.name}' or '{b.name}:<index>'") from None
    if b.device_count is None:
        return
    count = int(b.device_count())
    if not 0 <= i < count:
        raise RuntimeError(f"device '{name}' does not exist: backend '{b.name}' has {count} device(s), "
                           f"so valid indices are 0 to {count - 1}")
    current = getattr(b, "current_device", None)  # a backend computing on one selected device
    if current is not None and i != current():
        raise RuntimeError(f"device '{name}': backend '{b.name}' computes on its current device ({current()}); "
                           f"select device {i} in the array library first (for CuPy: cupy.cuda.Device({i}).use())")


def default_backend():
    stack = _selection.stack
    if stack:
        return stack[-1]
    global _global_default
    if _global_default is None:
        _global_default = os.environ.get("PLUGTORCH_BACKEND", "numpy")
    return get_backend(_global_default)


def use(name: str) -> None:
    """Make ``name`` the default backend for new tensors (process-wide)."""
    global _global_default
    get_backend(name)  # fail now, with the list of what is available
    _global_default = name


def current_backend() -> str:
    return default_backend().name


@contextlib.contextmanager
def backend(name: str):
    """``with plugtorch.backend("numpy"):`` — the default backend for new tensors in this block (this thread)."""
    b = get_backend(name)
    if _selection.stack is None:
        _selection.stack = []
    _selection.stack.append(b)
    try:
        yield b
    finally:
        _selection.stack.pop()
