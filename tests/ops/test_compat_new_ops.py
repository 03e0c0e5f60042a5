"""torch-compatible ops where the conformance samples cannot reach: public helpers (histc,
linalg.norm), documented gaps, warnings, and gradients at ties, each against torch."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plugtorch


def _same(ours, theirs, atol=1e-6):
    assert list(ours.shape) == list(theirs.shape)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    assert np.allclose(np.asarray(ours.tolist(), float), np.asarray(theirs.tolist(), float), atol=atol,
                       equal_nan=True)


@pytest.mark.parametrize("kwargs", [{"bins": 4, "min": 0, "max": 3}, {"bins": 4}, {"bins": 7, "min": -1, "max": 1},
                                    {"bins": 3, "min": 2, "max": 2}])
def test_histc(torch, kwargs):
    values = np.concatenate([np.random.default_rng(0).standard_normal(200), [0.0, 1.0, 3.0, -1.0, 0.5]])
    _same(plugtorch.histc(plugtorch.tensor(values, dtype=plugtorch.float32), **kwargs),
          torch.histc(torch.tensor(values, dtype=torch.float32), **kwargs))


def test_histc_takes_floats_and_is_not_differentiable(torch):
    with pytest.raises(NotImplementedError):
        plugtorch.histc(plugtorch.tensor([1, 2]))
    x = plugtorch.tensor([0.1, 0.2], requires_grad=True)
    assert not plugtorch.histc(x, bins=2, min=0, max=1).requires_grad


@pytest.mark.parametrize("args", [{}, {"ord": 3, "dim": 1}, {"ord": float("inf"), "dim": 1}, {"dim": (0, 1)},
                                  {"ord": "fro"}, {"ord": 1}, {"ord": -float("inf")}, {"ord": 0, "dim": 0},
                                  {"dim": 1, "keepdim": True}])
def test_linalg_norm(torch, args):
    x = np.random.default_rng(1).standard_normal((3, 4))
    _same(plugtorch.linalg.norm(plugtorch.tensor(x), **args), torch.linalg.norm(torch.tensor(x), **args))


def test_matrix_norms_from_singular_values(torch):
    x = np.random.default_rng(2).standard_normal((2, 3, 4))
    for ord in (2, -2, "nuc"):
        _same(plugtorch.linalg.matrix_norm(plugtorch.tensor(x), ord=ord),
              torch.linalg.matrix_norm(torch.tensor(x), ord=ord))


def test_cross_without_dim_takes_the_first_dim_of_size_3_and_warns(torch):
    a, b = np.eye(3), np.ones((3, 3))
    with pytest.warns(UserWarning, match="dim"):
        ours = plugtorch.cross(plugtorch.tensor(a), plugtorch.tensor(b))
    with warnings.catch_warnings():  # torch warns once per process: an earlier test may have had it
        warnings.simplefilter("ignore")
        theirs = torch.cross(torch.tensor(a), torch.tensor(b))
    _same(ours, theirs)


def test_scatter_reduce_amax_shares_the_gradient_among_ties(torch):
    def run(m):
        x = m.tensor([9.0, 2.0, 9.0, 4.0], requires_grad=True)
        src = m.tensor([5.0, 9.0, 7.0, 9.0, 9.0], requires_grad=True)
        out = x.scatter_reduce(0, m.tensor([0, 0, 2, 2, 2]), src, "amax")
        (out * m.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
        return out, x.grad, src.grad
    for o, t in zip(run(plugtorch), run(torch)):
        _same(o, t)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_gradients_against_torch(torch, reduce, include_self):
    rng = np.random.default_rng(2)
    x, src = rng.uniform(0.5, 1.5, (3, 4)), rng.uniform(0.5, 1.5, (3, 5))
    index = np.array([[0, 0, 3, 3, 3], [1, 2, 1, 0, 0], [2, 2, 2, 2, 2]])
    cot = rng.standard_normal((3, 4))

    def run(m):
        a = m.tensor(x, requires_grad=True)
        s = m.tensor(src, requires_grad=True)
        out = a.scatter_reduce(1, m.tensor(index), s, reduce, include_self=include_self)
        (out * m.tensor(cot)).sum().backward()
        return out, a.grad, s.grad
    for o, t in zip(run(plugtorch), run(torch)):
        _same(o, t, atol=1e-9)


def test_cummax_gradient_goes_to_the_selected_entries(torch):
    values = [1.0, 3.0, 3.0, 2.0, 5.0, 0.0]

    def run(m):
        x = m.tensor(values, requires_grad=True)
        v, i = m.cummax(x, 0)
        (v * m.arange(6.0)).sum().backward()
        return v, i, x.grad
    for o, t in zip(run(plugtorch), run(torch)):
        _same(o, t)


def test_cumprod_gradient_with_zeros_against_torch(torch):
    values = [[2.0, 0.0, 3.0, 0.0, 4.0], [1.5, 2.0, 0.0, 1.0, 1.0]]

    def run(m):
        x = m.tensor(values, dtype=m.float64, requires_grad=True)
        y = m.cumprod(x, 1)
        (g,) = m.autograd.grad((y * m.arange(10.0, dtype=m.float64).reshape(2, 5)).sum(), (x,), create_graph=True)
        (gg,) = m.autograd.grad(g.sum(), (x,))
        return y, g, gg
    for o, t in zip(run(plugtorch), run(torch)):
        _same(o, t, atol=1e-9)


def test_div_rounding_modes_against_torch(torch):
    a, b = [-7, 7, -6, 5, 0], [2, -2, 4, 5, 3]
    for mode in ("trunc", "floor"):
        _same(plugtorch.div(plugtorch.tensor(a), plugtorch.tensor(b), rounding_mode=mode),
              torch.div(torch.tensor(a), torch.tensor(b), rounding_mode=mode))
        _same(plugtorch.tensor(a).div(2.5, rounding_mode=mode), torch.tensor(a).div(2.5, rounding_mode=mode))
    x = plugtorch.tensor([1.5, -2.5], requires_grad=True)
    plugtorch.div(x, 2, rounding_mode="trunc").sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_trig_and_bitwise_names_torch_has(torch):
    for name in ("tan", "asin", "acos", "atan", "asinh", "acosh", "atanh", "arcsin", "arccos", "arctan",
                 "arcsinh", "arccosh", "arctanh", "atan2", "arctan2", "fmod", "remainder", "copysign",
                 "logaddexp", "logaddexp2", "hypot", "lerp", "isclose", "allclose", "cumprod", "cummax", "cummin",
                 "logcumsumexp", "scatter_reduce", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
                 "bitwise_left_shift", "bitwise_right_shift", "std_mean", "var_mean", "aminmax", "bincount",
                 "histc", "diff", "flip", "roll", "rot90", "tril", "triu", "trace", "outer", "cross", "unique",
                 "hstack", "vstack", "logical_xor", "addcmul", "addcdiv"):
        assert hasattr(plugtorch, name) and hasattr(torch, name), name
    for name in ("unfold", "addcmul_", "addcdiv_", "normal_", "uniform_", "is_contiguous", "stride", "unique",
                 "bitwise_and_", "fmod_", "atan2_", "cumprod_", "scatter_reduce_", "type", "short", "char", "byte"):
        assert hasattr(plugtorch.Tensor, name) and hasattr(torch.Tensor, name), name
