"""The op table, and how ops are declared into it.

``TABLE`` maps an op's name to its *current* definition (:class:`OpDef`). The
registry writes it — the core's definitions first, then any plugin's, an override
replacing an entry — and dispatch reads it on every call, so what a plugin
registers is what runs.

Every op of the core is declared with :func:`op` (a plugin passes the same ``OpDef`` to
``registrar.add_op``, or builds it with ``plugtorch.library.custom_op``). Each declaration
also records the op's public names in ``API``, from which ``plugtorch.*``, ``Tensor.*`` and
``nn.functional.*`` are bound (:mod:`plugtorch.core.api`). :func:`public` binds a public
function that is not an op of its own (``zeros``, ``clamp_min``, ``max`` returning values and
indices) the same way. ``docs/design.md`` ("Adding an op") shows the one way with examples.
"""
from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

from .complex_policy import refuses_complex
from .opdef import PLACES, OpDef

__all__ = ["TABLE", "CORE", "API", "INPLACE", "INTERCEPT", "MODES", "DispatchMode", "declare", "public", "op",
           "Done"]

TABLE: dict[str, OpDef] = {}
CORE: list[OpDef] = []
API: dict[str, dict[str, Callable]] = {place: {} for place in PLACES}
INPLACE: dict[str, Callable] = {}  # Tensor.<name>_ -> the function it applies in place


class _Intercept:
    """How a public function hands a call with an ``fx.Proxy`` argument to ``plugtorch.fx``.

    ``on`` counts the live proxies (``plugtorch.fx`` keeps it), so a public function tests one
    attribute and nothing more unless a graph is being built. Then ``call(fn, args, kwargs)``
    (or ``call_bound(fn, arguments)``, the arguments by parameter name) records ``fn`` called
    with them and returns the result's Proxy, or ``NotImplemented`` when no argument is a Proxy.
    """

    __slots__ = ("on", "call", "call_bound")

    def __init__(self) -> None:
        self.on = 0
        self.call: Callable = _not_implemented
        self.call_bound: Callable = _not_implemented


def _not_implemented(*args: Any) -> Any:
    return NotImplemented


INTERCEPT = _Intercept()


class DispatchMode:
    """A mode that sees every op call on tensors while it is in force: the profiler, autocast,
    forward-mode AD and ``vmap`` are modes. Subclasses override :meth:`dispatch`; entering the
    mode (``with mode:``) puts it on :data:`MODES`' stack, leaving takes it off.

    ``dispatch(opdef, operands, attrs)`` runs for each op call in the mode, the operands and
    attrs as ``call_op`` takes them (tensors, numbers, ``None``; attrs by name). While it runs,
    the mode is off, so the ``call_op(opdef, operands, attrs)`` it makes to compute the op goes
    to the next mode down or, under none, to the kernel; ``with self:`` inside it puts the mode
    back for code it should see again (a decomposition run op by op).
    """

    observes_only = False
    """True for a mode that only watches (the profiler): what the ops compute is the same with it
    in force. A ``plugtorch.compile``d function called under any other mode (autocast's casts,
    forward AD's tangents, vmap's batching) runs eagerly, since a replay skips the modes."""

    keeps_outputs = False
    """True for a mode that keeps something per tensor object (forward AD's tangents): while one
    is in force, a graph node keeps the output its rule reads itself, not an alias of it
    (``Node.output``), so the rule sees what the mode keeps for it."""

    def dispatch(self, opdef: OpDef, operands: tuple, attrs: dict) -> Any:
        from .dispatch import call_op
        return call_op(opdef, operands, attrs)

    def rebind(self, target: Any, source: Any) -> None:
        """An in-place op made ``target`` hold ``source``'s value (None: a constant, as ``zero_``
        writes), or made ``target`` an alias of ``source``'s old value: a mode that keeps
        something per tensor (forward AD's tangents) moves it here. Nothing by default."""

    def cast_operands(self, name: str, operands: tuple) -> tuple | None:
        """The operands of op ``name`` cast as this mode will run it, or None (the default) for a
        mode that leaves dtypes alone. A bind that would refuse operands of mixed dtypes (a matrix
        product, a convolution) asks the modes first (``MODES.cast_operands``): under autocast the
        float32 weight meeting a bfloat16 activation is cast, as in torch, not an error."""
        return None

    def __enter__(self):
        MODES.push(self)
        return self

    def __exit__(self, *exc: object) -> None:
        MODES.pop(self)


