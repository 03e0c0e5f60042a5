"""``plugtorch.fx``: capture a module's ``forward`` as a graph, edit it, and run it as code.

The API of ``torch.fx``: ``symbolic_trace`` and ``Tracer`` record a program into a ``Graph``
of ``Node`` s; a ``GraphModule`` runs a graph as the generated ``forward`` (``.code``);
``Interpreter``/``Transformer`` run or rewrite one node at a time; ``replace_pattern``
rewrites subgraphs; ``wrap`` keeps a function as one node. ``docs/fx.md`` says what is
supported.
"""
from __future__ import annotations

from . import graph, node, proxy, subgraph_rewriter
from ._symbolic_trace import Tracer, symbolic_trace, wrap
from .graph import Graph
from .graph_module import GraphModule
from .interpreter import Interpreter, Transformer
from .node import Node, map_arg
from .proxy import Proxy
from .subgraph_rewriter import replace_pattern

__all__ = ["symbolic_trace", "Tracer", "wrap", "Graph", "GraphModule", "Node", "Proxy", "Interpreter",
           "Transformer", "replace_pattern", "map_arg", "graph", "node", "proxy", "subgraph_rewriter"]
