"""The core's C paths (``_native.c``), loaded once, and why they are off where they are.

Four small functions stand in for the hottest Python in the core, each with the same effect
as its Python twin, which stays the reference:

- ``wrap``: a Tensor around a backend array (``dispatch.wrap``);
- ``node``: a graph node as ``cls(op, ...)`` makes it (the records in ``dispatch``);
- ``edge``: the node a recorded operand's gradient flows into (``dispatch.edge``);
- ``drain``: the backward loop, ``engine._Walk.step`` for built-in op nodes and leaves.

At small sizes this is where the time goes: a 10-op chain with its backward on (8, 8) tensors
took 131-138 us with the Python paths against torch's 115-118. The extension is built at install
(``setup.py``, optional). Where it is not built, was built from older sources, or
``PLUGTORCH_NATIVE_CORE=0`` is set, the Python paths run; :func:`status` says which. The CI's
NumPy-floor leg runs the core's tests that way.
"""
from __future__ import annotations

import os
import sys
from types import ModuleType

ABI = 7  # _native.c's ABI constant: they change together


def _load() -> tuple[ModuleType | None, str]:
    if os.environ.get("PLUGTORCH_NATIVE_CORE", "1") == "0":
        return None, "PLUGTORCH_NATIVE_CORE=0"
    if sys.implementation.name != "cpython":  # the C reads CPython's own object layouts
        return None, f"written for CPython, this is {sys.implementation.name}"
    try:
        from . import _native
    except ImportError as exc:  # built without a C compiler (setup.py's optional extension)
        return None, f"not built ({exc})"
    if getattr(_native, "ABI", None) != ABI:  # an editable install not rebuilt since _native.c changed
        return None, (f"the built extension is stale (interface {getattr(_native, 'ABI', None)}, these "
                      f"sources expect {ABI}); rebuild it with pip install -e .")
    return _native, ""


ext, _why_not = _load()


def check_slots(cls, fields) -> None:
    """Refuse to run C that would leave a field of ``cls`` unset (a developer's mistake):
    ``fields`` are those the C sets (``ext.TENSOR_FIELDS``, ``ext.NODE_FIELDS``), and the class
    must have exactly these, then ``__weakref__``."""
    expected = (*fields, "__weakref__")
    if tuple(cls.__slots__) != expected:
        raise ImportError(f"plugtorch/core/_native.c makes {cls.__name__} objects with the fields {expected}, "
                          f"but the class now has {tuple(cls.__slots__)}: update _native.c and "
                          "native.py together (or run with PLUGTORCH_NATIVE_CORE=0)")


def status() -> str:
    """Whether the core's C paths run, and if not why."""
    return "core C paths on (_native.c)" if ext is not None else f"core C paths off: {_why_not}"
