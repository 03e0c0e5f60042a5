"""The foundation op set against PyTorch: values and gradients, with broadcasting (hypothesis)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import plugtorch
from plugtorch.autograd import gradcheck

torch = pytest.importorskip("torch", reason="PyTorch (the oracle) is not installed; "
                                            "`pip install torch==2.13.0` to run these comparisons")

# name -> (fn taking tensors of either library, number of inputs, input domain)
UNARY = {
    "neg": (lambda x: -x, "any"), "exp": (lambda x: x.exp(), "any"),
    "log": (lambda x: x.log(), "pos"), "sqrt": (lambda x: x.sqrt(), "pos"),
    "abs": (lambda x: x.abs(), "nonzero"), "tanh": (lambda x: x.tanh(), "any"),
    "sigmoid": (lambda x: x.sigmoid(), "any"), "relu": (lambda x: x.relu(), "nonzero"),
    "clamp": (lambda x: x.clamp(-0.5, 0.5), "nonzero"),
    "softmax": (lambda x: x.softmax(-1), "any"), "log_softmax": (lambda x: x.log_softmax(-1), "any"),
    "sum": (lambda x: x.sum(), "any"), "sum_dim": (lambda x: x.sum(-1, keepdim=True), "any"),
    "mean": (lambda x: x.mean(0), "any"), "max": (lambda x: x.max(), "distinct"),
    "max_dim": (lambda x: x.max(dim=-1)[0], "distinct"), "min_dim": (lambda x: x.min(0).values, "distinct"),
    "reshape": (lambda x: x.reshape(-1), "any"), "transpose": (lambda x: x.transpose(0, -1), "any"),
    "permute": (lambda x: x.permute(*reversed(range(x.ndim))), "any"),
    "unsqueeze_squeeze": (lambda x: x.unsqueeze(1).squeeze(1), "any"),
    "flatten": (lambda x: x.flatten(), "any"), "expand": (lambda x: x.unsqueeze(0).expand(3, *x.shape), "any"),
    "getitem": (lambda x: x[..., None, 1:, ::2][0], "any"),
    "pow_scalar": (lambda x: x ** 3, "any"), "rpow": (lambda x: 2 ** x, "any"),
    "rsub_rdiv": (lambda x: (1 - x) / (2 + x * x), "any"),
    "cat": (lambda x: (plugtorch if isinstance(x, plugtorch.Tensor) else torch).cat([x, x * 2], 0), "any"),
    "stack": (lambda x: (plugtorch if isinstance(x, plugtorch.Tensor) else torch).stack([x, x], -1), "any"),
}
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "pow": lambda a, b: a.abs() ** b,
    "maximum": lambda a, b: (plugtorch if isinstance(a, plugtorch.Tensor) else torch).maximum(a, b),
    "minimum": lambda a, b: (plugtorch if isinstance(a, plugtorch.Tensor) else torch).minimum(a, b),
    "where": lambda a, b: (plugtorch if isinstance(a, plugtorch.Tensor) else torch).where(a > b, a, b),
}


def sample(shape, domain, rng):
    x = rng.standard_normal(shape)
    if domain == "pos":
        x = np.abs(x) + 0.5
    elif domain == "nonzero":
        x = np.where(np.abs(x) < 0.1, 0.3, x)  # keep away from kinks
    elif domain == "distinct":
        x = x + np.arange(x.size).reshape(shape) * 1e-3
    return x


def both(x, requires_grad=True):
    return (plugtorch.tensor(x, dtype=plugtorch.float64, requires_grad=requires_grad),
            torch.tensor(x, dtype=torch.float64, requires_grad=requires_grad))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_and_shape_ops_match_torch_values_and_gradients(name):
    fn, domain = UNARY[name]
    rng = np.random.default_rng(0)
    x = sample((3, 4), domain, rng)
    px, tx = both(x)
    py, ty = fn(px), fn(tx)
    np.testing.assert_allclose(py.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = rng.standard_normal(ty.shape)
    py.backward(plugtorch.tensor(g, dtype=plugtorch.float64))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert gradcheck(fn, (plugtorch.tensor(x, dtype=plugtorch.float64, requires_grad=True),))


shapes = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)


@st.composite
def broadcast_pair(draw):
    a = draw(shapes)
    b = list(a[len(a) - draw(st.integers(0, len(a))):])
    b = tuple(1 if draw(st.booleans()) else s for s in b)
    return (a, b) if draw(st.booleans()) else (b, a)


@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=15, deadline=None)
@given(pair=broadcast_pair(), seed=st.integers(0, 2**16))
def test_binary_ops_broadcast_like_torch_with_gradients(name, pair, seed):
    fn = BINARY[name]
    rng = np.random.default_rng(seed)
    a = sample(pair[0], "nonzero", rng)
    b = sample(pair[1], "nonzero", rng) + (0.01 if name in ("maximum", "minimum", "where") else 0)
    pa, ta = both(a)
    pb, tb = both(b)
    py, ty = fn(pa, pb), fn(ta, tb)
    assert tuple(py.shape) == tuple(ty.shape)
    np.testing.assert_allclose(py.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    py.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(pa.grad.numpy(), ta.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(pb.grad.numpy(), tb.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                                   ((5, 2, 3), (3, 4)), ((2, 1, 2, 3), (4, 3, 2)), ((3,), (2, 3, 4))])
def test_matmul_rank_rules_and_gradients_match_torch(sa, sb):
    rng = np.random.default_rng(1)
    pa, ta = both(rng.standard_normal(sa))
    pb, tb = both(rng.standard_normal(sb))
    py, ty = pa @ pb, ta @ tb
    assert tuple(py.shape) == tuple(ty.shape)
    np.testing.assert_allclose(py.detach().numpy(), ty.detach().numpy(), rtol=1e-10)
    py.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(pa.grad.numpy(), ta.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(pb.grad.numpy(), tb.grad.numpy(), rtol=1e-10)


def test_matmul_shape_error_is_torchs():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        plugtorch.ones(2, 3) @ plugtorch.ones(4, 5)


def test_comparisons_and_argmax_match_torch():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 5))
    px, tx = both(x, requires_grad=False)
    for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
        assert (getattr(px, op)(0.1).numpy() == getattr(tx, op)(0.1).numpy()).all()
    assert px.argmax().item() == tx.argmax().item()
    assert px.argmax(1, keepdim=True).tolist() == tx.argmax(1, keepdim=True).tolist()
    assert px.max(1).indices.tolist() == tx.max(1).indices.tolist()


def test_ties_in_max_split_the_gradient_like_torch():
    px, tx = both(np.array([1.0, 3.0, 3.0]))
    px.max().backward()
    tx.max().backward()
    assert px.grad.tolist() == tx.grad.tolist()
    px, tx = both(np.array([[1.0, 3.0, 3.0]]))
    px.max(dim=1).values.sum().backward()
    tx.max(dim=1).values.sum().backward()
    assert px.grad.tolist() == tx.grad.tolist()


def test_float32_results_stay_float32():
    x = plugtorch.randn(3, 3)
    for y in (x.exp(), x * 2.5, x @ x, x.softmax(1), x.sum(), x.mean(), x.sigmoid()):
        assert y.dtype is plugtorch.float32
