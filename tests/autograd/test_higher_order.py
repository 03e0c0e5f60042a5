"""create_graph=True: second and third derivatives, Hessian-vector products, gradgradcheck."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch.autograd import grad, gradcheck, gradgradcheck


def _f(x):
    # a non-quadratic scalar function mixing several ops' second derivatives
    return (x.sin() * x.exp()).sum() + (x * x).logsumexp(0) + (x.tanh() ** 3).sum()


def _f_np(x):
    return np.sum(np.sin(x) * np.exp(x)) + np.log(np.sum(np.exp(x * x))) + np.sum(np.tanh(x) ** 3)


def _num_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        d = np.zeros_like(x)
        d.flat[i] = eps
        g.flat[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


def test_hessian_vector_product_matches_finite_differences():
    rng = np.random.default_rng(0)
    x0, v0 = rng.uniform(-1, 1, 4), rng.uniform(-1, 1, 4)
    x = plugtorch.tensor(x0, requires_grad=True)
    (g,) = grad(_f(x), x, create_graph=True)
    (hv,) = grad(g, x, grad_outputs=plugtorch.tensor(v0))
    # H v = d/dt grad f(x + t v) at t = 0
    eps = 1e-5
    fd = (_num_grad(_f_np, x0 + eps * v0) - _num_grad(_f_np, x0 - eps * v0)) / (2 * eps)
    np.testing.assert_allclose(hv.numpy(), fd, rtol=1e-4, atol=1e-6)


def test_third_derivative_of_a_scalar_function():
    x = plugtorch.tensor(0.7, dtype=plugtorch.float64, requires_grad=True)
    y = x.sin() * x ** 3
    (d1,) = grad(y, x, create_graph=True)
    (d2,) = grad(d1, x, create_graph=True)
    (d3,) = grad(d2, x)
    a = 0.7
    s, c = np.sin(a), np.cos(a)
    # d3/dx3 [x^3 sin x] = 6 sin x + 18 x cos x - 9 x^2 sin x - x^3 cos x
    assert d3.item() == pytest.approx(6 * s + 18 * a * c - 9 * a * a * s - a ** 3 * c, rel=1e-10)
    assert d2.requires_grad and not d3.requires_grad


def test_higher_order_matches_torch(torch):
    x0 = np.array([0.3, -0.8, 1.1])
    x = plugtorch.tensor(x0, requires_grad=True)
    tx = torch.tensor(x0, requires_grad=True)
    for lib, t in ((plugtorch, x), (torch, tx)):
        f = (lib.nn.functional.softplus(t) * t).sum() if lib is torch else \
            (plugtorch.core.ops.activation.softplus(t) * t).sum()
        (g,) = lib.autograd.grad(f, t, create_graph=True)
        (h,) = lib.autograd.grad(g.sum(), t, create_graph=True)
        (k,) = lib.autograd.grad((h * h).sum(), t)
        if lib is torch:
            expected = k.numpy()
        else:
            got = k.numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-10)


@pytest.mark.parametrize("fn", [
    lambda x: (x @ x.t()).softmax(1),
    lambda x: x.var(1) * x.norm(),
    lambda x: plugtorch.core.ops.activation.gelu(x).prod(1),
    lambda x: x.cumsum(1).logsumexp(0),
    lambda x: plugtorch.einsum("ij,kj->ik", x, x.tanh()),
], ids=["matmul-softmax", "var-norm", "gelu-prod", "cumsum-logsumexp", "einsum"])
def test_gradgradcheck_of_composed_ops(fn):
    x = plugtorch.tensor(np.random.default_rng(1).uniform(0.2, 1.0, (2, 3)), requires_grad=True)
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


def test_grad_without_create_graph_returns_constants():
    x = plugtorch.tensor([1.0, 2.0], requires_grad=True)
    (g,) = grad((x ** 3).sum(), x)
    assert not g.requires_grad and g.grad_fn is None
    np.testing.assert_allclose(g.numpy(), [3.0, 12.0])


def test_grad_signature_and_unused_inputs():
    x = plugtorch.tensor([1.0], requires_grad=True)
    unused = plugtorch.tensor([2.0], requires_grad=True)
    y = (x * 3).sum()
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        grad(y, [x, unused], retain_graph=True)
    gx, gu = grad(y, [x, unused], grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=True)
    assert gx.tolist() == [3.0] and gu is None


def test_prod_double_backward_at_zeros_matches_torch(torch):
    # rows with no, one, two and three zeros: the second derivative of a product at a zero is
    # the product of the remaining entries, which a "divide by x" rule gets wrong
    a = np.array([[0.5, 0.0, 2.0, 1.5], [0.0, 0.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 2.0]])
    w = np.arange(16.0).reshape(4, 4)
    x, t = plugtorch.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (g,) = grad(x.prod(1).sum(), x, create_graph=True)
    (h,) = grad((g * plugtorch.tensor(w)).sum(), x)
    (tg,) = torch.autograd.grad(t.prod(1).sum(), t, create_graph=True)
    (th,) = torch.autograd.grad((tg * torch.tensor(w)).sum(), t)
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(h.numpy(), th.numpy(), atol=1e-12)