class _Modes:
    """The dispatch modes in force, per thread (as torch's modes and autocast are), innermost last.

    ``on`` is whether any thread has a mode in force (``_count`` counts them). Every path that
    runs a kernel for an op called on tensors (``call_op``, ``call_op1``, the elementwise fronts,
    ``cast``) tests it first, so with no mode anywhere an op pays that one attribute test (a
    bool, which the interpreter tests without a call, where a count would cost one); when it is
    true, ``call_op`` hands the call to :meth:`dispatch` if this thread's stack (:meth:`here`)
    holds a mode, and runs it plainly otherwise (another thread's mode, or a mode off inside its
    own ``dispatch``). ``on_enter`` holds callables run when a mode is entered: caches of fast
    paths that skip the test (the in-place methods' out= variants) forget what they learnt.
    """

    __slots__ = ("on", "_count", "keep_outputs", "_keeping", "on_enter", "_local", "_lock")

    def __init__(self) -> None:
        self.on = False
        self._count = 0
        self.keep_outputs = False  # whether a mode that keeps outputs is in force (in any thread)
        self._keeping = 0
        self.on_enter: list[Callable[[], None]] = []
        self._local = threading.local()
        self._lock = threading.Lock()  # the count is shared by the threads: its updates must not be lost

    @property
    def stack(self) -> list[DispatchMode]:
        """This thread's modes, innermost last."""
        try:
            return self._local.stack
        except AttributeError:
            stack = self._local.stack = []
            return stack

    def here(self) -> list[DispatchMode] | None:
        """This thread's modes (empty or None where it has none): ``call_op``'s second test."""
        return getattr(self._local, "stack", None)

    def push(self, mode: DispatchMode) -> None:
        self.stack.append(mode)
        with self._lock:
            self._count += 1
            self.on = True
            if mode.keeps_outputs:
                self._keeping += 1
                self.keep_outputs = True
        for forget in self.on_enter:  # after on is set: a cache filled meanwhile checks on again
            forget()

    def pop(self, mode: DispatchMode) -> None:
        stack = self.stack
        if not stack or stack[-1] is not mode:
            raise RuntimeError(f"dispatch modes left out of order: leaving {type(mode).__name__} while "
                               f"{type(stack[-1]).__name__ if stack else 'none'} is innermost")
        stack.pop()
        with self._lock:
            self._count -= 1
            self.on = self._count > 0
            if mode.keeps_outputs:
                self._keeping -= 1
                self.keep_outputs = self._keeping > 0

    def cast_operands(self, name: str, operands: tuple) -> tuple | None:
        """The operands as the innermost mode that casts them would (``DispatchMode.cast_operands``),
        or None when no mode in force casts."""
        for mode in reversed(self.stack):
            cast = mode.cast_operands(name, operands)
            if cast is not None:
                return cast
        return None

    def dispatch(self, opdef: OpDef, operands: tuple, attrs: dict) -> Any:
        """This thread's innermost mode's ``dispatch`` of the call, with that mode off while it
        runs (``call_op`` tests :meth:`here` first, so there is one)."""
        stack = self.stack
        mode = stack.pop()
        try:
            return mode.dispatch(opdef, operands, attrs)
        finally:
            stack.append(mode)

    def rebind(self, target: Any, source: Any) -> None:
        """Tell every mode in force that ``target`` now holds ``source``'s value (``DispatchMode.rebind``)."""
        for mode in list(self.stack):
            mode.rebind(target, source)


MODES = _Modes()


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
            INPLACE[name + "_"] = _checked(name, opdef.function)
    return opdef


def public(*places: str, name: str | None = None, inplace: bool = False):
    """Decorator: bind ``fn`` as ``plugtorch.<name>`` / ``Tensor.<name>`` / ``nn.functional.<name>``
    (and ``Tensor.<name>_``, applying it in place, with ``inplace=True``)."""
    def deco(fn):
        fn = _checked(name or fn.__name__, fn)  # callers inside plugtorch get torch's refusals too
        for place in places:
            _add_public(place, name or fn.__name__, fn)
        if inplace:
            INPLACE[(name or fn.__name__) + "_"] = fn
        return fn
    return deco


