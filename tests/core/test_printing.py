"""Tensor repr and print as torch formats them, and grad_fn names as torch's."""
from __future__ import annotations

import pytest

import plugtorch

# Each builds the same tensor with either module (``m`` is torch or plugtorch).
CASES = {
    "0-d": lambda m: m.tensor(3.5),
    "vector": lambda m: m.tensor([1.0, 2.25]),
    "matrix": lambda m: m.tensor([[1.5, 2.25], [3, 4]]),
    "int64": lambda m: m.tensor([1, 2, 3]),
    "bool": lambda m: m.tensor([[True, False], [False, True]]),
    "small: scientific": lambda m: m.tensor([1e-5, 1.0]),
    "large: scientific": lambda m: m.tensor([1e10, 1.0]),
    "wide range": lambda m: m.tensor([0.1, 0.25, 1000.0]),
    "non-finite": lambda m: m.tensor([float("nan"), float("inf"), -float("inf"), 0.0]),
    "zeros": lambda m: m.tensor([0.0, -0.0]),
    "whole floats": lambda m: m.tensor([1.0, -2.0, 100000.0]),
    "summarised vector": lambda m: m.arange(2000),
    "summarised matrix": lambda m: m.arange(2000.0).reshape(40, 50),
    "wrapped row": lambda m: m.arange(100.0) / 3,
    "3-D": lambda m: m.arange(30.0).reshape(2, 3, 5) / 7,
    "summarised 3-D": lambda m: m.arange(5000.0).reshape(10, 10, 50),
    "empty int64": lambda m: m.tensor([], dtype=m.int64),
    "empty 2-D": lambda m: m.zeros(0, 3),
    "empty float": lambda m: m.zeros(0),
    "int32": lambda m: m.tensor([1, 2], dtype=m.int32),
    "float64": lambda m: m.tensor([1.0, 2.5], dtype=m.float64),
    "float16": lambda m: m.tensor([1.5, 2.0], dtype=m.float16),
    "uint8 0-d": lambda m: m.tensor(3, dtype=m.uint8),
    "requires_grad": lambda m: m.tensor([1.0, 2.0, 3.0], requires_grad=True),
    "grad_fn": lambda m: m.tensor([1.0, 2.0, 3.0], requires_grad=True) * 2,
    "nan 0-d": lambda m: m.tensor(float("nan")),
    "negative ints": lambda m: m.tensor([-5, 100000]),
    "long rows": lambda m: m.arange(60.0).reshape(3, 20) * 1.123456,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_repr_matches_torch(torch, name):
    expected = repr(CASES[name](torch)).replace("torch.", "plugtorch.")
    assert repr(CASES[name](plugtorch)) == expected
    assert str(CASES[name](plugtorch)) == expected


@pytest.mark.parametrize("options", [{"precision": 2}, {"threshold": 5}, {"edgeitems": 1, "threshold": 5},
                                     {"linewidth": 40}, {"sci_mode": True}, {"profile": "short"},
                                     {"edgeitems": 0, "threshold": 5}])
@pytest.mark.parametrize("name", ["vector", "wrapped row", "summarised matrix", "3-D", "int64"])
def test_print_options_match_torch(torch, options, name):
    torch.set_printoptions(**options)
    plugtorch.set_printoptions(**options)
    try:
        assert repr(CASES[name](plugtorch)) == repr(CASES[name](torch)).replace("torch.", "plugtorch.")
    finally:
        torch.set_printoptions(profile="default")
        plugtorch.set_printoptions(profile="default")


def test_printoptions_context_restores():
    with plugtorch.printoptions(precision=1):
        assert repr(plugtorch.tensor([1.25])) == "tensor([1.2])"
    assert repr(plugtorch.tensor([1.25])) == "tensor([1.2500])"
    assert plugtorch.get_printoptions()["precision"] == 4


def test_parameter_repr():
    p = plugtorch.nn.Parameter(plugtorch.tensor([1.0, 2.0]))
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"


def _graph_ops(m):
    F = m.nn.functional
    x = m.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    t = m.tensor([0, 1])
    return {
        "add": x + 1, "pow scalar": x ** 2, "pow tensor": x ** x, "sum": x.sum(), "sum dim": x.sum(1),
        "mean": x.mean(), "mean dim": x.mean(1), "max": x.max(), "amax": x.amax(1), "mm": x @ x.t(),
        "bmm": x.unsqueeze(0) @ x.t().unsqueeze(0), "reshape": x.reshape(6), "view": x.view(6),
        "t": x.t(), "transpose": x.transpose(0, 1), "unsqueeze": x.unsqueeze(0),
        "squeeze dim": x.unsqueeze(0).squeeze(0), "squeeze": x.unsqueeze(0).squeeze(),
        "select": x[0], "slice": x[:, 1:], "index": x[t], "cat": m.cat([x, x]), "stack": m.stack([x, x]),
        "cross_entropy": F.cross_entropy(x, t), "nll_loss": F.nll_loss(x, t), "to": x.to(m.float64),
        "clamp": x.clamp(0, 3), "var": x.var(), "std": x.std(), "log1p": x.log1p(),
        "masked_fill": x.masked_fill(x > 2, 0.0), "logsumexp": x.logsumexp(1), "square": x.square(),
        "reciprocal": x.reciprocal(), "rsqrt": x.rsqrt(), "lerp": m.lerp(x, x * 2, 0.5),
        "lerp tensor": m.lerp(x, x * 2, x), "pad": F.pad(x, (1, 1)), "norm": x.norm(),
        "unfold": x.unfold(1, 2, 1), "scatter value": x.scatter(1, m.tensor([[0], [1]]), 0.0),
        "scatter": x.scatter(1, m.tensor([[0], [1]]), x), "softmax": x.softmax(1), "where": m.where(x > 2, x, 0.0),
    }


def test_grad_fn_names_match_torch(torch):
    ours, theirs = _graph_ops(plugtorch), _graph_ops(torch)
    mismatched = {k: (repr(ours[k].grad_fn), f"<{type(theirs[k].grad_fn).__name__}>") for k in theirs
                  if repr(ours[k].grad_fn) != f"<{type(theirs[k].grad_fn).__name__}>"}
    assert not mismatched


def test_loss_repr_shows_torchs_node(torch):
    x = plugtorch.tensor([[0.5, 1.5], [2.0, -1.0]], requires_grad=True)
    loss = plugtorch.nn.functional.cross_entropy(x, plugtorch.tensor([1, 0]))
    tx = torch.tensor([[0.5, 1.5], [2.0, -1.0]], requires_grad=True)
    tloss = torch.nn.functional.cross_entropy(tx, torch.tensor([1, 0]))
    assert repr(loss) == repr(tloss)


@pytest.mark.parametrize("call", [lambda m, t: t.max(1), lambda m, t: t.sort(1), lambda m, t: m.aminmax(t),
                                  lambda m, t: m.cummax(t, 1), lambda m, t: t.topk(1), lambda m, t: t.median(1),
                                  lambda m, t: t.min(0, keepdim=True)])
def test_named_tuple_results_print_as_torchs(torch, call):
    values = [[1.0, 5.0, 2.0], [3.0, 0.0, 4.0]]
    ours = call(plugtorch, plugtorch.tensor(values))
    assert repr(ours) == repr(call(torch, torch.tensor(values))).replace("torch.", "plugtorch.")


def test_named_tuple_results_pickle():
    import pickle
    out = pickle.loads(pickle.dumps(plugtorch.tensor([[1.0, 2.0]]).max(1)))
    assert isinstance(out, plugtorch.return_types.max) and out.indices.tolist() == [1]
