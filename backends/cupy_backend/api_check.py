"""NumPy that refuses what CuPy would refuse: the CuPy backend's code path, checked without a GPU.

``CheckedNamespace(numpy, cupy)`` behaves as ``numpy`` for every attribute the CuPy
backend uses, after checking that ``cupy`` has that attribute (module layout included:
``xp.lib.stride_tricks.as_strided`` must exist as ``cupy.lib.stride_tricks.as_strided``)
and, at each call, that CuPy's function accepts the arguments: positional count and
keyword names bound against its signature, and for ufuncs the operand count and the
keywords CuPy's ufuncs take (``out=...``, NumPy's way of asking for an array result, is
refused: CuPy's ufuncs always return arrays and reject it). Built with this namespace the
CuPy backend computes with NumPy on the CPU, so the conformance kit checks its values
while every NumPy-only call in its code fails CI.

What it cannot see: methods called on arrays (``x.astype``, ``x.reshape``; CuPy's
ndarray mirrors NumPy's for the ones the backend uses), and whether an argument would be a
host array where CuPy wants a device one.
"""
from __future__ import annotations

import inspect
import types
from typing import Any

import numpy

__all__ = ["CheckedNamespace", "CupyApiError"]

# What cupy.ufunc.__call__ accepts besides the operands (cupy/_core/_kernel.pyx).
_UFUNC_KEYWORDS = {"out", "dtype", "casting"}


class CupyApiError(TypeError):
    """A call the CuPy backend makes that CuPy does not support."""


def _is_ufunc(obj) -> bool:
    return type(obj).__name__ in ("ufunc", "_GUFunc") and type(obj).__module__.startswith("cupy")


class _CheckedUfunc:
    def __init__(self, name: str, host, ref):
        self._name, self._host, self._ref = name, host, ref

    def __call__(self, *args, **kwargs):
        nin = getattr(self._ref, "nin", None) or getattr(self._ref, "_nin", None)
        nout = getattr(self._ref, "nout", None) or getattr(self._ref, "_nout", 1)
        if nin is not None and not nin <= len(args) <= nin + nout:
            raise CupyApiError(f"cupy.{self._name} takes {nin} operands; the CuPy backend passed {len(args)}")
        extra = set(kwargs) - _UFUNC_KEYWORDS
        if extra and type(self._ref).__name__ == "ufunc":
            raise CupyApiError(f"cupy.{self._name} does not accept {sorted(extra)} (CuPy's ufuncs take "
                               f"{sorted(_UFUNC_KEYWORDS)})")
        if kwargs.get("out") is Ellipsis:
            raise CupyApiError(f"cupy.{self._name}(..., out=...): CuPy's ufuncs reject out=Ellipsis (they "
                               "always return arrays; call them without out)")
        if type(self._ref).__name__ == "_GUFunc":
            _bind(self._name, self._ref, args, kwargs)
        return _as_cupy_returns(self._host, args, kwargs)

    def __getattr__(self, attr: str):
        if not hasattr(self._ref, attr):
            raise CupyApiError(f"cupy.{self._name}.{attr} does not exist in CuPy")
        return getattr(self._host, attr)


def _as_cupy_returns(fn, args, kwargs):
    """Call NumPy's function as CuPy would behave: no floating-point warnings (a GPU raises
    none), and 0-d arrays where NumPy returns scalars (CuPy never returns host scalars)."""
    with numpy.errstate(all="ignore"):
        out = fn(*args, **kwargs)
    if isinstance(out, numpy.generic):
        return numpy.asarray(out)
    if isinstance(out, tuple):
        return tuple(numpy.asarray(o) if isinstance(o, numpy.generic) else o for o in out)
    return out


def _bind(name: str, ref, args, kwargs) -> None:
    try:
        sig = inspect.signature(ref)
    except (TypeError, ValueError):
        return  # a compiled function without a signature: its existence was checked
    try:
        sig.bind(*args, **kwargs)
    except TypeError as e:
        raise CupyApiError(f"cupy.{name}{sig} does not accept this call from the CuPy backend "
                           f"(args: {len(args)}, keywords: {sorted(kwargs)}): {e}") from None


class _CheckedFunction:
    def __init__(self, name: str, host, ref):
        self._name, self._host, self._ref = name, host, ref
        self.__name__ = getattr(host, "__name__", name)

    def __call__(self, *args, **kwargs):
        _bind(self._name, self._ref, args, kwargs)
        return _as_cupy_returns(self._host, args, kwargs)


class CheckedNamespace:
    """``host`` (NumPy or one of its submodules), with every attribute checked against ``ref`` (CuPy's)."""

    def __init__(self, host: Any, ref: Any, path: str = ""):
        self._host, self._ref, self._path = host, ref, path
        self._cache: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"<{getattr(self._host, '__name__', 'numpy')} checked against cupy{self._path}>"

    def __getattr__(self, name: str):
        cache = self.__dict__.get("_cache")
        if cache is None or name.startswith("__"):
            raise AttributeError(name)
        if name in cache:
            return cache[name]
        full = f"{self._path}.{name}".lstrip(".")
        if not hasattr(self._ref, name):
            raise CupyApiError(f"cupy.{full} does not exist: the CuPy backend must not use numpy.{full}")
        host, ref = getattr(self._host, name), getattr(self._ref, name)
        if isinstance(host, types.ModuleType):
            value: Any = CheckedNamespace(host, ref, f"{self._path}.{name}")
        elif _is_ufunc(ref):
            value = _CheckedUfunc(full, host, ref)
        elif isinstance(host, type) or not callable(host):
            value = host  # dtypes, ndarray (for isinstance), constants such as inf
        else:
            value = _CheckedFunction(full, host, ref)
        cache[name] = value
        return value
