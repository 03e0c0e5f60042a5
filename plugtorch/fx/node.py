"""``Node``: one operation of a ``Graph``, and ``map_arg`` / ``map_aggregate`` over its arguments.

A node is one of six kinds (``op``): ``placeholder`` (an input of ``forward``), ``get_attr``
(a parameter, buffer or submodule of the root), ``call_function``, ``call_method``,
``call_module`` and ``output``. Its ``args``/``kwargs`` hold other nodes wherever a value
flows in; assigning them keeps every node's ``users`` current, which is what
``replace_all_uses_with``, dead-code elimination and code generation read.
"""
from __future__ import annotations

import builtins
import operator
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["Node", "Target", "Argument", "map_arg", "map_aggregate"]

Target = Callable[..., Any] | str
Argument = Any

# ops whose result is a side effect: never removed as dead code
_IMPURE = {operator.setitem, builtins.print}


def map_aggregate(a: Argument, fn: Callable[[Argument], Argument]) -> Argument:
    """Apply ``fn`` to every leaf of ``a``, rebuilding tuples (named ones too), lists, dicts and slices."""
    if isinstance(a, tuple):
        t = tuple(map_aggregate(elem, fn) for elem in a)
        return t if not hasattr(a, "_fields") else type(a)(*t)
    if isinstance(a, list):
        return [map_aggregate(elem, fn) for elem in a]
    if isinstance(a, dict):
        return {k: map_aggregate(v, fn) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn), map_aggregate(a.step, fn))
    return fn(a)


def map_arg(a: Argument, fn: Callable[[Node], Argument]) -> Argument:
    """Apply ``fn`` to every ``Node`` inside ``a`` (the other leaves are kept)."""
    if not callable(fn):
        raise TypeError("map_arg(a, fn): fn must be a callable")
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


