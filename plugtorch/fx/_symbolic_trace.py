"""``Tracer`` and ``symbolic_trace``: run a module's ``forward`` on Proxies and keep the graph.

While ``Tracer.trace`` runs, three things are patched and restored after (as torch.fx does):
``nn.Module.__call__`` (a submodule call goes through ``Tracer.call_module``: a leaf is one
``call_module`` node, any other module is traced through), the functions ``fx.wrap`` named
(recorded as one ``call_function`` node), and the public functions of ``plugtorch``,
``plugtorch.nn.functional`` and ``plugtorch.linalg`` (``max``, ``F.relu``, ``F.dropout`` included),
so that each records as the call written rather than as the ops it is made of. Outside a trace
(a Proxy made with ``Proxy(node)``), the op table's functions still record themselves.
"""
from __future__ import annotations

import builtins
import functools
import inspect
import math
import sys
from collections.abc import Callable
from typing import Any

import plugtorch
from plugtorch.nn import Module, Sequential
from plugtorch.nn.parameter import Parameter

from .graph import Graph
from .proxy import TraceError, TracerBase, _functional_style, find_proxy

__all__ = ["Tracer", "symbolic_trace", "wrap"]

# (globals of the module that called wrap, the name wrapped there)
_WRAPPED: list[tuple[dict, str]] = []


def wrap(fn_or_name: str | Callable) -> Any:
    """Record calls of this module-level function as one ``call_function`` node instead of tracing
    into it. Call at module scope: ``plugtorch.fx.wrap("len")`` or ``plugtorch.fx.wrap(my_fn)``."""
    if callable(fn_or_name):
        name = fn_or_name.__name__
    elif isinstance(fn_or_name, str):
        name = fn_or_name
    else:
        raise TypeError(f"wrap(): expected a function or a function's name, got {type(fn_or_name).__name__}")
    frame = sys._getframe(1)
    if frame.f_code.co_name != "<module>":
        raise NotImplementedError("wrap must be called at the top level of a module")
    if not any(g is frame.f_globals and n == name for g, n in _WRAPPED):
        _WRAPPED.append((frame.f_globals, name))
    return fn_or_name


def _recording(fn: Callable, is_wrapped: bool = False) -> Callable:
    """``fn`` that records itself when any argument is a Proxy, and runs otherwise. A node of a
    function ``wrap`` named is marked, so that the generated code wraps it again."""
    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        proxy = find_proxy(args, kwargs)
        if proxy is not None:
            out = proxy.tracer.create_proxy("call_function", fn, *_functional_style(fn, args, kwargs))
            if is_wrapped:
                out.node.meta["is_wrapped"] = True
            return out
        return fn(*args, **kwargs)
    wrapped.__fx_wrapped__ = fn  # type: ignore[attr-defined]
    return wrapped


def _namespaces() -> tuple:
    import plugtorch.nn.functional as F
    return (plugtorch, F, plugtorch.linalg)


def _publics() -> dict[int, Callable]:
    """id -> function: the public functions of plugtorch, nn.functional and linalg."""
    out: dict[int, Callable] = {}
    for module in _namespaces():
        for name in getattr(module, "__all__", ()):
            fn = getattr(module, name, None)
            if inspect.isfunction(fn):
                out[id(fn)] = fn
    return out


class _Patcher:
    """Sets attributes for the duration of a trace and puts the old values back."""

    def __init__(self) -> None:
        self._undo: list[tuple[Any, str, Any, bool]] = []

    def set(self, owner: Any, name: str, value: Any) -> None:
        d = owner if isinstance(owner, dict) else None
        had = (name in d) if d is not None else (name in vars(owner))
        old = (d.get(name) if d is not None else vars(owner).get(name))
        self._undo.append((owner, name, old, had))
        if d is not None:
            d[name] = value
        else:
            setattr(owner, name, value)

    def restore(self) -> None:
        for owner, name, old, had in reversed(self._undo):
            if isinstance(owner, dict):
                if had:
                    owner[name] = old
                else:
                    owner.pop(name, None)
            elif had:
                setattr(owner, name, old)
            else:
                delattr(owner, name)
        self._undo.clear()


