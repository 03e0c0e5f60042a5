"""``Proxy``: the value a traced program computes with, recording each operation into a graph.

A Proxy wraps a :class:`Node`. Python operators on it record ``operator.*`` calls, attribute
reads record ``getattr`` (lazily: ``x.sum()`` is one ``call_method`` node), and a plugtorch
function or custom op called with a Proxy anywhere in its arguments records itself (the op
table's public functions hand such calls to :func:`_record_call`). Control flow on a Proxy
cannot be recorded and raises :class:`TraceError`.
"""
from __future__ import annotations

import operator
import threading
from collections.abc import Callable
from typing import Any

from plugtorch.core.optable import INTERCEPT

from .graph import Graph
from .node import Argument, Node, Target, map_aggregate

__all__ = ["Proxy", "Attribute", "TracerBase", "GraphAppendingTracer", "TraceError"]


class TraceError(ValueError):
    """An operation symbolic tracing cannot record (control flow on a traced value, ``len``, ...)."""


class TracerBase:
    """What a Proxy records through: a graph, and how arguments and nodes are made."""

    graph: Graph

    def create_node(self, kind: str, target: Target, args: tuple, kwargs: dict, name: str | None = None,
                    type_expr: Any = None) -> Node:
        node = self.graph.create_node(kind, target, args, kwargs, name, type_expr)
        return node

    def proxy(self, node: Node) -> Proxy:
        return Proxy(node, self)

    def create_proxy(self, kind: str, target: Target, args: tuple, kwargs: dict, name: str | None = None,
                     type_expr: Any = None, proxy_factory_fn: Callable[[Node], Proxy] | None = None) -> Proxy:
        """Record one operation (its Proxy arguments become their nodes) and return its Proxy."""
        args_ = self.create_arg(args)
        kwargs_ = self.create_arg(kwargs)
        if not isinstance(args_, tuple) or not isinstance(kwargs_, dict):
            raise TypeError("create_proxy: args must be a tuple and kwargs a dict")
        node = self.create_node(kind, target, args_, kwargs_, name, type_expr)
        return self.proxy(node) if proxy_factory_fn is None else proxy_factory_fn(node)

    def create_arg(self, a: Any) -> Argument:
        """``a`` as a graph argument: Proxies become their nodes, containers are mapped through."""
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, tuple) and hasattr(a, "_fields"):
            return type(a)(*(self.create_arg(e) for e in a))
        if isinstance(a, (tuple, list)):
            return type(a)(self.create_arg(e) for e in a)
        if isinstance(a, dict):
            out = {}
            for k, v in a.items():
                if not isinstance(k, str):
                    raise TraceError(f"keys of a dict argument must be str to be recorded, got {k!r}")
                out[k] = self.create_arg(v)
            return out
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        if isinstance(a, range):
            return range(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        if isinstance(a, Node):
            return a
        return a

    def iter(self, obj: Proxy) -> Any:
        raise TraceError("Proxy object cannot be iterated. This can be attempted when the Proxy is used in a "
                         "loop or as a *args or **kwargs function argument. See the torch.fx docs on "
                         "pytorch.org for a more detailed explanation of what types of control flow can be "
                         "traced, and check out the Proxy docstring for help troubleshooting Proxy iteration "
                         "errors")

    def to_bool(self, obj: Proxy) -> bool:
        raise TraceError("symbolically traced variables cannot be used as inputs to control flow")

    def keys(self, obj: Proxy) -> Any:
        return Attribute(obj, "keys")()


class GraphAppendingTracer(TracerBase):
    """A tracer that only appends to ``graph``: what a Proxy made outside ``Tracer.trace`` uses."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.root: Any = None


_live = threading.Lock()


class Proxy:
    """A traced value: operations on it are recorded as nodes of its tracer's graph.

    ``Proxy(node)`` makes one for an existing node (appending to ``node.graph``);
    ``Proxy(node, tracer)`` records through ``tracer``.
    """

    def __init__(self, node: Node, tracer: TracerBase | None = None) -> None:
        with _live:  # while any Proxy lives, plugtorch's functions look for one in their arguments
            INTERCEPT.on += 1
        self.__dict__["_counted"] = True
        if tracer is None:
            tracer = GraphAppendingTracer(node.graph)
        self.tracer = tracer
        self.node = node

    def __del__(self) -> None:
        if self.__dict__.get("_counted"):
            with _live:
                INTERCEPT.on -= 1

    def __repr__(self) -> str:
        return f"Proxy({self.node.name})"

    def __getattr__(self, k: str) -> Attribute:
        if k.startswith("_"):  # private and special names are never recorded
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{k}'")
        return Attribute(self, k)

    def __call__(self, *args: Any, **kwargs: Any) -> Proxy:
        return self.tracer.create_proxy("call_method", "__call__", (self,) + args, kwargs)

    def __iter__(self) -> Any:
        return self.tracer.iter(self)

    def __bool__(self) -> bool:
        return self.tracer.to_bool(self)

    def __len__(self) -> int:
        raise RuntimeError("'len' is not supported in symbolic tracing by default. If you want this call to be "
                           "recorded, please call plugtorch.fx.wrap('len') at module scope")

    def keys(self) -> Any:
        return self.tracer.keys(self)

    def __hash__(self) -> int:
        return id(self)

    def __getitem__(self, key: Any) -> Proxy:
        return self.tracer.create_proxy("call_function", operator.getitem, (self, key), {})

    def __setitem__(self, key: Any, value: Any) -> None:
        self.tracer.create_proxy("call_function", operator.setitem, (self, key, value), {})


def _binary(op: Callable) -> tuple[Callable, Callable]:
    def forward(self: Proxy, other: Any) -> Proxy:
        return self.tracer.create_proxy("call_function", op, (self, other), {})

    def reflected(self: Proxy, other: Any) -> Proxy:
        return self.tracer.create_proxy("call_function", op, (other, self), {})
    return forward, reflected


def _unary(op: Callable) -> Callable:
    def method(self: Proxy) -> Proxy:
        return self.tracer.create_proxy("call_function", op, (self,), {})
    return method


for _name in ("add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "lshift", "rshift", "and_", "or_",
              "xor", "matmul"):
    _fwd, _refl = _binary(getattr(operator, _name))
    _dunder = _name.rstrip("_")
    setattr(Proxy, f"__{_dunder}__", _fwd)
    setattr(Proxy, f"__r{_dunder}__", _refl)
for _name in ("eq", "ne", "lt", "gt", "le", "ge"):
    setattr(Proxy, f"__{_name}__", _binary(getattr(operator, _name))[0])
for _name in ("neg", "pos", "invert", "abs"):
    setattr(Proxy, f"__{_name}__", _unary(getattr(operator, _name)))


class Attribute(Proxy):
    """``proxy.name``: a ``getattr`` node made only when the value itself is used, so that
    ``proxy.name(...)`` records one ``call_method`` node."""

    def __init__(self, root: Proxy, attr: str) -> None:
        with _live:
            INTERCEPT.on += 1
        self.__dict__["_counted"] = True
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node: Node | None = None

    @property  # type: ignore[override]
    def node(self) -> Node:  # type: ignore[override]  # made when first read
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", getattr, (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args: Any, **kwargs: Any) -> Proxy:
        return self.tracer.create_proxy("call_method", self.attr, (self.root,) + args, kwargs)


def find_proxy(*values: Any) -> Proxy | None:
    """The first Proxy in ``values`` (searched through tuples, lists, dicts and slices), or None."""
    found: list[Proxy] = []

    def look(x: Any) -> Any:
        if not found and isinstance(x, Proxy):
            found.append(x)
        return x
    map_aggregate(values, look)
    return found[0] if found else None


def _record_call(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """A plugtorch function called with a Proxy argument: the call recorded (else NotImplemented)."""
    proxy = find_proxy(args, kwargs)
    if proxy is None:
        return NotImplemented
    args, kwargs = _functional_style(fn, tuple(args), dict(kwargs))
    return proxy.tracer.create_proxy("call_function", fn, args, kwargs)


def _functional_style(fn: Callable, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """An ``nn.functional`` function's call as torch records one (its Python functions pass
    themselves on with the leading tensors positional and every other argument by name);
    other calls as they were made."""
    from ._names import public_name
    name = public_name(fn)
    if name is None or not name.startswith("plugtorch.nn.functional."):
        return args, kwargs
    import inspect
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return args, kwargs
    bound.apply_defaults()
    positional: list[Any] = []
    named: dict[str, Any] = {}
    for p in inspect.signature(fn).parameters.values():
        value = bound.arguments[p.name]
        if p.kind is p.VAR_POSITIONAL or p.kind is p.VAR_KEYWORD:
            return args, kwargs
        if not named and p.kind is not p.KEYWORD_ONLY and _is_tensor_like(value):
            positional.append(value)
        else:
            named[p.name] = value
    return tuple(positional), named


def _is_tensor_like(value: Any) -> bool:
    import plugtorch
    if isinstance(value, (list, tuple)):
        return bool(value) and all(_is_tensor_like(v) for v in value)
    return isinstance(value, (Proxy, plugtorch.Tensor))


def _record_bound(fn: Callable, arguments: dict) -> Any:
    """``_record_call`` for a generated public function: its arguments by parameter name, given back
    as the caller most likely wrote them (trailing defaults left out)."""
    if find_proxy(arguments) is None:
        return NotImplemented
    args, kwargs = _as_call(fn, arguments)
    return _record_call(fn, args, kwargs)


_SIGNATURES: dict[Callable, list] = {}


def _as_call(fn: Callable, arguments: dict) -> tuple[tuple, dict]:
    import inspect
    params = _SIGNATURES.get(fn)
    if params is None:
        params = _SIGNATURES[fn] = list(inspect.signature(fn).parameters.values())
    positional: list[Any] = []
    pending: list[Any] = []  # defaulted positionals, passed only if a later one is
    kwargs: dict[str, Any] = {}
    for p in params:
        value = arguments[p.name]
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            if _is_default(value, p.default):
                pending.append(value)
            else:
                positional += pending + [value]
                pending = []
        elif p.kind is p.VAR_POSITIONAL:
            if value:
                positional += pending + list(value)
                pending = []
        elif p.kind is p.KEYWORD_ONLY:
            if not _is_default(value, p.default):
                kwargs[p.name] = value
        else:
            kwargs.update(value)
    return tuple(positional), kwargs


def _is_default(value: Any, default: Any) -> bool:
    if value is default:
        return True
    if default is inspect_empty or isinstance(value, Proxy):
        return False
    return type(value) is type(default) and isinstance(value, (int, float, str)) and value == default


inspect_empty = __import__("inspect").Parameter.empty
INTERCEPT.call = _record_call
INTERCEPT.call_bound = _record_bound
