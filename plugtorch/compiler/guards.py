"""What a replay checks before it runs, so that it computes exactly what the eager call would.

A trace bakes in everything it read besides its argument arrays. Each such read is guarded:

* **arguments** (the cache key, ``arguments_key``): shapes, strides, dtypes, backends and
  ``requires_grad`` of the tensors; which arguments are the same array (``f(a, a)`` computes
  with one input where ``f(a, b)`` has two); every other argument by type and exact value
  (``1``, ``1.0`` and ``True`` are equal in Python but give other dtypes; ``0.0`` and ``-0.0``
  give other bits);
* **arguments that are also state** (``pins``): an argument whose array is a parameter's,
  a buffer's or optimizer state's may also be read through the module, which the trace
  cannot tell apart from reading the argument, so a replay needs that very array there;
* **constants** (parameters, buffers, optimizer state, closed-over tensors): still each
  tensor's array, with the same ``requires_grad``;
* **gradients** read or made: ``None`` where they were ``None``;
* **modules** called during the capture, modules owning a constant and every module of
  their models (``ModuleGuard``): their attributes (``training``, a dropout's ``p``), their
  parameters, buffers, submodules and hooks are the same objects. Modules count their own
  changes (``MODULE_VERSION``), so this is compared only after something changed;
* **Python guards** that library code adds while capturing (``recording.guard``): an
  optimizer's parameter groups and state (``load_state_dict`` replaces them);
* **autograd hooks**: none registered on any tensor since the capture (a replay would skip it;
  a capture that runs one falls back to eager).
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy

from ..core.debug import tensor_hooks_version
from ..core.ops.shape import _strides
from ..core.tensor import Tensor

# Bumped by nn.Module whenever an attribute, parameter, buffer, submodule or hook of any
# module is added, replaced or removed: a replay compares modules only after it moved.
MODULE_VERSION = [0]


def module_changed() -> None:
    MODULE_VERSION[0] += 1


_MISSING = object()


# -- arguments ----------------------------------------------------------------------------

def flatten(obj, tensors: list):
    """A hashable structure of ``obj`` with its tensors replaced by positions in ``tensors``;
    equal structures only for arguments a trace computes the same way with."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        # the layout too: kernels lay out their results after their inputs', and the trace's
        # views, copies and reused buffers were decided for the layouts seen at capture
        return ("T", obj._data.shape, _strides(obj), obj.dtype.name, obj._backend.name, obj.requires_grad)
    kind = type(obj)
    if kind in (tuple, list):
        return (kind.__name__,) + tuple(flatten(o, tensors) for o in obj)
    if kind is dict:
        return ("dict",) + tuple((k, flatten(v, tensors)) for k, v in sorted(obj.items(), key=repr))
    if kind is float:  # by its bits: -0.0 == 0.0, and a NaN equals no NaN
        return ("F", obj.hex())
    if kind is complex:
        return ("C", obj.real.hex(), obj.imag.hex())
    hash(obj)  # TypeError for an unhashable argument: it cannot be part of a guard
    if isinstance(obj, numpy.generic):  # a NumPy scalar: its dtype and bits
        return ("N", obj.dtype.str, obj.tobytes())
    return ("V", obj, kind)


def unflatten(structure, tensors):
    tag = structure[0]
    if tag == "T":
        return next(tensors)
    if tag in ("tuple", "list"):
        items = [unflatten(s, tensors) for s in structure[1:]]
        return tuple(items) if tag == "tuple" else items
    if tag == "dict":
        return {k: unflatten(s, tensors) for k, s in structure[1:]}
    if tag == "F":
        return float.fromhex(structure[1])
    if tag == "C":
        return complex(float.fromhex(structure[1]), float.fromhex(structure[2]))
    if tag == "N":
        return numpy.frombuffer(structure[2], structure[1])[0]
    return structure[1]


def arguments_key(args, kwargs, tensors: list) -> tuple:
    """The structure of the arguments and which tensor arguments share one array."""
    if not args and not kwargs:  # a training step's closure: checked before each replay
        return _NO_ARGUMENTS
    structure = flatten((args, kwargs), tensors)
    if len(tensors) < 2:
        return structure, ()
    first: dict[int, int] = {}
    return structure, tuple(first.setdefault(id(t._data), i) for i, t in enumerate(tensors))


_NO_ARGUMENTS = (flatten(((), {}), []), ())


# -- modules ------------------------------------------------------------------------------