def _add_public(place: str, name: str, fn: Callable) -> None:
    if place not in API:
        raise ValueError(f"unknown place {place!r}; use one of {PLACES}")
    fn = _checked(name, fn)  # torch's error for a complex operand where torch refuses one
    old = API[place].get(name)
    if old is not None and old is not fn:
        raise ValueError(f"{place}.{name} is declared twice ({old!r} and {fn!r})")
    API[place][name] = fn


_CHECKED: dict[tuple[str, int], Callable] = {}


def _checked(name: str, fn: Callable) -> Callable:
    """``refuses_complex(name, fn)``, one wrapper per function and name (a function bound in two
    places is one function)."""
    key = (name, id(fn))
    out = _CHECKED.get(key)
    if out is None:
        out = _CHECKED[key] = refuses_complex(name, fn)
    return out


def op(name: str | None = None, *, bind: Callable | None = None, operands: int = 1,
       front: Callable | None = None, **fields):
    """Declare an op: the one way every op of the core is written (a plugin's ``OpDef`` is the
    same record). Returns the op's public function, which is also bound as ``plugtorch.<name>``,
    ``Tensor.<name>``, ``nn.functional.<name>`` and ``Tensor.<name>_`` where ``fields`` say so.

    The decorated function is what the op computes, in the calling convention kernels share
    (operands positionally, attrs by keyword): its body is the op's decomposition, written
    with plugtorch ops, unless ``primitive=`` or ``lower=`` says how it computes — then the
    body is only its docstring, and its signature documents what a kernel receives. The
    public function is generated, one of three ways:

    * from the decorated function's own signature, where it is torch's (its first
      ``operands`` parameters are the operands, the rest attrs; a ``variadic`` op's first
      parameter is its list of tensors);
    * from ``bind``, where torch's arguments need checks or normalising: ``bind`` has torch's
      signature and returns ``(operands, attrs)`` in the calling convention, or ``Done(value)``
      where torch answers without computing the op (``where(condition)`` alone is ``nonzero``);
    * by ``front(name)``, a hand-written fast path: the one every elementwise op of a family
      shares (``elementwise._unary``), or an op's own where a bind cannot serve it (it must act
      after the kernel ran, or a bind's extra call would cost a view op a third of its time).

    ``fields`` are the rest of the :class:`OpDef`: ``derivative`` (``rule(ctx, grad)``),
    ``jvp`` (``jvp(primals, tangents, output, attrs)``, the forward derivative), ``save``,
    ``dtypes``, ``exposed``, ``aliases``, ``inplace``, ``variadic``, ``view``, ...
    """
    def deco(fn):
        opname = name or fn.__name__
        if "decompose" in fields or "function" in fields:
            raise TypeError(f"op '{opname}': the decorated function is the decomposition and the public "
                            "function is generated; pass neither decompose= nor function=")
        computes = fields.get("primitive") is not None or fields.get("lower") is not None
        public: Any
        if front is not None:
            public = front(opname)
        elif bind is not None:
            public = _generated_front(opname, bind, 0, fields.get("variadic", False), bound=True)
        else:
            public = _generated_front(opname, fn, operands, fields.get("variadic", False))
        if not public.__doc__:
            public.__doc__ = fn.__doc__
        public = _checked(opname, public)  # torch's error for a complex operand where torch refuses one
        declare(OpDef(opname, decompose=None if computes else fn, function=public, module=_module_of(fn),
                      **fields))
        public.op_name = opname
        return public
    return deco


