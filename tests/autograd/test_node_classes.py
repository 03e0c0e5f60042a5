"""A grad_fn is an instance of a class named as torch's (``type(t.grad_fn).__name__ ==
"MmBackward0"``), with torch's ``name()`` method, as code that walks graphs (visualisers,
hook registries) dispatches on them; and those classes change nothing about what runs."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch.core import native
from plugtorch.core.graph import Node

torch = pytest.importorskip("torch")

# (label, the call on either library's module and inputs): inputs are a (4, 3) float tensor and a
# (3, 5) one, each requiring grad
CALLS = {
    "mm": lambda m, a, b: a @ b,
    "batched matmul": lambda m, a, b: a.reshape(2, 2, 3) @ b,
    "add": lambda m, a, b: a + a,
    "mul by a number": lambda m, a, b: a * 2,
    "sum": lambda m, a, b: a.sum(),
    "sum over a dim": lambda m, a, b: a.sum(1),
    "mean": lambda m, a, b: a.mean(),
    "pow by a number": lambda m, a, b: a ** 2,
    "pow by a tensor": lambda m, a, b: a ** a,
    "exp": lambda m, a, b: a.exp(),
    "relu": lambda m, a, b: m.nn.functional.relu(a),
    "softmax": lambda m, a, b: m.softmax(a, 1),
    "log_softmax": lambda m, a, b: m.nn.functional.log_softmax(a, 1),
    "cross_entropy": lambda m, a, b: m.nn.functional.cross_entropy(a, m.tensor([0, 1, 2, 0])),
    "mse_loss": lambda m, a, b: m.nn.functional.mse_loss(a, a.detach() * 0),
    "reshape": lambda m, a, b: a.reshape(12),
    "transpose": lambda m, a, b: a.t(),
    "slice": lambda m, a, b: a[1:],
    "select": lambda m, a, b: a[1],
    "cat": lambda m, a, b: m.cat([a, a]),
    "max": lambda m, a, b: a.max(),
    "amax": lambda m, a, b: a.amax(1),
    "clamp": lambda m, a, b: a.clamp(min=0.0),
    "tanh": lambda m, a, b: a.tanh(),
    "log1p": lambda m, a, b: a.abs().log1p(),
    "conv2d": lambda m, a, b: m.nn.functional.conv2d(a.reshape(1, 1, 4, 3), b[:2, :2].reshape(1, 1, 2, 2)),
}


def _inputs(m):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)
    return (m.tensor(a, requires_grad=True), m.tensor(b, requires_grad=True))


@pytest.mark.parametrize("label", CALLS)
def test_a_grad_fn_is_of_torchs_class_with_torchs_name(label):
    ours = CALLS[label](plugtorch, *_inputs(plugtorch)).grad_fn
    theirs = CALLS[label](torch, *_inputs(torch)).grad_fn
    assert type(ours).__name__ == type(theirs).__name__, label
    assert ours.name() == theirs.name() == repr(ours)[1:-1], label
    assert isinstance(ours, Node)


def test_one_class_per_name_and_every_one_runs_on_the_engines_fast_path():
    a, b = _inputs(plugtorch)
    first, second = (a @ b).grad_fn, ((a * 2) @ b).grad_fn
    assert type(first) is type(second) and type(first) is not Node
    assert type(first).__slots__ == ()  # no fields of its own: the C loop reads it as a Node
    loss = ((a @ b) ** 2).sum()
    loss.backward()
    expected = 2 * (a.detach() @ b.detach()) @ b.detach().t()
    np.testing.assert_allclose(a.grad.numpy(), expected.numpy(), rtol=1e-5)


def test_a_leafs_node_and_a_functions_node_are_named_as_torchs():
    class Twice(plugtorch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    a, _ = _inputs(plugtorch)
    y = Twice.apply(a)
    assert type(y.grad_fn).__name__ == "TwiceBackward" == y.grad_fn.name()
    leaf = (a * 2).grad_fn.next_functions[0][0]
    assert type(leaf).__name__ == "AccumulateGrad" and leaf.name() == "torch::autograd::AccumulateGrad"


@pytest.mark.skipif(native.ext is None, reason="the core's C paths are not built here (native.status())")
def test_the_c_node_constructor_refuses_a_class_that_adds_fields():
    class Wider(Node):
        __slots__ = ("extra",)
    with pytest.raises(TypeError, match="not Node or a Node subclass that adds no fields"):
        native.ext.node(Wider, "op", None, (), (), None, None, {})
    with pytest.raises(TypeError, match="not Node or a Node subclass"):
        native.ext.node(int, "op", None, (), (), None, None, {})