class Node:
    """One operation of a :class:`Graph` (see the module docstring for the six kinds)."""

    def __init__(self, graph: Graph, name: str, op: str, target: Target, args: tuple, kwargs: dict,
                 return_type: Any = None) -> None:
        if op not in ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output", "root"):
            raise ValueError(f"Node: unknown op {op!r}; one of placeholder, get_attr, call_function, "
                             "call_method, call_module, output")
        if op == "call_function" and not callable(target):
            raise ValueError(f"Node [{name}]: a call_function target must be callable, got {target!r}")
        if op in ("placeholder", "get_attr", "call_method", "call_module", "output") and not isinstance(target, str):
            raise ValueError(f"Node [{name}]: a {op} target must be a str, got {target!r}")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self._input_nodes: dict[Node, None] = {}
        self._args: tuple = ()
        self._kwargs: dict = {}
        self.users: dict[Node, None] = {}
        self.type = return_type
        self.meta: dict[str, Any] = {}
        self._prev = self
        self._next = self
        self._erased = False
        self._update_args_kwargs(map_arg(args, lambda x: x), map_arg(kwargs, lambda x: x))

    # -- position in the graph -----------------------------------------------------------
    @property
    def next(self) -> Node:
        return self._next

    @property
    def prev(self) -> Node:
        return self._prev

    def prepend(self, x: Node) -> None:
        """Move ``x`` to just before this node."""
        if x is self:
            raise ValueError("a node cannot be prepended to itself")
        x._remove_from_list()
        p = self._prev
        p._next, x._prev = x, p
        x._next, self._prev = self, x

    def append(self, x: Node) -> None:
        """Move ``x`` to just after this node."""
        self._next.prepend(x)

    def _remove_from_list(self) -> None:
        p, n = self._prev, self._next
        p._next, n._prev = n, p

    # -- arguments -------------------------------------------------------------------------
    @property
    def args(self) -> tuple:
        return self._args

    @args.setter
    def args(self, a: tuple) -> None:
        self._update_args_kwargs(map_arg(a, lambda x: x), self._kwargs)

    @property
    def kwargs(self) -> dict:
        return self._kwargs

    @kwargs.setter
    def kwargs(self, k: dict) -> None:
        self._update_args_kwargs(self._args, map_arg(k, lambda x: x))

    @property
    def all_input_nodes(self) -> list[Node]:
        """The nodes this one reads, in order of first appearance in ``args`` then ``kwargs``."""
        return list(self._input_nodes)

    def update_arg(self, idx: int, arg: Argument) -> None:
        args = list(self.args)
        args[idx] = arg
        self.args = tuple(args)

    def update_kwarg(self, key: str, arg: Argument) -> None:
        self.kwargs = {**self.kwargs, key: arg}

    def _update_args_kwargs(self, new_args: tuple, new_kwargs: dict) -> None:
        if not isinstance(new_args, tuple):
            raise TypeError(f"Node [{self.name}]: args must be a tuple, got {type(new_args).__name__}")
        if not isinstance(new_kwargs, dict):
            raise TypeError(f"Node [{self.name}]: kwargs must be a dict, got {type(new_kwargs).__name__}")
        self._args, self._kwargs = new_args, new_kwargs
        for old_use in self._input_nodes:
            old_use.users.pop(self)
        self._input_nodes = {}
        map_arg(self._args, self._input_nodes.setdefault)
        map_arg(self._kwargs, self._input_nodes.setdefault)
        for new_use in self._input_nodes:
            new_use.users.setdefault(self)

    def replace_all_uses_with(self, replace_with: Node, delete_user_cb: Callable[[Node], bool] = lambda user: True,
                              *, propagate_meta: bool = False) -> list[Node]:
        """Make every user of this node read ``replace_with`` instead; returns those users."""
        if propagate_meta:
            for k, v in self.meta.items():
                replace_with.meta.setdefault(k, v)
        to_process = [u for u in self.users if delete_user_cb(u)]
        for user in to_process:
            user.replace_input_with(self, replace_with)
        return to_process

    def replace_input_with(self, old_input: Node, new_input: Node) -> None:
        """Replace every occurrence of ``old_input`` in this node's arguments with ``new_input``."""
        def swap(n: Node) -> Node:
            return new_input if n is old_input else n
        self._update_args_kwargs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    def is_impure(self) -> bool:
        """Whether the node has effects beyond its value (an output, a placeholder, an in-place op)."""
        if self.op in ("placeholder", "output"):
            return True
        if self.op == "call_function":
            if self.target in _IMPURE:
                return True
            name = getattr(self.target, "__name__", "")
            return name.endswith("_") and not name.endswith("__") or getattr(self.target, "_fx_impure", False)
        if self.op == "call_method":
            return isinstance(self.target, str) and self.target.endswith("_") and not self.target.endswith("__")
        return False

    # -- printing ----------------------------------------------------------------------------
    def __repr__(self) -> str:
        return self.name

    def format_node(self, placeholder_names: list[str] | None = None,
                    maybe_return_typename: list[str] | None = None) -> str | None:
        """This node as ``Graph.__str__`` prints it (torch.fx's format)."""
        typename = f"{_type_repr(self.type)} " if self.type is not None else ""
        if self.op == "placeholder":
            if placeholder_names is not None:
                placeholder_names.append(str(self.target))
                return None
            default = f"(default={self.args[0]})" if self.args else ""
            return (f"%{self.name} : {typename}[num_users={len(self.users)}] = "
                    f"placeholder[target={self.target}]{default}")
        if self.op == "get_attr":
            return f"%{self.name} : {typename}[num_users={len(self.users)}] = get_attr[target={self.target}]"
        if self.op == "output":
            if self.type is not None and maybe_return_typename is not None:
                maybe_return_typename[0] = f" -> {_type_repr(self.type)}"
            return f"return {self.args[0]}"
        return (f"%{self.name} : {typename}[num_users={len(self.users)}] = "
                f"{self.op}[target={_pretty_target(self.target)}](args = {_format_arg(self.args)}, "
                f"kwargs = {_format_arg(self.kwargs)})")


def _type_repr(t: Any) -> str:
    if isinstance(t, type):
        return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
    return repr(t)


def _pretty_target(target: Target) -> str:
    if isinstance(target, str):
        return target
    from ._names import qualified_name
    return qualified_name(target)


def _format_arg(arg: Argument) -> str:
    if isinstance(arg, list):
        return "[" + ", ".join(_format_arg(a) for a in arg) + "]"
    if isinstance(arg, tuple) and not hasattr(arg, "_fields"):
        return "(" + ", ".join(_format_arg(a) for a in arg) + ("," if len(arg) == 1 else "") + ")"
    if isinstance(arg, dict):
        return "{" + ", ".join(f"{k}: {_format_arg(v)}" for k, v in arg.items()) + "}"
    if isinstance(arg, Node):
        return "%" + str(arg)
    if isinstance(arg, types.FunctionType | types.BuiltinFunctionType):
        return _pretty_target(arg)
    return str(arg)