class Done:
    """What a ``bind`` returns to answer a call without dispatching the op."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _module_of(fn) -> str:
    return getattr(fn, "__module__", "").rsplit(".", 1)[-1]


def _generated_front(opname: str, fn: Callable, n_operands: int, variadic: bool, bound: bool = False) -> Callable:
    """Source for ``def f(<fn's parameters>): return call_op(opname, operands, attrs)``, or with
    ``bound``, ``return call_op(opname, *fn(<its parameters>))`` (``fn`` binds torch's arguments).

    Written out (as dataclasses does) rather than binding arguments at run time: the
    result has the real signature and costs one frame, like a hand-written function.
    """
    from .dispatch import NO_ATTRS, call_op, call_op1
    name = opname if opname.isidentifier() else fn.__name__
    params = list(inspect.signature(fn).parameters.values())
    defaults: dict[str, object] = {}
    text: list[str] = []
    operands: list[str] = []
    attrs: list[str] = []
    passed: list[str] = []  # how each parameter is passed on to ``fn`` (bound)
    star_done = False
    for i, p in enumerate(params):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            if not bound:
                raise TypeError(f"op '{opname}': *args, **kwargs and positional-only parameters need a "
                                "bind= function")
            if p.kind is p.VAR_POSITIONAL:
                text.append(f"*{p.name}")
                passed.append(f"*{p.name}")
                star_done = True
            elif p.kind is p.VAR_KEYWORD:
                text.append(f"**{p.name}")
                passed.append(f"**{p.name}")
            else:
                text.append(p.name if p.default is p.empty else f"{p.name}=_d{i}")
                passed.append(p.name)
                if p.default is not p.empty:
                    defaults[f"_d{i}"] = p.default
                if i + 1 == len(params) or params[i + 1].kind is not p.POSITIONAL_ONLY:
                    text.append("/")
            continue
        if p.kind is p.KEYWORD_ONLY and not star_done:
            text.append("*")
            star_done = True
        if p.default is not p.empty:
            defaults[f"_d{i}"] = p.default
            text.append(f"{p.name}=_d{i}")
        else:
            text.append(p.name)
        passed.append(f"{p.name}={p.name}" if p.kind is p.KEYWORD_ONLY else p.name)
        (operands if i < n_operands and p.kind is not p.KEYWORD_ONLY else attrs).append(p.name)
    # a Proxy argument records the call (plugtorch.fx) before a bind or a kernel sees it
    intercept = ("    if _fx.on:\n"
                 "        _fx_out = _fx.call_bound(_fx_front, locals())\n"
                 "        if _fx_out is not NotImplemented:\n"
                 "            return _fx_out\n")
    if bound:
        body = (f"    bound = _bind({', '.join(passed)})\n"
                "    if type(bound) is _Done:\n"
                "        return bound.value\n"
                "    operands, attrs = bound\n")  # cheaper than a star-call of the pair
        if variadic:
            body += f"    return _call_op({opname!r}, operands, attrs)\n"
        else:  # call_op1 skips the walk over a one-tensor tuple, the commonest
            body += (f"    if len(operands) == 1:\n"
                     f"        return _call_op1({opname!r}, operands[0], attrs)\n"
                     f"    return _call_op({opname!r}, operands, attrs)\n")
    else:
        attr_expr = "{" + ", ".join(f"{a!r}: {a}" for a in attrs) + "}" if attrs else "_NO_ATTRS"
        if len(operands) == 1 and not variadic:  # call_op1: no operand tuple to walk
            body = f"    return _call_op1({opname!r}, {operands[0]}, {attr_expr})\n"
        else:
            operand_expr = f"tuple({operands[0]})" if variadic else "(" + "".join(f"{o}, " for o in operands) + ")"
            body = f"    return _call_op({opname!r}, {operand_expr}, {attr_expr})\n"
    src = f"def {name}({', '.join(text)}):\n{intercept}{body}"
    namespace = {"_fx": INTERCEPT, "_call_op": call_op, "_call_op1": call_op1, "_NO_ATTRS": NO_ATTRS, "_bind": fn,
                 "_Done": Done, **defaults}
    # the front reaches itself as _fx_front, not by its name, which a parameter may share (threshold's)
    clash = sorted({p.name for p in params} & (namespace.keys() | {"_fx_front"}))
    if clash:
        raise TypeError(f"op '{opname}': parameter names {clash} are the generated front's own; rename them")
    exec(compile(src, f"<plugtorch op {opname}>", "exec"), namespace)
    front: Any = namespace[name]
    namespace["_fx_front"] = front
    front.__doc__ = fn.__doc__
    front.__module__ = fn.__module__
    front.__qualname__ = opname if opname.isidentifier() else fn.__qualname__
    if not bound:
        front.__wrapped_decomposition__ = fn
    front.op_name = opname
    return front
