"""The op table, and how ops are declared into it.

``TABLE`` maps an op's name to its *current* definition (:class:`OpDef`). The
registry writes it — the core's definitions first, then any plugin's, an override
replacing an entry — and dispatch reads it on every call, so what a plugin
registers is what runs.

The core declares its ops with the helpers below (a plugin passes an ``OpDef`` to
``registrar.add_op``). Each declaration also records the op's public names in
``API``, from which ``plugtorch.*``, ``Tensor.*`` and ``nn.functional.*`` are bound
(:mod:`plugtorch.core.api`):

* :func:`op` — decorate the op's *function*: torch's signature, argument checks and
  normalisation, ending in ``call_op(name, operands, attrs)``.
* :func:`composite` — decorate a *decomposition* whose signature already is torch's
  (operands first); the public function is generated from it.
* :func:`public` — a public function that is not an op of its own (``zeros``,
  ``clamp_min``): it is bound the same way.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

from .opdef import PLACES, OpDef

__all__ = ["TABLE", "CORE", "API", "INPLACE", "declare", "public", "op", "composite"]

TABLE: dict[str, OpDef] = {}
CORE: list[OpDef] = []
API: dict[str, dict[str, Callable]] = {place: {} for place in PLACES}
INPLACE: dict[str, Callable] = {}  # Tensor.<name>_ -> the function it applies in place


def declare(opdef: OpDef) -> OpDef:
    """Add one of the core's definitions (registered by the core plugin) and its public names."""
    if any(d.name == opdef.name for d in CORE):
        raise ValueError(f"op '{opdef.name}' is declared twice in the core")
    CORE.append(opdef)
    for place in opdef.exposed:
        fn = opdef.method if (place == "Tensor" and opdef.method is not None) else opdef.function
        if fn is None:
            raise ValueError(f"op '{opdef.name}' is exposed in {place} but has no function")
        for name in (opdef.name,) + tuple(opdef.aliases):
            _add_public(place, name, fn)
    if opdef.inplace and opdef.function is not None:
        for name in (opdef.name,) + tuple(opdef.aliases):
            INPLACE[name + "_"] = opdef.function
    return opdef


def public(*places: str, name: str | None = None, inplace: bool = False):
    """Decorator: bind ``fn`` as ``plugtorch.<name>`` / ``Tensor.<name>`` / ``nn.functional.<name>``
    (and ``Tensor.<name>_``, applying it in place, with ``inplace=True``)."""
    def deco(fn):
        for place in places:
            _add_public(place, name or fn.__name__, fn)
        if inplace:
            INPLACE[(name or fn.__name__) + "_"] = fn
        return fn
    return deco


def _add_public(place: str, name: str, fn: Callable) -> None:
    if place not in API:
        raise ValueError(f"unknown place {place!r}; use one of {PLACES}")
    old = API[place].get(name)
    if old is not None and old is not fn:
        raise ValueError(f"{place}.{name} is declared twice ({old!r} and {fn!r})")
    API[place][name] = fn


def op(name: str | None = None, **fields):
    """Decorator for an op's public function; ``fields`` are the rest of its :class:`OpDef`."""
    def deco(fn):
        declare(OpDef(name or fn.__name__, function=fn, module=_module_of(fn), **fields))
        fn.op_name = name or fn.__name__
        return fn
    return deco


def composite(name: str | None = None, *, operands: int = 1, **fields):
    """Decorator for a decomposition that *is* the op's signature (its first ``operands``
    parameters are the operands; a ``variadic`` op's first parameter is its tensor list).

    Returns the generated public function, which dispatches (a backend kernel, else this
    decomposition) and carries the decomposition's name, signature and docstring.
    """
    def deco(fn):
        opname = name or fn.__name__
        front = _generated_front(opname, fn, operands, fields.get("variadic", False))
        declare(OpDef(opname, decompose=fn, function=front, module=_module_of(fn), **fields))
        return front
    return deco


def _module_of(fn) -> str:
    return getattr(fn, "__module__", "").rsplit(".", 1)[-1]


def _generated_front(opname: str, fn: Callable, n_operands: int, variadic: bool) -> Callable:
    """Source for ``def f(<fn's parameters>): return call_op(opname, operands, attrs)``.

    Written out (as dataclasses does) rather than binding arguments at run time: the
    result has the real signature and costs one frame, like a hand-written function.
    """
    from .dispatch import NO_ATTRS, call_op
    params = list(inspect.signature(fn).parameters.values())
    defaults: dict[str, object] = {}
    text: list[str] = []
    operands: list[str] = []
    attrs: list[str] = []
    star_done = False
    for i, p in enumerate(params):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(f"composite '{opname}': *args, **kwargs and positional-only parameters "
                            "need a hand-written function (use @op)")
        if p.kind is p.KEYWORD_ONLY and not star_done:
            text.append("*")
            star_done = True
        if p.default is not p.empty:
            defaults[f"_d{i}"] = p.default
            text.append(f"{p.name}=_d{i}")
        else:
            text.append(p.name)
        (operands if i < n_operands and p.kind is not p.KEYWORD_ONLY else attrs).append(p.name)
    if variadic:
        operand_expr = f"tuple({operands[0]})"
    else:
        operand_expr = "(" + "".join(f"{o}, " for o in operands) + ")"
    attr_expr = "{" + ", ".join(f"{a!r}: {a}" for a in attrs) + "}" if attrs else "_NO_ATTRS"
    src = (f"def {fn.__name__}({', '.join(text)}):\n"
           f"    return _call_op({opname!r}, {operand_expr}, {attr_expr})\n")
    namespace = {"_call_op": call_op, "_NO_ATTRS": NO_ATTRS, **defaults}
    exec(compile(src, f"<plugtorch op {opname}>", "exec"), namespace)  # noqa: S102 - our own text
    front: Any = namespace[fn.__name__]
    front.__doc__ = fn.__doc__
    front.__module__ = fn.__module__
    front.__qualname__ = fn.__qualname__
    front.__wrapped_decomposition__ = fn
    front.op_name = opname
    return front