class ModuleGuard:
    """A module's attributes and member tables as they were: each value the same object."""

    __slots__ = ("module", "attrs", "tables")

    def __init__(self, module):
        d = module.__dict__
        self.module = module
        self.attrs = tuple(d.items())
        # parameters, buffers, submodules and hooks: the tables that count their changes
        self.tables = tuple((k, tuple(v.items())) for k, v in d.items() if getattr(v, "counts_changes", False))

    def holds(self) -> bool:
        d = self.module.__dict__
        if not _same(d, self.attrs):
            return False
        return all(_same(d[k], items) for k, items in self.tables)

    def __repr__(self) -> str:
        return f"<guard on {type(self.module).__name__} at {id(self.module):#x}>"


def _same(table: dict, items: tuple) -> bool:
    if len(table) != len(items):
        return False
    get = table.get
    for k, v in items:
        if get(k, _MISSING) is not v:
            return False
    return True


def guarded_modules(called, const_owners, modules) -> list:
    """The modules a trace depends on: those called while capturing, and every module of each
    model (the tree under the outermost module) that owns a constant tensor or was called.
    ``modules``: every module alive; ``const_owners``: the tensors the trace reads as constants."""
    parent: dict[int, Any] = {}
    owner_of: dict[int, Any] = {}
    for m in modules:
        for child in m._modules.values():
            if child is not None:
                parent.setdefault(id(child), m)
        for t in list(m._parameters.values()) + list(m._buffers.values()):
            if t is not None:
                owner_of.setdefault(id(t), m)
    seeds = list(called) + [owner_of[id(t)] for t in const_owners if id(t) in owner_of]
    roots: dict[int, Any] = {}
    for m in seeds:
        seen = {id(m)}
        while id(m) in parent and id(parent[id(m)]) not in seen:
            m = parent[id(m)]
            seen.add(id(m))
        roots[id(m)] = m
    out: dict[int, Any] = {id(m): m for m in called}
    for root in roots.values():
        for m in root.modules():
            out.setdefault(id(m), m)
    return list(out.values())


# -- the guards of one trace -------------------------------------------------------------

class Guards:
    """Everything a trace checks before a replay (see the module docstring), as one generated
    function of straight-line tests: ``check(inputs, args)`` is True where a replay computes
    what eager would, False where it does not now, None where it never can again (a constant
    tensor holds another array)."""

    def __init__(self, pins, consts, grads, modules, python):
        self.pins: list[tuple[int, Any]] = list(pins)  # (argument position, the array it must be)
        self.consts: list[tuple[Tensor, Any, bool]] = list(consts)  # (tensor, its array, requires_grad)
        self.grads: list[tuple[Any, bool]] = list(grads)  # (tensor or argument position, grad was None)
        self.modules: list[ModuleGuard] = [ModuleGuard(m) for m in modules]
        self.module_version = [MODULE_VERSION[0]]
        self.python: list[tuple[Callable, Any, bool]] = list(python)  # (value(), value at capture, by identity)
        self.check = self._function()

    def modules_hold(self) -> bool:
        """Whether the guarded modules are as they were (asked once the module version moved)."""
        if not all(g.holds() for g in self.modules):
            return False
        self.module_version[0] = MODULE_VERSION[0]
        return True

    def _function(self) -> Callable:
        ns: dict = {"MODULE_VERSION": MODULE_VERSION, "HOOKS": tensor_hooks_version, "seen": self.module_version,
                    "modules_hold": self.modules_hold, "same_objects": _same_objects}

        def name(prefix: str, obj) -> str:
            key = f"{prefix}{len(ns)}"
            ns[key] = obj
            return key
        body = [f"if inputs[{i}] is not {name('p', array)}: return False" for i, array in self.pins]
        for owner, array, requires_grad in self.consts:
            t = name("o", owner)
            body += [f"if {t}._data is not {name('c', array)}: return None",
                     f"if {t}.requires_grad is not {requires_grad}: return False"]
        for t, was_none in self.grads:
            tensor = f"args[{t}]" if type(t) is int else name("t", t)
            body.append(f"if ({tensor}.grad is None) is not {was_none}: return False")
        if self.modules:
            body.append("if MODULE_VERSION[0] != seen[0] and not modules_hold(): return False")
        body.append(f"if HOOKS[0] != {tensor_hooks_version[0]}: return None")  # a hook the trace would skip
        for value, captured, identity in self.python:
            test = "same_objects" if identity else "(lambda a, b: a == b)"
            body.append(f"if not {test}({name('g', value)}(), {name('v', captured)}): return False")
        code = "def check(inputs, args):\n" + "".join(f"    {line}\n" for line in body + ["return True"])
        exec(compile(code, "<plugtorch.compile guards>", "exec"), ns)
        check = ns["check"]
        check.source = code
        return check


def _same_objects(now, captured) -> bool:
    return len(now) == len(captured) and all(map(operator.is_, now, captured))
