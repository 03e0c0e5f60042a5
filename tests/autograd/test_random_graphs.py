"""Random expression graphs (shared subexpressions, broadcasting, reductions) against torch.

Hypothesis builds a small program over a few inputs; plugtorch and torch run it, and the
values, first gradients and a Hessian-vector product must agree.
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import plugtorch

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

UNARY = {
    "tanh": lambda m, a: a.tanh(), "sin": lambda m, a: a.sin(), "sigmoid": lambda m, a: a.sigmoid(),
    "exp_small": lambda m, a: (a * 0.3).exp(), "softplus": lambda m, a: _F(m).softplus(a),
    "gelu": lambda m, a: _F(m).gelu(a), "square": lambda m, a: a * a,
    "softmax": lambda m, a: a.softmax(-1), "cumsum": lambda m, a: a.cumsum(-1),
    "flip": lambda m, a: a.flip(-1), "log1p_sq": lambda m, a: (a * a).log1p(),
}
BINARY = {
    "add": lambda m, a, b: a + b, "mul": lambda m, a, b: a * b, "sub": lambda m, a, b: a - b,
    "div": lambda m, a, b: a / (b * b + 1), "maximum": lambda m, a, b: m.maximum(a, b + 0.01),
}
REDUCE = {
    "sum": lambda m, a: a.sum(), "mean": lambda m, a: a.mean(), "logsumexp": lambda m, a: a.logsumexp(-1).sum(),
    "var": lambda m, a: a.var(-1).sum() if a.shape[-1] > 1 else a.sum(), "norm": lambda m, a: (a * a + 1).norm(),
    "prod": lambda m, a: (a.tanh() + 2).prod(),
}
SHAPES = [(3,), (2, 3), (1, 3), (2, 1)]


def _F(m):
    if m.__name__ == "torch":
        return m.nn.functional
    from plugtorch.core.ops import activation
    return activation


@st.composite
def programs(draw):
    n_inputs = draw(st.integers(1, 3))
    shapes = [draw(st.sampled_from(SHAPES)) for _ in range(n_inputs)]
    steps = []
    n_values = n_inputs
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            steps.append(("u", draw(st.sampled_from(sorted(UNARY))), draw(st.integers(0, n_values - 1))))
        else:
            steps.append(("b", draw(st.sampled_from(sorted(BINARY))), draw(st.integers(0, n_values - 1)),
                          draw(st.integers(0, n_values - 1))))
        n_values += 1
    final = draw(st.sampled_from(sorted(REDUCE)))
    seed = draw(st.integers(0, 2 ** 16))
    return shapes, steps, final, seed


def _run(m, inputs, steps, final):
    values = list(inputs)
    for step in steps:
        if step[0] == "u":
            values.append(UNARY[step[1]](m, values[step[2]]))
        else:
            values.append(BINARY[step[1]](m, values[step[2]], values[step[3]]))
    # every intermediate feeds the loss, so shared subexpressions and broadcasting all get gradients
    return sum((REDUCE[final](m, v) for v in values[len(inputs):]), 0.0)


@SETTINGS
@given(program=programs())
def test_random_programs_match_torch_in_value_gradient_and_hvp(program, torch):
    shapes, steps, final, seed = program
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-1, 1, s) for s in shapes]
    vs = [rng.uniform(-1, 1, s) for s in shapes]
    xs = [plugtorch.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    y, ty = _run(plugtorch, xs, steps, final), _run(torch, ts, steps, final)
    np.testing.assert_allclose(y.item(), ty.item(), rtol=1e-10, atol=1e-12)
    gs = plugtorch.autograd.grad(y, xs, create_graph=True, allow_unused=True)
    tgs = torch.autograd.grad(ty, ts, create_graph=True, allow_unused=True)
    for g, tg in zip(gs, tgs):
        assert (g is None) == (tg is None)  # an input the program never used
        if g is not None:
            np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-9, atol=1e-12)
    # Hessian-vector product: d/dx <grad, v>
    used = [i for i, g in enumerate(gs) if g is not None]
    dot = sum(((gs[i] * plugtorch.tensor(vs[i])).sum() for i in used), plugtorch.zeros((), dtype=plugtorch.float64))
    tdot = sum(((tgs[i] * torch.tensor(vs[i])).sum() for i in used), torch.zeros((), dtype=torch.float64))
    if not dot.requires_grad:
        return  # every gradient is constant: no second-order term to compare
    hv = plugtorch.autograd.grad(dot, xs, allow_unused=True, materialize_grads=True)
    thv = torch.autograd.grad(tdot, ts, allow_unused=True, materialize_grads=True)
    for h, th in zip(hv, thv):
        np.testing.assert_allclose(h.numpy(), th.numpy(), rtol=1e-8, atol=1e-10)
