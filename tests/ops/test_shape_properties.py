"""Property tests for movement ops: round trips and agreement with NumPy on random shapes."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

import plugtorch

FAST = settings(max_examples=25, deadline=None)


@st.composite
def _array_and_dim(draw, min_dims=1):
    shape = draw(array_shapes(min_dims=min_dims, max_dims=4, min_side=0, max_side=4))
    a = draw(arrays(np.float64, shape, elements=st.floats(-5, 5, width=64)))
    return a, draw(st.integers(-len(shape), len(shape) - 1))


@FAST
@given(case=_array_and_dim(), size=st.integers(1, 4))
def test_split_then_cat_is_the_identity_and_gradients_flow_to_every_piece(case, size):
    a, dim = case
    x = plugtorch.tensor(a, requires_grad=True)
    parts = plugtorch.split(x, size, dim)
    np.testing.assert_array_equal(plugtorch.cat(parts, dim).detach().numpy(), a)
    sum(((p * (i + 1)).sum() for i, p in enumerate(parts)), plugtorch.zeros(())).backward()
    if a.size:
        bounds = np.arange(a.shape[dim]) // size + 1
        shape = [1] * a.ndim
        shape[dim] = -1
        np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(bounds.reshape(shape), a.shape))


@FAST
@given(case=_array_and_dim(), shift=st.integers(-6, 6))
def test_roll_matches_numpy_and_undoes_itself(case, shift):
    a, dim = case
    x = plugtorch.tensor(a)
    np.testing.assert_array_equal(plugtorch.roll(x, shift, dim).numpy(), np.roll(a, shift, dim))
    np.testing.assert_array_equal(plugtorch.roll(plugtorch.roll(x, shift, dim), -shift, dim).numpy(), a)


@FAST
@given(case=_array_and_dim(), data=st.data())
def test_flip_permute_movedim_tile_match_numpy(case, data):
    a, dim = case
    x = plugtorch.tensor(a)
    np.testing.assert_array_equal(plugtorch.flip(x, (dim,)).numpy(), np.flip(a, dim))
    perm = data.draw(st.permutations(range(a.ndim)))
    np.testing.assert_array_equal(x.permute(*perm).numpy(), np.transpose(a, perm))
    dest = data.draw(st.integers(-a.ndim, a.ndim - 1))
    np.testing.assert_array_equal(plugtorch.movedim(x, dim, dest).numpy(), np.moveaxis(a, dim, dest))
    reps = tuple(data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=a.ndim + 1)))
    np.testing.assert_array_equal(plugtorch.tile(x, reps).numpy(), np.tile(a, reps))


@FAST
@given(case=_array_and_dim(min_dims=2), k=st.integers(-3, 3))
def test_tril_plus_strict_triu_is_the_whole_matrix(case, k):
    a, _ = case
    x = plugtorch.tensor(a)
    np.testing.assert_array_equal((plugtorch.tril(x, k) + plugtorch.triu(x, k + 1)).numpy(), a)
    np.testing.assert_array_equal(plugtorch.tril(x, k).numpy(), np.tril(a, k))
