"""``export``: a model traced by ``plugtorch.fx``, run once on the example inputs, written as ONNX.

The trace gives the program; running its graph on the example inputs gives each node's value
(dtypes, ranks, the sizes the converters need). With ``dynamic_axes`` the graph runs a second
time on inputs one longer along each dynamic axis: a size or a dim that differs between the two
runs depends on a dynamic axis, and is written as ONNX shape arithmetic instead of a constant.
"""
from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import numpy as np

import plugtorch
from plugtorch.fx import Graph, GraphModule, Interpreter, Node, Tracer
from plugtorch.nn import GRU, LSTM, RNN, Module, ModuleDict, ModuleList, Sequential

from . import _shapes  # noqa: F401  (registers the converters of shapes and indexing)
from ._builder import Builder, OnnxExporterError, V, numpy_dtype
from ._functions import CONVERTERS
from ._modules import convert_module

__all__ = ["Converter", "LeafTracer", "Recorder", "flat", "trace", "MIN_OPSET", "MAX_OPSET", "DEFAULT_OPSET"]

MIN_OPSET, MAX_OPSET, DEFAULT_OPSET = 13, 20, 20


class LeafTracer(Tracer):
    """plugtorch's layers stay one node (their ONNX is known per layer); containers are traced through."""

    def is_leaf_module(self, m: Module, module_qualified_name: str) -> bool:
        return type(m).__module__.startswith("plugtorch.nn") and not isinstance(m, (Sequential, ModuleList, ModuleDict))

    def call_module(self, m: Module, forward: Any, args: tuple, kwargs: dict) -> Any:
        """A recurrent layer's result as the tuple it is, so that ``output, hidden = self.rnn(x, h)``
        traces (the layer's structure is known without running it; torch.fx cannot unpack it)."""
        out = super().call_module(m, forward, args, kwargs)
        if isinstance(m, (LSTM, GRU, RNN)) and self.is_leaf_module(m, ""):
            return (out[0], (out[1][0], out[1][1]) if isinstance(m, LSTM) else out[1])
        return out


ROOT = "root"


def trace(model: Module, names: list[str], concrete: dict[str, Any]) -> tuple[GraphModule, str]:
    """``model``'s forward as a GraphModule (``names`` its traced arguments, ``concrete`` the fixed ones),
    and the prefix its parameters' names have there."""
    tracer = LeafTracer()
    if not tracer.is_leaf_module(model, ""):
        return GraphModule(model, tracer.trace(model, concrete), type(model).__name__), ""
    # a plugtorch layer exported by itself: the one call of it that a parent's graph would hold
    holder = Module()
    holder.add_module(ROOT, model)
    graph = Graph()
    params = list(inspect.signature(type(model).forward).parameters.values())[1:]
    call_args = [graph.placeholder(p.name) if p.name in names else concrete[p.name] for p in params
                 if p.name in names or p.name in concrete]
    graph.output(graph.call_module(ROOT, tuple(call_args)))
    return GraphModule(holder, graph, type(model).__name__), ROOT + "."


class Recorder(Interpreter):
    """Runs the graph and keeps every node's value."""

    def __init__(self, gm: GraphModule) -> None:
        super().__init__(gm, garbage_collect_values=False)

    def values(self, args: tuple) -> dict[Node, Any]:
        self.run(*args)
        return dict(self.env)


