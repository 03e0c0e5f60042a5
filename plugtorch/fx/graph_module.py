"""``GraphModule``: an ``nn.Module`` whose ``forward`` is generated from a :class:`Graph`.

It copies from its root what the graph reads (``get_attr`` and ``call_module`` targets), and
``recompile()`` writes ``forward`` again after the graph was edited. Each instance has a class
of its own, so that setting ``forward`` on it leaves other GraphModules alone.
"""
from __future__ import annotations

import linecache
from typing import Any

from plugtorch.nn import Module

from .graph import Graph, PythonCode

__all__ = ["GraphModule"]

_count = [0]


def _copy_attr(from_module: Module, to_module: Module, target: str) -> None:
    *prefix, field = target.split(".")
    for item in prefix:
        f = getattr(from_module, item)
        t = getattr(to_module, item, None)
        if f is t:
            return  # already installed (a parent module copied whole)
        if t is None:
            t = Module()
            setattr(to_module, item, t)
        from_module, to_module = f, t
    _assign(to_module, field, getattr(from_module, field))


def _assign(to_module: Module, field: str, value: Any) -> None:
    import plugtorch
    from plugtorch.nn.parameter import Parameter
    if isinstance(value, plugtorch.Tensor) and not isinstance(value, Parameter):
        to_module.register_buffer(field, value)
    else:
        setattr(to_module, field, value)


def _assign_path(to_module: Module, target: str, value: Any) -> None:
    *prefix, field = target.split(".")
    for item in prefix:
        t = getattr(to_module, item, None)
        if t is None:
            t = Module()
            setattr(to_module, item, t)
        to_module = t
    _assign(to_module, field, value)


class GraphModule(Module):
    """``GraphModule(root, graph, class_name="GraphModule")``: ``root`` is a Module (or a dict from
    qualified names to the objects ``get_attr``/``call_module`` nodes read)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> GraphModule:
        # a class per instance: recompile() sets forward on it
        for t in cls.__mro__:
            if t.__name__ != "GraphModuleImpl":
                base = t
                break

        class GraphModuleImpl(base):  # type: ignore[valid-type, misc]
            pass
        return super().__new__(GraphModuleImpl)

    def __init__(self, root: Module | dict[str, Any], graph: Graph, class_name: str = "GraphModule") -> None:
        super().__init__()
        self.__class__.__name__ = class_name
        if isinstance(root, Module):
            if hasattr(root, "training"):
                self.training = root.training
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    _copy_attr(root, self, str(node.target))
        elif isinstance(root, dict):
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if node.target not in root:
                        raise RuntimeError(f"Node {node} referenced target {node.target} but that target was not "
                                           "provided in ``root``!")
                    _assign_path(self, str(node.target), root[node.target])
        else:
            raise RuntimeError(f"Unsupported type {root} passed for root!")
        self.graph = graph

    @property
    def graph(self) -> Graph:
        return self.__dict__["_graph"]

    @graph.setter
    def graph(self, g: Graph) -> None:
        if not isinstance(g, Graph):
            raise TypeError(f"GraphModule.graph must be a plugtorch.fx.Graph, got {type(g).__name__}")
        self.__dict__["_graph"] = g
        g.owning_module = self
        self.recompile()

    @property
    def code(self) -> str:
        """The Python source of the generated ``forward``."""
        return self.__dict__["_code"]

    def recompile(self) -> PythonCode:
        """Generate ``forward`` again from ``self.graph`` (after editing it)."""
        python_code = self.graph.python_code(root_module="self")
        self.__dict__["_code"] = python_code.src
        _count[0] += 1
        filename = f"<eval_with_key>.{_count[0]}"
        # registered with linecache so that tracebacks show the generated line
        linecache.cache[filename] = (len(python_code.src), None, python_code.src.splitlines(True), filename)
        globals_ = dict(python_code.globals)
        exec(compile(python_code.src, filename, "exec"), globals_)
        type(self).forward = globals_["forward"]  # type: ignore[method-assign]
        return python_code

    def _get_name(self) -> str:
        return type(self).__name__

    def __str__(self) -> str:
        return "\n".join([super().__repr__(), self.code,
                          "# To see more debug info, please use `graph_module.print_readable()`"])

    def print_readable(self, print_output: bool = True) -> str:
        text = f"class {type(self).__name__}(plugtorch.nn.Module):" + \
            "".join(f"\n    {line}" if line else "\n" for line in self.code.strip("\n").splitlines())
        if print_output:
            print(text)
        return text

    def __copy__(self) -> GraphModule:
        return GraphModule(self, self.graph, type(self).__name__)
