"""plugtorch.func.jvp, jacfwd and hessian against torch.func."""
import numpy as np
import pytest
import torch
import torch.func as tfunc

import plugtorch as pt
import plugtorch.nn.functional as F
from plugtorch.func import hessian, jacfwd, jvp

RNG = np.random.default_rng(1)


def randn(*shape):
    return RNG.standard_normal(shape)


def close(got, want, tol=1e-10):
    """Equal nested structures of tensors (plugtorch's, torch's)."""
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            close(g, w, tol)
    elif isinstance(want, dict):
        assert got.keys() == want.keys()
        for k in want:
            close(got[k], want[k], tol)
    else:
        assert tuple(got.shape) == tuple(want.shape)
        assert not got.requires_grad
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=tol, atol=tol)


def mlp(fn, m):
    def f(x, w1, b1, w2):
        return fn.linear(m.tanh(fn.linear(x, w1, b1)), w2).pow(2).sum(-1)
    return f


def test_jvp_of_an_mlp_with_aux_against_torch():
    args = (randn(3, 4), randn(5, 4), randn(5), randn(2, 5))
    tangents = tuple(randn(*a.shape) for a in args)

    def with_aux(fn, m):
        return lambda *a: (mlp(fn, m)(*a), {"x": a[0] * 2})
    got = jvp(with_aux(F, pt), tuple(map(pt.tensor, args)), tuple(map(pt.tensor, tangents)), has_aux=True)
    want = tfunc.jvp(with_aux(torch.nn.functional, torch), tuple(map(torch.tensor, args)),
                     tuple(map(torch.tensor, tangents)), has_aux=True)
    close(got, want)


def test_jvp_of_nested_inputs_and_outputs_and_a_constant_output():
    a, b, ta, tb = randn(3), randn(3), randn(3), randn(3)

    def f(m):
        return lambda d: ((d["a"] * d["b"]).sin(), [d["a"].exp(), m.zeros(2, dtype=m.float64)])
    got = jvp(f(pt), ({"a": pt.tensor(a), "b": pt.tensor(b)},), ({"a": pt.tensor(ta), "b": pt.tensor(tb)},))
    want = tfunc.jvp(f(torch), ({"a": torch.tensor(a), "b": torch.tensor(b)},),
                     ({"a": torch.tensor(ta), "b": torch.tensor(tb)},))
    close(got, want)


@pytest.mark.parametrize("case", ["primals not a tuple", "structures differ", "non-tensor output", "aux not a pair"])
def test_jvp_errors_are_torchs(case):
    def run(m, func):
        x = m.ones(3)
        if case == "primals not a tuple":
            return func.jvp(m.sin, x, x)
        if case == "structures differ":
            return func.jvp(m.sin, (x,), (x, x))
        if case == "non-tensor output":
            return func.jvp(lambda x: 3, (x,), (x,))
        return func.jvp(lambda x: x.sin(), (x,), (x,), has_aux=True)

    class _Ours:
        jvp = staticmethod(jvp)
    with pytest.raises(RuntimeError) as want:
        run(torch, tfunc)
    with pytest.raises(RuntimeError) as got:
        run(pt, _Ours)
    first = str(want.value).split(". ")[0].split(" Got ")[0]
    assert str(got.value).startswith(first)


def test_jacfwd_of_an_mlp_over_several_argnums_against_torch():
    args = (randn(2, 3), randn(4, 3), randn(4), randn(2, 4))
    got = jacfwd(mlp(F, pt), argnums=(0, 1, 2))(*map(pt.tensor, args))
    want = tfunc.jacfwd(mlp(torch.nn.functional, torch), argnums=(0, 1, 2))(*map(torch.tensor, args))
    close(got, want)


def test_jacfwd_of_softmax_cross_entropy_with_aux_against_torch():
    z, target = randn(3, 4), RNG.integers(0, 4, 3)

    def f(fn, tt):
        return lambda z: (fn.cross_entropy(z, tt, reduction="none"), fn.softmax(z, 1))
    got = jacfwd(f(F, pt.tensor(target)), has_aux=True)(pt.tensor(z))
    want = tfunc.jacfwd(f(torch.nn.functional, torch.tensor(target)), has_aux=True)(torch.tensor(z))
    close(got, want)


def test_jacfwd_of_conv_and_layer_norm_against_torch():
    x, w = randn(1, 2, 4, 4), randn(3, 2, 3, 3)

    def f(fn):
        return lambda x, w: fn.layer_norm(fn.conv2d(x, w, padding=1), (4,)).mean((2, 3))
    got = jacfwd(f(F), argnums=1)(pt.tensor(x), pt.tensor(w))
    want = tfunc.jacfwd(f(torch.nn.functional), argnums=1)(torch.tensor(x), torch.tensor(w))
    close(got, want)


def test_jacfwd_argnum_out_of_range_is_torchs_error():
    with pytest.raises(RuntimeError, match="Got argnum=1, but only 1 positional inputs"):
        jacfwd(pt.sin, argnums=1)(pt.ones(2))


def test_hessian_against_torch_and_finite_differences():
    x, w = randn(3, 2), randn(2, 4)

    def f(m, fn):
        return lambda x, w: fn.log_softmax(m.tanh(x @ w), 1).sum() + (x * x.exp()).sum()
    got = hessian(f(pt, F), argnums=(0, 1))(pt.tensor(x), pt.tensor(w))
    want = tfunc.hessian(f(torch, torch.nn.functional), argnums=(0, 1))(torch.tensor(x), torch.tensor(w))
    close(got, want, 1e-9)
    # one entry by finite differences of the reverse-mode gradient
    g = lambda a: pt.autograd.grad(f(pt, F)(a, pt.tensor(w)), a)[0]
    eps, e = 1e-6, np.zeros((3, 2))
    e[1, 0] = 1
    up = g(pt.tensor(x + eps * e, requires_grad=True))
    down = g(pt.tensor(x - eps * e, requires_grad=True))
    fd = ((up - down) / (2 * eps)).numpy()
    np.testing.assert_allclose(got[0][0].numpy()[:, :, 1, 0], fd, rtol=1e-5, atol=1e-6)


def test_hessian_through_activations_and_layer_norm_against_torch():
    # forward over reverse: the backward ops (tanh_backward, threshold_backward, ...) run on dual tensors
    x, w = randn(2, 3), randn(3, 3)

    def f(m, fn):
        return lambda x: fn.layer_norm(fn.gelu(x @ m.tensor(w)) + m.tanh(x) * m.sigmoid(x) + fn.relu(x),
                                       (3,)).pow(3).sum()
    close(hessian(f(pt, F))(pt.tensor(x)), tfunc.hessian(f(torch, torch.nn.functional))(torch.tensor(x)), 1e-9)
