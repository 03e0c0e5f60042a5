"""plugtorch.fx's API beyond the demos, against torch.fx where both run: printing, editing,
Interpreter/Transformer, errors, and recording through every op of the op table."""
from __future__ import annotations

import inspect

import pytest
from fx_demo_harness import assert_same_graph, code_as_torch

import plugtorch
import plugtorch.fx as fx
from plugtorch.core.optable import INTERCEPT, TABLE

plugtorch.get_registry()  # fills the op table the last test is parametrised over

# written by hand for speed (core/ops/_front.py): outside a trace they do not see a Proxy, inside
# one they record (docs/fx.md); as Proxy methods (x.reshape(...)) they always do
HAND_WRITTEN = {"cast", "contiguous", "expand", "getitem", "histogramdd", "index_select", "move", "permute",
                "reshape", "view"}  # (unique records: its complex check is a wrapper that does)


def _model(torch):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)
            self.seq = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(3, 2))

        def forward(self, x, scale=2.0):
            h = self.lin(x) * scale + self.lin.bias
            h = torch.nn.functional.softmax(torch.cat([h, h], 1), dim=1)
            return self.seq(h[:, :3]).sum(1, keepdim=True), torch.max(h, 1)
    torch.manual_seed(0)
    return Net()


def test_graph_code_and_printing_match_torch(torch):
    import torch.fx
    ours, theirs = fx.symbolic_trace(_model(plugtorch)), torch.fx.symbolic_trace(_model(torch))
    assert_same_graph(ours.graph, theirs.graph)
    assert code_as_torch(ours.code) == theirs.code
    assert code_as_torch(str(ours.graph)) == str(theirs.graph)
    assert str(ours).endswith(ours.code + "\n# To see more debug info, please use `graph_module.print_readable()`")
    assert INTERCEPT.on == 0  # no Proxy outlives the trace


def test_traced_module_computes_as_the_module():
    m = _model(plugtorch)
    gm = fx.symbolic_trace(m)
    x = plugtorch.randn(5, 4)
    (a, (v, i)), (b, (w, j)) = gm(x), m(x)
    assert plugtorch.allclose(a, b) and plugtorch.allclose(v, w) and i.tolist() == j.tolist()
    assert plugtorch.allclose(fx.Interpreter(gm).run(x)[0], b)


def test_transformer_rewrites_each_call():
    class MulForAdd(fx.Transformer):
        def call_function(self, target, args, kwargs):
            if target is __import__("operator").add:
                target = __import__("operator").mul
            return super().call_function(target, args, kwargs)

    gm = fx.symbolic_trace(lambda x, y: (x + y) - y)
    new = MulForAdd(gm).transform()
    x, y = plugtorch.tensor([2.0, 3.0]), plugtorch.tensor([4.0, 5.0])
    assert new(x, y).tolist() == [4.0, 10.0]
    assert "mul = x * y" in new.code


def test_editing_errors_match_torch(torch):
    import torch.fx
    for mod in (fx, torch.fx):
        g = mod.Graph()
        x = g.placeholder("x")
        y = g.call_method("neg", (x,))
        g.output(y)
        with pytest.raises(RuntimeError, match="Tried to erase Node x but it still had 1 users"):
            g.erase_node(x)
        with g.inserting_before(y):
            z = g.call_method("relu", (y,))
        with pytest.raises(RuntimeError, match="used before it has been defined"):
            g.lint()
        g.erase_node(z)
        g.lint()


def test_control_flow_on_a_proxy_is_refused(torch):
    def f(x):
        if x.sum() > 0:
            return x
        return -x
    with pytest.raises(fx.proxy.TraceError, match="symbolically traced variables cannot be used as inputs to "
                                                  "control flow"):
        fx.symbolic_trace(f)
    assert INTERCEPT.on == 0


def test_node_users_meta_and_dead_code():
    gm = fx.symbolic_trace(lambda x: plugtorch.relu(x) + 1)
    relu = next(n for n in gm.graph.nodes if n.name == "relu")
    relu.meta["tag"] = "kept"
    with gm.graph.inserting_after(relu):
        unused = gm.graph.call_function(plugtorch.exp, (relu,))
    assert set(relu.users) == {unused, relu.next.next} and relu.meta == {"tag": "kept"}
    assert gm.graph.eliminate_dead_code() and unused not in list(gm.graph.nodes)
    assert fx.node.map_arg((relu, [relu, 3]), lambda n: n.name) == ("relu", ["relu", 3])


@pytest.mark.parametrize("name", sorted(TABLE))
def test_every_op_records_a_proxy(name):
    """Each op's public function, given Proxies, returns the Proxy of one node calling it (outside
    a trace; in a trace every public function of plugtorch and nn.functional records)."""
    d = TABLE[name]
    f = d.function
    params = list(inspect.signature(f).parameters.values())
    if any(p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in params):
        pytest.skip(f"{name} takes required keyword-only arguments: no call from Proxies alone")
    n = sum(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    g = fx.Graph()
    x = fx.Proxy(g.placeholder("x"))
    args = [[x, x]] if d.variadic else [x] * max(1, n)
    if name in HAND_WRITTEN:
        with pytest.raises(Exception):  # noqa: B017  (what it raises is the hand-written front's own)
            f(*args)
        return
    out = f(*args)
    target = out.node.target
    # a public function that refuses complex operands records itself: the checked wrapper of f
    assert isinstance(out, fx.Proxy) and out.node.op == "call_function"
    assert target is f or getattr(target, "__wrapped__", None) is f or getattr(f, "__wrapped__", None) is target


def test_hand_written_fronts_record_inside_a_trace():
    gm = fx.symbolic_trace(lambda x: plugtorch.reshape(plugtorch.permute(x, (1, 0)), (-1,)))
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [plugtorch.permute, plugtorch.reshape]
    x = plugtorch.randn(2, 3)
    assert gm(x).tolist() == x.t().reshape(-1).tolist()