class Tracer(TracerBase):
    """Records a module's (or a function's) ``forward`` into a :class:`Graph` (torch.fx's ``Tracer``).

    Override ``is_leaf_module`` to say which submodules stay one ``call_module`` node,
    ``create_proxy``/``create_node`` to see or change what is recorded, and ``call_module`` to act
    around each submodule call.
    """

    def __init__(self, autowrap_modules: tuple = (math,), autowrap_functions: tuple = (),
                 param_shapes_constant: bool = False) -> None:
        self._autowrap_function_ids = {id(v) for m in autowrap_modules for v in vars(m).values()
                                       if callable(v) and not isinstance(v, type) and not v.__name__.startswith("_")}
        self._autowrap_function_ids.update(id(f) for f in autowrap_functions)
        self.param_shapes_constant = param_shapes_constant
        self.root: Module = Module()
        self.graph = Graph()
        self.tensor_attrs: dict[Any, str] = {}
        self.submodule_paths: dict[Module, str] | None = None
        self._tensor_names: dict[int, str] | None = None

    # -- what becomes a node -----------------------------------------------------------------
    def is_leaf_module(self, m: Module, module_qualified_name: str) -> bool:
        """Whether ``m`` is recorded as one ``call_module`` node: plugtorch's own layers (but
        ``Sequential``) are; user-defined modules are traced through."""
        return (type(m).__module__.startswith("plugtorch.nn") and not isinstance(m, Sequential))

    def path_of_module(self, mod: Module) -> str:
        """The qualified name of ``mod`` in the root (``layer1.0.conv1``)."""
        if self.submodule_paths is not None:
            path = self.submodule_paths.get(mod)
            if path is None:
                raise NameError("module is not installed as a submodule")
            return path
        for name, m in self.root.named_modules():
            if m is mod:
                return name
        raise NameError("module is not installed as a submodule")

    def call_module(self, m: Module, forward: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """A submodule called during tracing: one node for a leaf, else its forward traced through."""
        module_qualified_name = self.path_of_module(m)
        if not self.is_leaf_module(m, module_qualified_name):
            return forward(*args, **kwargs)
        return self.create_proxy("call_module", module_qualified_name, args, kwargs)

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict[str, Any]) -> Any:
        """What reading a module attribute gives while tracing: a parameter or buffer of the root
        becomes a ``get_attr`` Proxy (one per name), anything else itself."""
        if isinstance(attr_val, plugtorch.Tensor) and self._tensor_names is not None:
            name = self._tensor_names.get(id(attr_val))
            if name is not None:
                if name not in parameter_proxy_cache:
                    parameter_proxy_cache[name] = self.create_proxy("get_attr", name, (), {})
                return parameter_proxy_cache[name]
        return attr_val

    def create_arg(self, a: Any) -> Any:
        """As ``TracerBase.create_arg``; a tensor becomes a ``get_attr`` of the root: a parameter or
        buffer under its own name, any other tensor as a new ``_tensor_constant<i>`` attribute."""
        if isinstance(a, Parameter):
            for n, p in self.root.named_parameters():
                if a is p:
                    return self.create_node("get_attr", n, (), {})
            raise NameError("parameter is not a member of this module")
        if isinstance(a, plugtorch.Tensor):
            qualname = self.tensor_attrs.get(a)
            if qualname is None:
                for n, b in self.root.named_buffers():
                    if b is a:
                        qualname = n
                        break
            if qualname is None:
                i = 0
                while hasattr(self.root, f"_tensor_constant{i}"):
                    i += 1
                qualname = f"_tensor_constant{i}"
                setattr(self.root, qualname, a)
                self.tensor_attrs[a] = qualname
            return self.create_node("get_attr", qualname, (), {})
        if isinstance(a, Module):
            raise TraceError("a Module cannot be an argument of a recorded call; call it instead")
        return super().create_arg(a)

    # -- tracing -------------------------------------------------------------------------------
    def trace(self, root: Module | Callable[..., Any], concrete_args: dict[str, Any] | None = None) -> Graph:
        """Run ``root``'s forward (or the function ``root``) on Proxies; returns the recorded Graph."""
        if isinstance(root, Module):
            self.root = root
            fn = type(root).forward
        else:
            self.root = Module()
            fn = root
        self.graph = Graph(tracer_cls=type(self))
        self.tensor_attrs = {}
        self.submodule_paths = {m: name for name, m in self.root.named_modules()}
        self._tensor_names = {id(t): n for n, t in [*self.root.named_parameters(), *self.root.named_buffers()]}
        fn_globals = getattr(fn, "__globals__", {})
        args = self._placeholders(fn, isinstance(root, Module), concrete_args or {})
        patcher = _Patcher()
        try:
            self._patch(patcher, fn_globals)
            result = fn(*args)
        finally:
            patcher.restore()
            self.submodule_paths = self._tensor_names = None
        self.create_node("output", "output", (self.create_arg(result),), {},
                         type_expr=fn.__annotations__.get("return") if hasattr(fn, "__annotations__") else None)
        return self.graph

    def _placeholders(self, fn: Callable, is_method: bool, concrete_args: dict[str, Any]) -> list[Any]:
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        args: list[Any] = [self.root] if is_method else []
        if is_method:
            params = params[1:]
        for p in params:
            if p.name in concrete_args:
                args.append(concrete_args[p.name])
                continue
            if p.kind is p.VAR_KEYWORD:
                raise TraceError(f"symbolic_trace: **{p.name} of {fn.__qualname__} cannot be traced; pass "
                                  "concrete_args or give each argument a name")
            name = ("*" + p.name) if p.kind is p.VAR_POSITIONAL else p.name
            default = () if p.default is p.empty else (p.default,)
            annotation = None if p.annotation is p.empty else p.annotation
            proxy = self.create_proxy("placeholder", name, default, {}, type_expr=annotation)
            args.append(proxy)
        return args

    def _patch(self, patcher: _Patcher, fn_globals: dict) -> None:
        tracer = self
        orig_call = Module.__call__

        def module_call_wrapper(mod: Module, *args: Any, **kwargs: Any) -> Any:
            def forward(*args: Any, **kwargs: Any) -> Any:
                return orig_call(mod, *args, **kwargs)
            return tracer.call_module(mod, forward, args, kwargs)
        patcher.set(Module, "__call__", module_call_wrapper)
        orig_getattr = Module.__getattr__
        cache: dict[str, Any] = {}

        def module_getattr_wrapper(mod: Module, attr: str) -> Any:
            return tracer.getattr(attr, orig_getattr(mod, attr), cache)
        patcher.set(Module, "__getattr__", module_getattr_wrapper)

        wrapped: dict[int, Callable] = {}
        for globals_, name in _WRAPPED:
            fn = globals_.get(name, getattr(builtins, name, None))
            if callable(fn):
                wrapped.setdefault(id(fn), _recording(fn, is_wrapped=True))
                patcher.set(globals_, name, wrapped[id(fn)])
        composites = _publics()
        for module in _namespaces():
            for name in getattr(module, "__all__", ()):
                fn = composites.get(id(getattr(module, name, None)))
                if fn is not None:
                    wrapped.setdefault(id(fn), _recording(fn))
                    patcher.set(vars(module), name, wrapped[id(fn)])
        for name, value in list(fn_globals.items()):  # names imported into the traced code's module
            if id(value) in self._autowrap_function_ids or id(value) in composites:
                wrapped.setdefault(id(value), _recording(value))
                patcher.set(fn_globals, name, wrapped[id(value)])


def symbolic_trace(root: Module | Callable[..., Any], concrete_args: dict[str, Any] | None = None) -> Any:
    """Trace ``root`` (a module or a function) into a ``GraphModule`` whose ``forward`` is the graph."""
    from .graph_module import GraphModule
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if isinstance(root, Module) else root.__name__
    return GraphModule(tracer.root, graph, name)