def flat(value: Any) -> Iterator[Any]:
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from flat(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from flat(v)
    else:
        yield value


def _op_name(node: Node) -> str:
    if node.op == "call_method":
        return str(node.target)
    name = getattr(node.target, "__name__", str(node.target))
    if getattr(node.target, "__module__", None) in ("_operator", "operator"):
        return name.strip("_") if name.startswith("__") else name
    return name


class Converter:
    """Walks the traced graph and asks each node's converter for its ONNX."""

    def __init__(self, gm: GraphModule, opset: int, export_params: bool, prefix: str = "") -> None:
        self.gm, self.b = gm, Builder(opset)
        self.export_params = export_params
        self.env: dict[Node, Any] = {}
        self.params: dict[int, V] = {}
        self.param_inputs: list[V] = []
        # initializers named as in the exported model's state_dict (``prefix``: the holder of a bare layer)
        self._names = {id(t): n.removeprefix(prefix) for n, t in [*gm.named_parameters(), *gm.named_buffers()]}
        self.varying: dict[str, Any] = {}  # ONNX name -> the value in the second run
        self.dynamic = False
        self.ex: Any = None
        self.ex2: Any = None
        self.op_name = self.node_name = ""

    # -- what converters call --------------------------------------------------------------------
    def unmapped(self, what: str) -> OnnxExporterError:
        return OnnxExporterError(f"plugtorch.onnx.export: no ONNX mapping for op '{self.op_name}' {what} "
                                 f"(node {self.node_name})")

    def varies(self) -> bool:
        return self.dynamic and not _same(self.ex, self.ex2)

    def dynamic_dims(self, v: V) -> set[int]:
        if not self.dynamic:
            return set()
        other = self.varying.get(v.name)
        if not isinstance(other, plugtorch.Tensor):
            return set(range(v.ndim))  # not a node's value: nothing known, so nothing assumed fixed
        return {i for i, (a, c) in enumerate(zip(v.shape, other.shape)) if a != c}

    def parameter(self, t: Any) -> V:
        """The initializer (a graph input with ``export_params=False``) holding parameter ``t``."""
        if id(t) not in self.params:
            name = self._names.get(id(t), "param")
            array = t.detach().cpu().numpy()
            if self.export_params:
                self.params[id(t)] = self.b.initializer(name, array, t.detach())
            else:
                v = V(self.b.fresh(name), t.detach())
                self.param_inputs.append(v)
                self.params[id(t)] = v
        return self.params[id(t)]

    def tensor_constant(self, t: Any, dtype: Any) -> V:
        return self.b.cast(self.parameter(t), dtype)

    def array(self, a: np.ndarray, dtype: Any, name: str) -> V:
        return self.b.initializer(name, a.astype(numpy_dtype(dtype)), plugtorch.tensor(a))

    # -- the walk --------------------------------------------------------------------------------
    def run(self, inputs: list[Any], values: dict[Node, Any], values2: dict[Node, Any] | None) -> Any:
        self.dynamic = values2 is not None
        it = iter(inputs)
        for node in self.gm.graph.nodes:
            self.ex = values.get(node)
            self.ex2 = values2.get(node) if values2 is not None else None
            self.node_name = node.format_node() or node.name
            self.b.scope = node.name
            if node.op == "placeholder":
                self.env[node] = _take(next(it, None), self.ex)
            elif node.op == "get_attr":
                self.env[node] = self.parameter(self.ex) if isinstance(self.ex, plugtorch.Tensor) else self.ex
            elif node.op == "output":
                return _map(node.args[0], lambda n: self.env[n])
            else:
                self.env[node] = self._convert(node)
            for v, v2 in zip(flat(self.env[node]), flat(self.ex2)):
                if isinstance(v, V):
                    self.varying[v.name] = v2
        return None

    def _convert(self, node: Node) -> Any:
        args = _map(node.args, lambda n: self.env[n])
        kwargs = _map(node.kwargs, lambda n: self.env[n])
        if node.op == "call_module":
            m = self.gm.get_submodule(str(node.target))
            self.op_name = type(m).__name__
            return convert_module(self, m, args, kwargs)
        self.op_name = _op_name(node)
        # folded, as torch folds them: what is computed from constants only, and reads of sizes that no
        # dynamic axis changes (a dynamic axis always differs between the runs; arithmetic on sizes may not)
        if not self.varies() and (not any(isinstance(v, V) for v in flat((args, kwargs)))
                                  or (self.op_name in _SIZE_READS and _is_size(self.ex))):
            return self.ex
        fn = CONVERTERS.get(self.op_name)
        if fn is None:
            raise OnnxExporterError(f"plugtorch.onnx.export: no ONNX mapping for op '{self.op_name}' "
                                    f"(node {self.node_name})")
        return fn(self, args, kwargs)


_SIZE_READS = {"size", "getattr", "getitem", "dim", "ndimension"}


def _is_size(ex: Any) -> bool:
    """A number or a shape: a value that is a constant unless a dynamic axis changes it."""
    if isinstance(ex, (tuple, list)):
        return all(_is_size(e) for e in ex)
    return isinstance(ex, (int, float, bool))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, plugtorch.Tensor) or isinstance(b, plugtorch.Tensor):
        return isinstance(a, plugtorch.Tensor) and isinstance(b, plugtorch.Tensor) and a.shape == b.shape
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b) if not isinstance(a, np.ndarray) else bool(np.array_equal(a, b))


def _map(a: Any, fn: Any) -> Any:
    if isinstance(a, Node):
        return fn(a)
    if isinstance(a, tuple):
        return tuple(_map(x, fn) for x in a)
    if isinstance(a, list):
        return [_map(x, fn) for x in a]
    if isinstance(a, dict):
        return {k: _map(v, fn) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(_map(a.start, fn), _map(a.stop, fn), _map(a.step, fn))
    return a


def _take(slot: Any, ex: Any) -> Any:
    """A placeholder's value: its graph input(s), in the structure of its example value."""
    if isinstance(ex, (tuple, list)):
        return type(ex)(_take(s, e) for s, e in zip(slot, ex))
    return slot if slot is not None else ex


