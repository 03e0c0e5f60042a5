"""``replace_pattern``: find every non-overlapping copy of one subgraph and put another in its place.

The pattern and the replacement are functions (or GraphModules) traced to graphs. A match
follows data dependencies backwards from the pattern's returned value: the same kind of node
with the same target, arguments that match in turn (containers element by element, other
values equal), and each pattern input (placeholder) standing for one node or value throughout.
A matched internal node may have no users outside the match, so removing it loses nothing.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .graph import Graph
from .graph_module import GraphModule
from .node import Node, map_arg

__all__ = ["Match", "replace_pattern"]


@dataclass
class Match:
    anchor: Node  # the node the pattern's output matched
    nodes_map: dict[Node, Node]  # pattern node -> the graph's node


def _graph_of(fn: Callable | GraphModule) -> Graph:
    if isinstance(fn, GraphModule):
        return fn.graph
    from ._symbolic_trace import symbolic_trace
    return symbolic_trace(fn).graph


def _output_value(g: Graph) -> Node:
    outputs = [n for n in g.nodes if n.op == "output"]
    if len(outputs) != 1 or not isinstance(outputs[0].args[0], Node):
        raise ValueError("replace_pattern: the pattern must return exactly one value computed by it")
    return outputs[0].args[0]


class _Matcher:
    def __init__(self, pattern: Graph) -> None:
        self.anchor = _output_value(pattern)

    def match(self, node: Node) -> dict[Node, Any] | None:
        nodes_map: dict[Node, Any] = {}
        return nodes_map if self._match(self.anchor, node, nodes_map) else None

    def _match(self, pn: Node, gn: Any, m: dict[Node, Any]) -> bool:
        if pn in m:
            return m[pn] is gn
        if pn.op == "placeholder":
            m[pn] = gn
            return True
        if not isinstance(gn, Node) or pn.op != gn.op or not _same_target(pn.target, gn.target):
            return False
        if len(pn.args) != len(gn.args) or set(pn.kwargs) != set(gn.kwargs):
            return False
        m[pn] = gn
        if all(self._match_arg(a, b, m) for a, b in zip(pn.args, gn.args)) and \
                all(self._match_arg(pn.kwargs[k], gn.kwargs[k], m) for k in pn.kwargs):
            return True
        del m[pn]
        return False

    def _match_arg(self, a: Any, b: Any, m: dict[Node, Any]) -> bool:
        if isinstance(a, Node):
            return self._match(a, b, m)
        if isinstance(a, (list, tuple)):
            return type(a) is type(b) and len(a) == len(b) and all(self._match_arg(x, y, m) for x, y in zip(a, b))
        if isinstance(a, dict):
            return isinstance(b, dict) and set(a) == set(b) and all(self._match_arg(a[k], b[k], m) for k in a)
        return not isinstance(b, Node) and type(a) is type(b) and a == b


def _same_target(a: Any, b: Any) -> bool:
    return a == b if isinstance(a, str) and isinstance(b, str) else a is b


def replace_pattern(gm: GraphModule, pattern: Callable | GraphModule,
                    replacement: Callable | GraphModule) -> list[Match]:
    """Replace every non-overlapping match of ``pattern`` in ``gm``'s graph with ``replacement``
    (both take the same inputs); ``gm`` is recompiled. Returns the matches."""
    pattern_graph = _graph_of(pattern)
    replacement_graph = _graph_of(replacement)
    pattern_inputs = [n for n in pattern_graph.nodes if n.op == "placeholder"]
    replacement_inputs = [n for n in replacement_graph.nodes if n.op == "placeholder"]
    if len(pattern_inputs) != len(replacement_inputs):
        raise ValueError(f"replace_pattern: the pattern takes {len(pattern_inputs)} inputs and the replacement "
                         f"{len(replacement_inputs)}; they must take the same ones")
    matcher = _Matcher(pattern_graph)
    graph = gm.graph
    matched: set[Node] = set()
    matches: list[Match] = []
    for node in graph.nodes:
        if node.op in ("placeholder", "output") or node in matched:
            continue
        m = matcher.match(node)
        if m is None:
            continue
        internal = {gn for pn, gn in m.items() if pn.op != "placeholder"}
        if internal & matched:
            continue
        # an internal node read from outside the match would lose its value
        if any(u not in internal for gn in internal if gn is not node for u in gn.users):
            continue
        matched |= internal
        matches.append(Match(anchor=node, nodes_map={k: v for k, v in m.items() if isinstance(v, Node)}))
        values: dict[Node, Any] = {r: m[p] for p, r in zip(pattern_inputs, replacement_inputs)}
        value_of = values.__getitem__
        # before the first user of the match's value: its inputs are all defined by then
        first_user = min(node.users, key=_position(graph)) if node.users else node
        with graph.inserting_before(first_user):
            for rn in replacement_graph.nodes:
                if rn.op == "placeholder":
                    continue
                if rn.op == "output":
                    result = map_arg(rn.args[0], value_of)
                    break
                values[rn] = graph.node_copy(rn, value_of)
        if not isinstance(result, Node):
            raise ValueError("replace_pattern: the replacement must return one value computed by it")
        node.replace_all_uses_with(result)
        for gn in sorted(internal, key=_position(graph), reverse=True):
            if not gn.users:
                graph.erase_node(gn)
    gm.recompile()
    return matches


def _position(graph: Graph) -> Callable[[Node], int]:
    order = {n: i for i, n in enumerate(graph.nodes)}
    return lambda n: order.get(n, -1)
