"""``Graph``: the nodes of a traced program in order, how to edit them, and the Python they become.

Nodes form a doubly linked list around a sentinel, so inserting and erasing are O(1) and
iteration may erase the node it is on. ``inserting_before``/``inserting_after`` set where
``create_node`` (and ``placeholder``, ``call_function``, ...) put new nodes. ``python_code``
writes the ``forward`` a ``GraphModule`` runs, in torch.fx's layout: one statement per node,
each value released (``x = None``) after its last use.
"""
from __future__ import annotations

import builtins
import contextlib
import inspect
import operator
from collections.abc import Callable, Iterator
from typing import Any

from ._names import Namespace, public_name, qualified_name, snake_case
from .node import Argument, Node, Target, map_arg

__all__ = ["Graph", "PythonCode"]

# operator functions written as Python operators (torch.fx's magic_methods)
_BINARY = {"add": "{} + {}", "sub": "{} - {}", "mul": "{} * {}", "floordiv": "{} // {}", "truediv": "{} / {}",
           "mod": "{} % {}", "pow": "{} ** {}", "lshift": "{} << {}", "rshift": "{} >> {}", "and_": "{} & {}",
           "or_": "{} | {}", "xor": "{} ^ {}", "matmul": "{} @ {}", "eq": "{} == {}", "ne": "{} != {}",
           "lt": "{} < {}", "gt": "{} > {}", "le": "{} <= {}", "ge": "{} >= {}", "getitem": "{}[{}]"}
_UNARY = {"neg": "-{}", "pos": "+{}", "invert": "~{}"}


class _NodeList:
    """``graph.nodes``: iterates in order (or reversed), skipping nodes erased meanwhile."""

    def __init__(self, graph: Graph, direction: str = "_next") -> None:
        self._graph = graph
        self._direction = direction

    def __len__(self) -> int:
        return self._graph._len

    def __iter__(self) -> Iterator[Node]:
        root = self._graph._root
        cur = getattr(root, self._direction)
        while cur is not root:
            if not cur._erased:
                yield cur
            cur = getattr(cur, self._direction)

    def __reversed__(self) -> Iterator[Node]:
        return iter(_NodeList(self._graph, "_prev" if self._direction == "_next" else "_next"))


class _InsertPoint(contextlib.AbstractContextManager):
    def __init__(self, graph: Graph, new_insert: Callable[[Node], None]) -> None:
        self.graph = graph
        self.orig_insert, graph._insert = graph._insert, new_insert

    def __exit__(self, *exc: Any) -> None:
        self.graph._insert = self.orig_insert


class PythonCode:
    """What ``Graph.python_code`` returns: the source of ``forward`` and the globals it needs."""

    def __init__(self, src: str, globals: dict[str, Any]) -> None:
        self.src = src
        self.globals = globals


