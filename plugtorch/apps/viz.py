"""Autograd graph visualisation: Graphviz DOT text with no dependencies, images through ``dot``.

``to_dot(y)`` walks the graph that produced ``y`` (its ``grad_fn`` and their inputs) and
returns DOT source: one box per op (with the shapes of the inputs it received), one
node per leaf tensor that requires grad (its shape, marked as requiring grad) and the
output tensor itself. ``render(y, "graph.svg")`` runs the Graphviz ``dot`` program
(``apt-get install graphviz``, ``brew install graphviz``) to draw it; where ``dot`` is
missing it writes the DOT text beside the requested path instead and warns, so a run
never fails for want of a picture. ``plugtorch viz`` does the same for the model
``plugtorch train`` trains.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings

from ..core.dispatch import edge
from ..core.graph import AccumulateGrad
from ..core.tensor import Tensor

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
        label = fn.name()
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


_TEXT = ("dot", "gv")


def render(tensor, path: str, params: dict | None = None, show_attrs: bool = False) -> str:
    """Write the graph to ``path``: an image in the format of its extension (svg, png, pdf,
    ...) drawn by Graphviz's ``dot``, or DOT text for ``.dot`` / ``.gv``. Returns the path
    written: where ``dot`` is not installed, the DOT text goes to ``<path>.dot`` instead,
    with a warning that says how to get the image."""
    root, ext = os.path.splitext(os.fspath(path))
    fmt = ext.lstrip(".").lower() or "svg"
    source = to_dot(tensor, params, show_attrs)
    if os.path.dirname(root):
        os.makedirs(os.path.dirname(root), exist_ok=True)
    dot = shutil.which("dot")
    if fmt in _TEXT or dot is None:
        target = os.fspath(path) if fmt in _TEXT else root + ".dot"
        with open(target, "w") as f:
            f.write(source)
        if fmt not in _TEXT:
            warnings.warn(f"plugtorch.apps.viz.render: the Graphviz 'dot' program is not on PATH, so "
                          f"the graph was written as DOT text to {target} instead of {path}. "
                          "Install Graphviz (apt-get install graphviz, brew install graphviz) "
                          f"and run `dot -T{fmt} {target} -o {path}`, or paste the text into "
                          "any Graphviz viewer.", UserWarning, stacklevel=2)
        return target
    run = subprocess.run([dot, f"-T{fmt}", "-o", os.fspath(path)], input=source.encode(),
                         capture_output=True, timeout=120)
    if run.returncode != 0:
        raise RuntimeError(f"Graphviz dot failed to write {path} (format {fmt!r}): "
                           f"{run.stderr.decode(errors='replace').strip()}")
    return os.fspath(path)


def model_graph(model_name: str = "mlp"):
    """(DOT-ready loss tensor, parameter names) for one batch through a `plugtorch train` model."""
    import plugtorch

    from ..nn import functional as F
    from .train import MODELS
    plugtorch.manual_seed(0)
    model = MODELS[model_name]()
    images, labels = plugtorch.randn(2, 1, 28, 28), plugtorch.randint(0, 10, (2,))
    loss = F.cross_entropy(model(images), labels)
    return loss, dict(model.named_parameters())


def main(model_name: str, output: str, show_attrs: bool) -> int:
    """``plugtorch viz``: see cli.py."""
    loss, params = model_graph(model_name)
    if output == "-":
        sys.stdout.write(to_dot(loss, params, show_attrs))
        return 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = render(loss, output, params, show_attrs)
    for w in caught:
        print(f"plugtorch viz: {w.message}", file=sys.stderr)
    print(f"wrote {written}")
    return 0
