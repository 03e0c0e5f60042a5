"""The Python state a compiled function reads besides its tensors, guarded.

A trace bakes in what the function's Python computed while capturing: ``x * SCALE`` replays
with the SCALE of the capture, ``clip_grad_norm_(ps, cfg.clip)`` with that clip. So a replay
also checks, as torch.compile's guards on globals do, that this state is still what it was:

* the globals the function's code names and its closure cells, and the objects among its
  arguments that the cache key holds by identity (a config object passed in);
* through them, the user functions it reaches (their globals and cells too), and the contents
  of the plain containers and objects it reaches (dicts, lists, tuples, namespaces such as
  argparse's, instances of user classes), a few levels and entries deep; a dict's or an
  object's entries only under the names and constants that code uses (``self.k``,
  ``cfg["clip"]``), so that a counter the code never reads does not make each call capture;
* numbers and strings by type and value; everything else (tensors, modules, optimizers,
  functions, classes) by identity: the other guards cover a tensor's array and a module's
  members, and a module's own state, such as a module-level constant of a library, is not
  read as user state.

Without bytecode analysis this is an over-approximation: a name the code uses as an attribute
may also be a global, which then is guarded too (a change there captures again, needlessly
but correctly). A function that changes such state itself runs eagerly (``changed_inside``).
"""
from __future__ import annotations

import argparse
import sys
import types
from collections.abc import Callable
from typing import Any

import numpy

from .guards import _MISSING, _same_objects

_SCALARS = (bool, int, float, complex, str, bytes, type(None))
_NAMESPACES = (argparse.Namespace, types.SimpleNamespace)
_LIBRARIES = ("plugtorch", "plugtorch_backends", "numpy", "torch", "builtins")
_DEPTH = 3     # containers and functions followed from the compiled function
_ENTRIES = 64  # a larger container is guarded by identity alone


def _scalar_key(value) -> Any:
    """A number or string as a replay must see it again: its type (``2`` and ``2.0`` give other
    dtypes) and value (a float by its bits: ``0.0`` and ``-0.0``, one NaN and another). Any other
    value (what a guarded name holds now may be anything) keys by type and itself."""
    kind = type(value)
    if kind is float:
        return kind, value.hex()
    if kind is complex:
        return kind, value.real.hex(), value.imag.hex()
    if isinstance(value, numpy.generic):
        return kind, value.tobytes()
    return kind, value


def _is_scalar(value) -> bool:
    return type(value) in _SCALARS or isinstance(value, numpy.generic)


def _library(obj) -> bool:
    """Whether ``obj`` (a class or function) is library code, whose state is not the user's:
    plugtorch, NumPy, the standard library, or any package installed in site-packages (a
    progress bar's counters, a logger's buffers)."""
    module = getattr(obj, "__module__", None) or ""
    if module.split(".")[0] in _LIBRARIES or module.split(".")[0] in sys.stdlib_module_names:
        return True
    path = getattr(sys.modules.get(module), "__file__", None) or ""
    return "site-packages" in path or "dist-packages" in path


# What a guard reads again before each replay: closures over the container (whose identity
# an earlier guard has checked) and the key.
Getter = Callable[[], Any]


def _constant(value) -> Getter:
    return lambda: value


def _entry(table: dict, key) -> Getter:
    return lambda: table.get(key, _MISSING)


def _item(seq, i: int) -> Getter:
    return lambda: seq[i] if i < len(seq) else _MISSING


def _keys_in(table: dict, names: set) -> Getter:
    return lambda: tuple(k for k in table if k in names)


def _length(seq) -> Getter:
    return lambda: len(seq)


def _cell(cell) -> Getter:
    def get():
        try:
            return cell.cell_contents
        except ValueError:  # emptied since
            return _MISSING
    return get


def _keyed(get: Getter) -> Getter:
    return lambda: _scalar_key(get())


def _boxed(get: Getter) -> Getter:
    return lambda: (get(),)


