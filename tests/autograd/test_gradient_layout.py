"""A matmul operand laid out column by column (a Linear weight's ``weight.t()``) gets its
gradient computed in that layout, as torch's mm backward does, so what reaches the leaf is
contiguous and ``.grad`` needs no transposing copy. The values are the same either way."""
from __future__ import annotations

import numpy as np

import plugtorch
from plugtorch import nn
from plugtorch.autograd import gradcheck, gradgradcheck


def test_linear_weight_grad_is_contiguous_and_right():
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((6, 5)).astype(np.float32)
    g0 = rng.standard_normal((6, 3)).astype(np.float32)
    layer = nn.Linear(5, 3)
    x = plugtorch.tensor(x0, requires_grad=True)
    layer(x).backward(plugtorch.tensor(g0))
    w = layer.weight.detach().numpy()
    assert layer.weight.grad.is_contiguous() and x.grad.is_contiguous()
    np.testing.assert_allclose(layer.weight.grad.numpy(), g0.T @ x0, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), g0 @ w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer.bias.grad.numpy(), g0.sum(0), rtol=1e-5, atol=1e-6)


def test_both_operands_transposed():
    rng = np.random.default_rng(1)
    a0, b0 = rng.standard_normal((4, 3)), rng.standard_normal((5, 4))
    a = plugtorch.tensor(a0, requires_grad=True)
    b = plugtorch.tensor(b0, requires_grad=True)
    (a.t() @ b.t()).sum().backward()          # (3, 4) @ (4, 5), both column-major views
    ones = np.ones((3, 5))
    np.testing.assert_allclose(a.grad.numpy(), (ones @ b0).T)
    np.testing.assert_allclose(b.grad.numpy(), (a0 @ ones).T)
    assert a.grad.is_contiguous() and b.grad.is_contiguous()


def test_gradcheck_and_gradgradcheck_through_transposed_operands():
    rng = np.random.default_rng(2)
    a = plugtorch.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    b = plugtorch.tensor(rng.standard_normal((5, 4)), requires_grad=True)
    assert gradcheck(lambda a, b: a.t() @ b.t(), (a, b))
    assert gradgradcheck(lambda a, b: a.t() @ b.t(), (a, b))
    assert gradcheck(lambda a, b: a.t() @ b.t().contiguous(), (a, b))
