"""einsum on random equations (repeated letters, implicit output, several operands) against NumPy and torch."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import plugtorch

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
LETTERS = "abcde"


@st.composite
def equations(draw):
    sizes = {c: draw(st.integers(1, 3)) for c in LETTERS}
    n_ops = draw(st.integers(1, 3))
    terms = [draw(st.lists(st.sampled_from(LETTERS), min_size=0, max_size=3)) for _ in range(n_ops)]
    used = sorted({c for t in terms for c in t})
    if draw(st.booleans()):
        out = "".join(draw(st.permutations(used))[:draw(st.integers(0, len(used)))])
        eq = ",".join("".join(t) for t in terms) + "->" + out
    else:
        eq = ",".join("".join(t) for t in terms)  # implicit output: the letters used once, sorted
    shapes = [tuple(sizes[c] for c in t) for t in terms]
    return eq, shapes, draw(st.integers(0, 2 ** 16))


@SETTINGS
@given(case=equations())
def test_einsum_matches_numpy_and_torch_gradients(case, torch):
    eq, shapes, seed = case
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-1, 1, s) for s in shapes]
    xs = [plugtorch.tensor(a, requires_grad=True) for a in arrays]
    out = plugtorch.einsum(eq, *xs)
    expected = np.einsum(eq, *arrays)
    assert tuple(out.shape) == np.shape(expected)
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-10, atol=1e-12)
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    cot = rng.uniform(-1, 1, np.shape(expected))
    got = plugtorch.autograd.grad(out, xs, plugtorch.tensor(cot), allow_unused=True, materialize_grads=True)
    want = torch.autograd.grad(torch.einsum(eq, *ts), ts, torch.tensor(cot), allow_unused=True,
                               materialize_grads=True)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-10, atol=1e-12)