class _Walk:
    """Collects (value(), value at capture, by identity) guards, the form ``Guards`` checks.

    ``names``: the names and constants the reachable code uses; a dict's or an object's entries
    are guarded only under those keys (``cfg["clip"]``, ``self.k``), so that a trainer's step
    counter that the compiled code never reads does not make every call capture again. None:
    a first walk that only collects them (``used``)."""

    def __init__(self, names: set | None = None) -> None:
        self.guards: list[tuple[Getter, Any, bool]] = []
        self.seen: set[int] = set()
        self.names = names
        self.used: set = set()

    def watch(self, get: Getter, value, depth: int) -> None:
        """Guard what ``get()`` returns (the parent it reads from is guarded before it)."""
        if isinstance(value, types.ModuleType):
            return  # a module's namespace is library state (np, F, plugtorch)
        if _is_scalar(value):
            self.guards.append((_keyed(get), _scalar_key(value), False))
            return
        self.guards.append((_boxed(get), (value,), True))
        if depth >= _DEPTH or id(value) in self.seen:
            return
        self.seen.add(id(value))
        kind = type(value)
        if kind is types.FunctionType:
            self.function(value, depth + 1)
        elif kind is types.MethodType:
            self.watch(_constant(value.__self__), value.__self__, depth + 1)
            self.function(value.__func__, depth + 1)
        elif kind is dict:
            self.entries(value, depth + 1)
        elif kind in (list, tuple):
            self.items(value, depth + 1)
        elif isinstance(value, _NAMESPACES) or (hasattr(value, "__dict__") and not isinstance(value, type)
                                                and not _library(kind) and not _has_guards(value)):
            self.entries(value.__dict__, depth + 1)

    def entries(self, table: dict, depth: int) -> None:
        if len(table) > _ENTRIES:
            return
        names = self.names
        if names is None:  # collecting: every entry may lead to code
            for key, item in list(table.items()):
                self.watch(_entry(table, key), item, depth)
            return
        read = tuple(k for k in table if k in names)
        self.guards.append((_keys_in(table, names), read, False))  # the keys the code may use, present
        for key in read:
            self.watch(_entry(table, key), table[key], depth)

    def items(self, seq, depth: int) -> None:
        if len(seq) > _ENTRIES:
            return
        self.guards.append((_length(seq), len(seq), False))
        for i, item in enumerate(seq):
            self.watch(_item(seq, i), item, depth)

    def function(self, fn: types.FunctionType, depth: int) -> None:
        """A user function's globals (those its code names) and closure cells."""
        if _library(fn):
            return
        code = fn.__code__
        space = fn.__globals__
        self.used |= _names(code)
        for name in sorted(n for n in _names(code) if isinstance(n, str)):
            if name in space:
                self.watch(_entry(space, name), space[name], depth)
        for cell in fn.__closure__ or ():
            try:
                content = cell.cell_contents
            except ValueError:  # a cell not yet filled
                continue
            self.watch(_cell(cell), content, depth)


def _has_guards(obj) -> bool:
    """Tensors, modules and optimizers (user subclasses too): their state has guards of its own."""
    from ..core.tensor import Tensor
    from ..nn.modules.module import Module
    from ..optim.optimizer import Optimizer
    return isinstance(obj, (Tensor, Module, Optimizer))


def _names(code: types.CodeType) -> set:
    """The names a code object and the code objects it makes (lambdas, comprehensions) load, and
    the string and integer constants it holds (``cfg["clip"]``'s key)."""
    names: set = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
        elif type(const) in (str, int):
            names.add(const)
    return names



def _argument_objects(obj):
    """The objects among arguments that the cache key holds by identity: leaves that are not
    numbers, strings or tensors (containers are keyed by their contents)."""
    from ..core.tensor import Tensor
    if type(obj) in (tuple, list):
        for item in obj:
            yield from _argument_objects(item)
    elif type(obj) is dict:
        for item in obj.values():
            yield from _argument_objects(item)
    elif not _is_scalar(obj) and not isinstance(obj, Tensor):
        yield obj


def python_state_guards(fn: Callable, args=(), kwargs=None) -> list[tuple[Getter, Any, bool]]:
    """The guards on the Python state ``fn`` reads (see the module docstring); for a module's
    ``__call__``, its class's ``forward``. ``args`` and ``kwargs``: the call's, whose objects
    (a config passed in) the cache key holds by identity: their contents are guarded here."""
    collect = _Walk()
    _start(collect, fn, args, kwargs)
    walk = _Walk(collect.used)
    _start(walk, fn, args, kwargs)
    return walk.guards


def _start(walk: _Walk, fn: Callable, args, kwargs) -> None:
    """Walk from what ``fn`` reads: its arguments' objects, its owner, its code."""
    for obj in _argument_objects((args, kwargs or {})):
        walk.watch(_constant(obj), obj, 1)
    target: Any = fn
    owner = getattr(fn, "__self__", None)
    if owner is not None and _has_guards(owner):
        if getattr(fn, "__name__", "") == "__call__":
            target = getattr(type(owner), "forward", None)  # compile(model): its forward's globals
    elif owner is not None:  # a method of a plain object: what it reads through self
        walk.watch(_constant(owner), owner, 0)
    elif not isinstance(fn, (types.FunctionType, types.MethodType)) and callable(fn):
        walk.watch(_constant(fn), fn, 0)  # a callable object: its attributes, then its __call__'s globals
        target = next((k.__dict__["__call__"] for k in type(fn).__mro__ if "__call__" in k.__dict__), None)
    if isinstance(target, types.MethodType):
        target = target.__func__
    if isinstance(target, types.FunctionType):
        walk.function(target, 0)


def changed_inside(guards) -> str | None:
    """The first guard that no longer holds right after the capture, as words, or None: the
    function changed state it reads (a counter, a list it appends to), which a replay would not."""
    for value, captured, identity in guards:
        now = value()
        if not (_same_objects(now, captured) if identity else now == captured):
            return ("it changes Python state it reads (a global, a closed-over value or their contents) "
                    "inside the function, which a replay would not repeat")
    return None
