"""Autograd graph visualisation: Graphviz DOT text with no dependencies, rendering where Graphviz exists.

``to_dot(y)`` walks the graph that produced ``y`` (its ``grad_fn`` and their inputs) and
returns DOT source: one box per op (with the shapes of the inputs it received), one
node per leaf tensor that requires grad (its shape, marked as requiring grad) and the
output tensor itself. ``render(y, "graph.svg")`` writes an image through the
``graphviz`` Python package and the ``dot`` binary, and says what to install if
either is missing.
"""
from __future__ import annotations

import os
import shutil

from .core.dispatch import edge
from .core.graph import AccumulateGrad
from .core.tensor import Tensor

__all__ = ["to_dot", "render"]

_GRAD_COLOR = "lightblue"
_OP_COLOR = "lightgrey"
_OUT_COLOR = "darkolivegreen1"


def _shape(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def _quote(text: str) -> str:
    """A DOT string literal; newlines in ``text`` become DOT's centred line breaks."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped + '"'


def to_dot(tensor, params: dict | None = None, show_attrs: bool = False) -> str:
    """DOT source for the autograd graph that produced ``tensor`` (or several tensors).

    params:     optional ``{name: tensor}`` (e.g. ``dict(model.named_parameters())``) so leaves
                are labelled with their names.
    show_attrs: also print each op's non-tensor arguments (dims, shapes, ...).
    """
    roots = [tensor] if isinstance(tensor, Tensor) else list(tensor)
    names = {id(t): n for n, t in (params or {}).items()}
    lines = ["digraph autograd {",
             '  graph [rankdir=BT, fontname="Helvetica"];',
             '  node [shape=box, style=filled, fontname="Helvetica", fontsize=10];']
    ids: dict = {}

    def node_id(obj) -> str:
        key = id(obj)
        if key not in ids:
            ids[key] = f"n{len(ids)}"
        return ids[key]

    seen = set()
    stack = []
    for i, t in enumerate(roots):
        out_id = f"out{i}"
        label = f"output{'' if len(roots) == 1 else ' ' + str(i)}\n{_shape(t.shape)} {t.dtype.name}"
        if t.requires_grad:
            label += "\nrequires_grad"
        lines.append(f"  {out_id} [label={_quote(label)}, fillcolor={_OUT_COLOR}];")
        fn = edge(t)  # the op that made t, its leaf node, or None if it needs no grad
        if fn is not None:
            lines.append(f"  {node_id(fn)} -> {out_id};")
            stack.append(fn)
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        nid = node_id(fn)
        if isinstance(fn, AccumulateGrad):
            var = fn.variable
            name = names.get(id(var), "leaf")
            label = f"{name}\n{_shape(var.shape)} {var.dtype.name}\nrequires_grad"
            lines.append(f"  {nid} [label={_quote(label)}, fillcolor={_GRAD_COLOR}, shape=ellipse];")
            continue
        label = fn.name_()
        inputs = getattr(fn, "meta", None) or ()
        if inputs:  # a number or None operand has no shape
            label += "\n" + ", ".join(_shape(m[0]) if m is not None else "number" for m in inputs)
        attrs = getattr(fn, "attrs", None)
        if show_attrs and attrs:
            label += "\n" + repr(attrs)[:60]
        lines.append(f"  {nid} [label={_quote(label)}, fillcolor={_OP_COLOR}];")
        for child in fn.next:
            if child is None:
                continue
            lines.append(f"  {node_id(child)} -> {nid};")
            stack.append(child)
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(tensor, path: str, params: dict | None = None, show_attrs: bool = False) -> str:
    """Write the graph as an image; the format is the extension of ``path`` (svg, png, pdf).

    Returns the written path. Raises RuntimeError naming what to install when the
    ``graphviz`` package or the Graphviz ``dot`` binary is missing (``to_dot`` needs neither).
    """
    root, ext = os.path.splitext(path)
    fmt = ext.lstrip(".").lower() or "svg"
    try:
        import graphviz
    except ImportError:
        raise RuntimeError(
            "plugtorch.viz.render needs the 'graphviz' Python package (pip install graphviz) and the "
            "Graphviz 'dot' program (e.g. apt-get install graphviz). plugtorch.viz.to_dot(tensor) "
            "gives the DOT text without either.") from None
    if shutil.which("dot") is None:
        raise RuntimeError(
            "plugtorch.viz.render found the 'graphviz' package but not the Graphviz 'dot' program on "
            "PATH; install Graphviz (e.g. apt-get install graphviz, brew install graphviz). "
            "plugtorch.viz.to_dot(tensor) gives the DOT text without it.")
    source = graphviz.Source(to_dot(tensor, params, show_attrs))
    return source.render(filename=os.path.basename(root), directory=os.path.dirname(root) or ".",
                         format=fmt, cleanup=True)
