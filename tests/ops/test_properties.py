"""Property tests over random shapes: broadcasting of elementwise ops, dims/keepdim of reductions.

The conformance suite checks hand-picked samples; these let hypothesis pick the shapes.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays, mutually_broadcastable_shapes

import plugtorch

FAST = settings(max_examples=25, deadline=None)
# the ``torch`` fixture is just the module: sharing it across examples is safe
FAST_TORCH = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "pow": np.power,
}
_floats = st.floats(-3, 3, allow_nan=False, width=64)


def _values(shape, positive=False):
    elements = st.floats(0.25, 3, width=64) if positive else _floats
    return arrays(np.float64, shape, elements=elements)


@pytest.mark.parametrize("name", sorted(_BINARY))
@FAST
@given(data=st.data(), shapes=mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
def test_binary_ops_broadcast_like_numpy_and_sum_gradients_back(name, data, shapes):
    sa, sb = shapes.input_shapes
    a = data.draw(_values(sa, positive=name in ("pow", "div")), label="a")
    b = data.draw(_values(sb, positive=name in ("pow", "div")), label="b")
    ta = plugtorch.tensor(a, requires_grad=True)
    tb = plugtorch.tensor(b, requires_grad=True)
    out = getattr(plugtorch, name)(ta, tb)
    assert tuple(out.shape) == shapes.result_shape
    np.testing.assert_allclose(out.detach().numpy(), _BINARY[name](a, b), rtol=1e-12, atol=1e-12)
    out.sum().backward()
    # every gradient has its input's shape: the broadcast dims were summed back
    assert tuple(ta.grad.shape) == sa and tuple(tb.grad.shape) == sb
    if name == "add":
        n_out = int(np.prod(shapes.result_shape))
        assert ta.grad.sum().item() == pytest.approx(n_out)


@pytest.mark.parametrize("name", ["add", "mul", "maximum"])
@FAST_TORCH
@given(data=st.data(), shapes=mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
def test_binary_gradients_match_torch(name, data, shapes, torch):
    a = data.draw(_values(shapes.input_shapes[0]))
    b = data.draw(_values(shapes.input_shapes[1]))
    ta, tb = plugtorch.tensor(a, requires_grad=True), plugtorch.tensor(b, requires_grad=True)
    ra, rb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (getattr(plugtorch, name)(ta, tb) * 1.5).sum().backward()
    (getattr(torch, name)(ra, rb) * 1.5).sum().backward()
    # a broadcast input's gradient sums its terms, and the libraries sum in different orders: with
    # terms that cancel (0.75 - 0.75 + four of 1e-58) one gets 4e-58 and the other 2e-58, so the
    # comparison needs an absolute bound as well (the terms are at most 1.5 * 3 in size)
    np.testing.assert_allclose(ta.grad.numpy(), ra.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tb.grad.numpy(), rb.grad.numpy(), rtol=1e-12, atol=1e-12)


_REDUCTIONS = {
    "sum": lambda a, d, k: np.sum(a, axis=d, keepdims=k),
    "mean": lambda a, d, k: np.mean(a, axis=d, keepdims=k),
    "amax": lambda a, d, k: np.max(a, axis=d, keepdims=k),
    "prod": lambda a, d, k: np.prod(a, axis=d, keepdims=k),
    "var": lambda a, d, k: np.var(a, axis=d, keepdims=k, ddof=1),
    "std": lambda a, d, k: np.std(a, axis=d, keepdims=k, ddof=1),
    "norm": lambda a, d, k: np.sqrt(np.sum(a * a, axis=d, keepdims=k)),
    "logsumexp": lambda a, d, k: np.log(np.sum(np.exp(a), axis=d, keepdims=k)),
}


@st.composite
def _array_and_dims(draw):
    shape = draw(array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=3))
    a = draw(_values(shape))
    dims = draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1, max_size=len(shape),
                         unique_by=lambda d: d % len(shape)))
    return a, tuple(dims)


@pytest.mark.parametrize("name", sorted(_REDUCTIONS))
@pytest.mark.filterwarnings("ignore:Degrees of freedom:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0:UserWarning")
@FAST
@given(case=_array_and_dims(), keepdim=st.booleans())
def test_reductions_over_dim_tuples_match_numpy(name, case, keepdim):
    a, dims = case
    x = plugtorch.tensor(a, requires_grad=True)
    fn = getattr(plugtorch, name)
    out = fn(x, dims, keepdim=keepdim) if name not in ("norm",) else fn(x, 2, dims, keepdim)
    axes = tuple(d % a.ndim for d in dims)
    with np.errstate(all="ignore"):
        expected = _REDUCTIONS[name](a, axes, keepdim)
    assert tuple(out.shape) == np.shape(expected)
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-10, atol=1e-12, equal_nan=True)
    with np.errstate(all="ignore"):  # var over one element divides by zero, as in torch
        out.sum().backward()
    assert tuple(x.grad.shape) == a.shape


@FAST_TORCH
@given(case=_array_and_dims())
def test_reduction_gradients_match_torch(case, torch):
    a, dims = case
    x, r = plugtorch.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (plugtorch.var(x, dims, correction=0) + plugtorch.logsumexp(x, dims) + x.prod()).sum().backward()
    (torch.var(r, dims, correction=0) + torch.logsumexp(r, dims) + r.prod()).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), r.grad.numpy(), rtol=1e-9, atol=1e-12)


@FAST
@given(a=_values(array_shapes(min_dims=0, max_dims=3, max_side=3)),
       name=st.sampled_from(["exp", "tanh", "sin", "abs", "neg", "erf", "sigmoid"]))
def test_unary_ops_keep_shape_and_dtype(a, name):
    for dtype in (plugtorch.float32, plugtorch.float64):
        out = getattr(plugtorch, name)(plugtorch.tensor(a, dtype=dtype))
        assert tuple(out.shape) == a.shape and out.dtype is dtype