class Graph:
    """An ordered list of :class:`Node` s; the IR of ``plugtorch.fx`` (torch.fx's ``Graph``)."""

    def __init__(self, owning_module: Any = None, tracer_cls: type | None = None) -> None:
        self._root = Node(self, "", "root", "", (), {})
        self._insert: Callable[[Node], None] = self._root.prepend
        self._len = 0
        self._graph_namespace = Namespace()
        self.owning_module = owning_module
        self._tracer_cls = tracer_cls

    @property
    def nodes(self) -> _NodeList:
        return _NodeList(self)

    # -- building ------------------------------------------------------------------------------
    def create_node(self, op: str, target: Target, args: tuple | None = None, kwargs: dict | None = None,
                    name: str | None = None, type_expr: Any = None) -> Node:
        """A new node of kind ``op`` at the insertion point (the end unless ``inserting_*`` says)."""
        args = () if args is None else args
        kwargs = {} if kwargs is None else kwargs
        if not isinstance(args, tuple) or not isinstance(kwargs, dict):
            raise TypeError(f"Graph.create_node: args must be a tuple and kwargs a dict, got "
                            f"{type(args).__name__} and {type(kwargs).__name__}")
        for a in _nodes_in((args, kwargs)):
            if a.graph is not self:
                raise RuntimeError(f"Graph.create_node: argument node '{a}' belongs to another graph; "
                                   "copy it into this one first (Graph.node_copy)")
        candidate = name if name is not None else self._target_to_str(target)
        node = Node(self, self._graph_namespace.create_name(candidate, None), op, target, args, kwargs, type_expr)
        self._graph_namespace.associate_name_with_obj(node.name, node)
        self._insert(node)
        self._len += 1
        return node

    def placeholder(self, name: str, type_expr: Any = None, default_value: Any = inspect.Signature.empty) -> Node:
        args = () if default_value is inspect.Signature.empty else (default_value,)
        return self.create_node("placeholder", name, args=args, type_expr=type_expr)

    def get_attr(self, qualified_name: str, type_expr: Any = None) -> Node:
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_module(self, module_name: str, args: tuple | None = None, kwargs: dict | None = None,
                    type_expr: Any = None) -> Node:
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def call_method(self, method_name: str, args: tuple | None = None, kwargs: dict | None = None,
                    type_expr: Any = None) -> Node:
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def call_function(self, the_function: Callable[..., Any], args: tuple | None = None,
                      kwargs: dict | None = None, type_expr: Any = None) -> Node:
        return self.create_node("call_function", the_function, args, kwargs, type_expr=type_expr)

    def output(self, result: Argument, type_expr: Any = None) -> Node:
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    def node_copy(self, node: Node, arg_transform: Callable[[Node], Argument] = lambda x: x) -> Node:
        """A copy of ``node`` (from any graph) here, its node arguments mapped by ``arg_transform``."""
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        name = node.name if node.op != "placeholder" else str(node.target)
        new = self.create_node(node.op, node.target, args, kwargs, name, node.type)
        new.meta = dict(node.meta)
        return new

    def graph_copy(self, g: Graph, val_map: dict[Node, Node], return_output_node: bool = False) -> Any:
        """Copy ``g``'s nodes (but its output) here; ``val_map`` maps its nodes to the copies.
        Returns the copied output value (the output node itself with ``return_output_node``)."""
        for node in g.nodes:
            if node in val_map:
                continue
            if node.op == "output":
                rv = map_arg(node.args[0], lambda n: val_map[n])
                return (rv, node) if return_output_node else rv
            val_map[node] = self.node_copy(node, lambda n: val_map[n])
        return None

    def inserting_before(self, n: Node | None = None) -> _InsertPoint:
        """``with graph.inserting_before(n):`` new nodes go just before ``n`` (the start if None)."""
        if n is None:
            return self.inserting_after(self._root)
        if n.graph is not self:
            raise ValueError("inserting_before: the node belongs to another graph")
        return _InsertPoint(self, n.prepend)

    def inserting_after(self, n: Node | None = None) -> _InsertPoint:
        """``with graph.inserting_after(n):`` new nodes go just after ``n`` (the end if None)."""
        if n is None:
            return self.inserting_before(self._root)
        if n.graph is not self:
            raise ValueError("inserting_after: the node belongs to another graph")
        return _InsertPoint(self, n.append)

    # -- editing -------------------------------------------------------------------------------
    def erase_node(self, to_erase: Node) -> None:
        """Remove a node nothing uses any more."""
        if to_erase.users:
            raise RuntimeError(f"Tried to erase Node {to_erase} but it still had {len(to_erase.users)} users "
                               f"in the graph: {to_erase.users}!")
        if to_erase.graph is not self:
            raise RuntimeError(f"Attempting to remove {to_erase} from wrong graph!")
        if to_erase._erased:
            return
        to_erase._remove_from_list()
        to_erase._erased = True
        self._len -= 1
        to_erase._update_args_kwargs((), {})  # drop it from its inputs' users

    def eliminate_dead_code(self, is_impure_node: Callable[[Node], bool] | None = None) -> bool:
        """Erase the nodes whose values nothing uses (side-effecting ones stay); True if any went."""
        impure = is_impure_node or (lambda n: n.is_impure())
        changed = False
        for node in reversed(self.nodes):
            if not node.users and not impure(node):
                self.erase_node(node)
                changed = True
        return changed

    def lint(self) -> None:
        """Check the graph is well formed: nodes belong here, each argument is defined before use,
        names are unique, targets have the right type, and ``get_attr``/``call_module`` targets
        exist on the owning module when there is one."""
        seen: set[Node] = set()
        names: set[str] = set()
        for node in self.nodes:
            if node.graph is not self:
                raise RuntimeError(f"Node '{node}' does not belong to this Graph!")
            if node.name in names:
                raise RuntimeError(f"Node redefined name {node.name}!")
            names.add(node.name)
            for arg in node._input_nodes:
                if arg.graph is not self:
                    raise RuntimeError(f"Argument '{arg}' of Node '{node}' does not belong to this Graph, "
                                       "but was used as an argument! If you are copying nodes from another "
                                       "graph, make sure to use ``arg_transform`` on node_copy() to remap values")
                if arg not in seen:
                    raise RuntimeError(f"Argument '{arg}' of Node '{node}' was used before it has been defined! "
                                       "Please check that Nodes in the graph are topologically ordered")
            if node.op in ("get_attr", "call_module") and self.owning_module is not None:
                obj = self.owning_module
                for atom in str(node.target).split("."):
                    if not hasattr(obj, atom):
                        raise RuntimeError(f"Node {node} target {node.target} references nonexistent attribute "
                                           f"{atom} of {type(obj).__name__}")
                    obj = getattr(obj, atom)
            seen.add(node)

    # -- printing ------------------------------------------------------------------------------
    def __str__(self) -> str:
        returns = [""]
        lines = [node.format_node(None, returns) for node in self.nodes]
        return f"graph(){returns[0]}:" + "".join(f"\n    {line}" for line in lines if line)

    __repr__ = __str__

    def print_tabular(self) -> None:
        """Print the nodes as a table: opcode, name, target, args, kwargs."""
        rows = [["opcode", "name", "target", "args", "kwargs"]]
        rows += [[n.op, n.name, str(n.target if isinstance(n.target, str) else qualified_name(n.target)),
                  str(n.args), str(n.kwargs)] for n in self.nodes]
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for i, r in enumerate(rows):
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
            if i == 0:
                print("  ".join("-" * w for w in widths))

    # -- code generation -----------------------------------------------------------------------
    def python_code(self, root_module: str = "self") -> PythonCode:
        """The source of ``def forward(self, ...)`` for this graph, and the globals it needs."""
        import plugtorch
        namespace = Namespace()
        globals_: dict[str, Any] = {"plugtorch": plugtorch, "inf": float("inf"), "nan": float("nan")}
        for node in self.nodes:  # keep node names out of the globals' names
            namespace.create_name(node.name, node)

        def add_global(name_hint: str, obj: Any) -> str:
            public = public_name(obj)
            if public is not None:
                return public
            name = getattr(obj, "__name__", None)
            if getattr(obj, "__module__", None) == "builtins" and name and getattr(builtins, name, None) is obj:
                return str(name)
            name = namespace.create_name(name_hint, obj)
            globals_[name] = obj
            return name

        def fmt(arg: Any) -> str:
            if isinstance(arg, Node):
                return arg.name
            if isinstance(arg, tuple) and hasattr(arg, "_fields"):
                return f"{add_global(type(arg).__name__, type(arg))}({', '.join(fmt(a) for a in arg)})"
            if isinstance(arg, tuple):
                return "(" + ", ".join(fmt(a) for a in arg) + ("," if len(arg) == 1 else "") + ")"
            if isinstance(arg, list):
                return "[" + ", ".join(fmt(a) for a in arg) + "]"
            if isinstance(arg, dict):
                return "{" + ", ".join(f"{k!r}: {fmt(v)}" for k, v in arg.items()) + "}"
            if isinstance(arg, slice):
                return f"slice({fmt(arg.start)}, {fmt(arg.stop)}, {fmt(arg.step)})"
            if arg is None or isinstance(arg, (bool, int, str, bytes)) or arg is Ellipsis:
                return repr(arg)
            if isinstance(arg, float):
                return repr(arg) if arg == arg and abs(arg) != float("inf") else ("nan" if arg != arg else
                                                                                   ("inf" if arg > 0 else "-inf"))
            if isinstance(arg, type) or callable(arg):
                return add_global(getattr(arg, "__name__", "fn"), arg)
            return add_global(snake_case(type(arg).__name__), arg)

        def args_text(args: tuple, kwargs: dict) -> str:
            return ", ".join([fmt(a) for a in args] + [f"{k} = {fmt(v)}" for k, v in kwargs.items()])

        def attr_path(target: str) -> str:
            out = root_module
            for atom in target.split("."):
                out = f"{out}.{atom}" if atom.isidentifier() else f'getattr({out}, "{atom}")'
            return out

        # the node after which each value is last used: released there
        last_use: dict[Node, Node] = {}
        to_release: dict[Node, list[Node]] = {}
        for node in reversed(self.nodes):
            for inp in node._input_nodes:
                if inp not in last_use:
                    last_use[inp] = node
                    to_release.setdefault(node, []).append(inp)

        params: list[str] = []
        body: list[str] = []
        wrapped: dict[str, None] = {}  # functions fx.wrap named: the code wraps them again
        for node in self.nodes:
            if node.op == "placeholder":
                target = str(node.target)
                text = target + (f": {fmt(node.type)}" if node.type is not None else "")
                if node.args:
                    text += f" = {fmt(node.args[0])}"
                params.append(text)
                if target.lstrip("*") != node.name:
                    body.append(f"{node.name} = {target.lstrip('*')}")
                else:
                    continue
            elif node.op == "output":
                body.append(f"return {fmt(node.args[0])}")
                continue
            elif node.op == "get_attr":
                body.append(f"{node.name} = {attr_path(str(node.target))}")
            elif node.op == "call_module":
                body.append(f"{node.name} = {attr_path(str(node.target))}({args_text(node.args, node.kwargs)})")
            elif node.op == "call_method":
                body.append(f"{node.name} = {fmt(node.args[0])}.{node.target}"
                            f"({args_text(node.args[1:], node.kwargs)})")
            else:
                body.append(f"{node.name} = {self._call_text(node, fmt, args_text, add_global)}")
                if node.meta.get("is_wrapped"):
                    wrapped.setdefault(add_global(qualified_name(node.target).replace(".", "_"), node.target))
            released = list(to_release.get(node, []))
            if not node.users:
                released.append(node)
            if released:
                body[-1] += ";  " + " = ".join(n.name for n in released) + " = None"
        if not any(n.op == "output" for n in self.nodes):
            body.append("return None")
        wraps = "\n".join(f'plugtorch.fx._symbolic_trace.wrap("{name}")' for name in wrapped)
        src = f"\n{wraps}\n\ndef forward(" + ", ".join([root_module] + params) + "):\n" + \
            "".join(f"    {line}\n" for line in body) + "    "
        return PythonCode(src, globals_)

    @staticmethod
    def _call_text(node: Node, fmt: Callable, args_text: Callable, add_global: Callable) -> str:
        target = node.target
        module = getattr(target, "__module__", None)
        name = getattr(target, "__name__", "")
        if module == "_operator" and not node.kwargs:
            if name in _BINARY and len(node.args) == 2:
                return _BINARY[name].format(*(fmt(a) for a in node.args))
            if name in _UNARY and len(node.args) == 1:
                return _UNARY[name].format(fmt(node.args[0]))
        if target is getattr and len(node.args) == 2 and isinstance(node.args[1], str) \
                and node.args[1].isidentifier() and not node.kwargs:
            return f"{fmt(node.args[0])}.{node.args[1]}"
        if target is operator.getitem and not node.kwargs:
            return f"{fmt(node.args[0])}[{fmt(node.args[1])}]"
        hint = qualified_name(target).replace(".", "_")
        return f"{add_global(hint, target)}({args_text(node.args, node.kwargs)})"

    # -- naming --------------------------------------------------------------------------------
    @staticmethod
    def _target_to_str(target: Target) -> str:
        if isinstance(target, str):
            op = target[1:] if target.startswith("*") else target
            return snake_case(op.replace(".", "_"))
        public = public_name(target)  # plugtorch.nn.functional.softmax, not its functional_softmax
        name = public.rsplit(".", 1)[-1] if public else getattr(target, "__name__", None) or type(target).__name__
        return snake_case(name.split("::")[-1])


def _nodes_in(a: Any) -> list[Node]:
    found: list[Node] = []
    map_arg(a, found.append)
    return found
