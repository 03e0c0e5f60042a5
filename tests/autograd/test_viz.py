"""plugtorch.apps.viz: DOT text without Graphviz; images through dot; DOT text where dot is missing."""
from __future__ import annotations

import pathlib
import re

import pytest

import plugtorch
from plugtorch.apps import viz


def test_to_dot_shows_ops_shapes_and_grad_leaves():
    w = plugtorch.randn(3, 2, requires_grad=True)
    b = plugtorch.zeros(2, requires_grad=True)
    x = plugtorch.randn(4, 3)
    loss = (x @ w + b).relu().sum()
    dot = viz.to_dot(loss, params={"weight": w, "bias": b})
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    for text in ("MmBackward0", "AddBackward0", "ReluBackward0", "SumBackward0",
                 "weight\\n(3, 2) float32\\nrequires_grad", "bias\\n(2) float32", "output\\n() float32"):
        assert text in dot, text
    # every edge joins declared nodes, and the leaf x (no grad) is not drawn
    declared = set(re.findall(r"^\s*(\w+) \[label", dot, re.M))
    for a, b_ in re.findall(r"^\s*(\w+) -> (\w+);", dot, re.M):
        assert a in declared and b_ in declared
    assert "(4, 3) float32\\nrequires_grad" not in dot


def test_to_dot_of_a_tensor_without_graph_is_just_the_tensor():
    dot = viz.to_dot(plugtorch.ones(2))
    assert "output" in dot and "->" not in dot


def test_shared_subgraphs_are_drawn_once():
    x = plugtorch.ones(3, requires_grad=True)
    y = x.exp()
    dot = viz.to_dot(y * y + y)
    assert dot.count("ExpBackward0") == 1


def test_render_without_dot_writes_dot_text_and_says_how_to_draw_it(tmp_path, monkeypatch):
    import shutil
    monkeypatch.setattr(shutil, "which", lambda name: None)
    y = plugtorch.ones(1, requires_grad=True) * 2
    with pytest.warns(UserWarning, match="'dot' program is not on PATH") as caught:
        written = viz.render(y, str(tmp_path / "sub" / "g.svg"))
    assert written == str(tmp_path / "sub" / "g.dot") and "dot -Tsvg" in str(caught[0].message)
    assert pathlib.Path(written).read_text() == viz.to_dot(y)
    assert viz.render(y, str(tmp_path / "g.gv")) == str(tmp_path / "g.gv")  # DOT asked for: no warning


def test_render_draws_through_dot(tmp_path):
    import shutil
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed (apt-get install graphviz)")
    x = plugtorch.randn(2, 3, requires_grad=True)
    path = viz.render((x.exp() * 2).sum(), str(tmp_path / "g.pdf"), params={"x": x})
    assert path == str(tmp_path / "g.pdf") and pathlib.Path(path).read_bytes()[:5] == b"%PDF-"
    with pytest.raises(RuntimeError, match="Graphviz dot failed"):
        viz.render(x.exp().sum(), str(tmp_path / "g.not-a-format"))


def test_a_node_with_a_number_operand_is_drawn():
    # x * 2 records the number 2 as an operand without a shape: it is labelled, not a crash
    x = plugtorch.randn(2, 3, requires_grad=True)
    dot = plugtorch.apps.viz.to_dot(x * 2, show_attrs=True)
    assert "MulBackward0\\n(2, 3), number" in dot
