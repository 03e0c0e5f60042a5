"""LBFGS follows torch.optim.LBFGS step for step: the same closure gives the same losses,
parameters, evaluation counts and history, with a fixed step or the strong-Wolfe search."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch import optim


def _problem(lib, dtype, **kwargs):
    """A smooth non-quadratic least-squares problem over two parameters (a vector and a 0-d
    bias), so curvature changes along the way and the line search has work to do."""
    rng = np.random.default_rng(0)
    A, y = rng.standard_normal((12, 5)).astype(dtype), rng.standard_normal(12).astype(dtype)
    w = lib.tensor(rng.standard_normal(5).astype(dtype), requires_grad=True)
    b = lib.tensor(np.array(0.3, dtype=dtype), requires_grad=True)
    A_, y_ = lib.tensor(A), lib.tensor(y)
    opt = lib.optim.LBFGS([w, b], **kwargs)

    def closure():
        opt.zero_grad()
        r = A_ @ w + b - y_
        loss = (r * r).mean() + (w ** 4).sum() * 0.1 + lib.cos(w).sum()
        loss.backward()
        return loss

    return opt, closure, (w, b)


def _run(lib, dtype, kwargs, steps):
    opt, closure, params = _problem(lib, dtype, **kwargs)
    for _ in range(steps):
        loss = opt.step(closure)
        state = opt.state[params[0]]
        yield float(loss.detach()), [p.detach().numpy().copy() for p in params], state


def _assert_same_state(ours, theirs, tol):
    assert sorted(ours) == sorted(theirs)
    for key in ("func_evals", "n_iter"):
        assert ours[key] == theirs[key], key
    for key in ("d", "prev_flat_grad"):
        np.testing.assert_allclose(ours[key].numpy(), theirs[key].numpy(), **tol, err_msg=key)
    for key in ("t", "H_diag", "prev_loss"):
        assert float(ours[key]) == pytest.approx(float(theirs[key]), rel=tol["rtol"], abs=tol["atol"])
    for key in ("old_dirs", "old_stps", "ro"):
        assert len(ours[key]) == len(theirs[key]), key
        for a, b in zip(ours[key], theirs[key]):
            np.testing.assert_allclose(a.numpy(), b.numpy(), **tol, err_msg=key)


CONFIGS = [
    dict(),
    dict(line_search_fn="strong_wolfe"),
    dict(lr=0.5, max_iter=7, history_size=3),
    dict(line_search_fn="strong_wolfe", history_size=2, max_iter=10, max_eval=12),
    dict(lr=0.2, max_iter=4, tolerance_change=1e-5),
]


@pytest.mark.parametrize("kwargs", CONFIGS, ids=[str(c) for c in CONFIGS])
def test_matches_torch_step_for_step_float64(torch, kwargs):
    tol = dict(rtol=1e-10, atol=1e-12)
    for k, (ours, theirs) in enumerate(zip(_run(plugtorch, np.float64, kwargs, 6),
                                           _run(torch, np.float64, kwargs, 6))):
        assert ours[0] == pytest.approx(theirs[0], rel=1e-12), f"loss of step {k}"
        for a, b in zip(ours[1], theirs[1]):
            np.testing.assert_allclose(a, b, **tol, err_msg=f"step {k}")
        _assert_same_state(ours[2], theirs[2], tol)


@pytest.mark.parametrize("kwargs", [dict(max_iter=4), dict(line_search_fn="strong_wolfe", max_iter=3),
                                    dict(lr=0.5, max_iter=3, history_size=2)], ids=str)
def test_matches_torch_float32_while_far_from_the_optimum(torch, kwargs):
    # The scalars of the algorithm are float32 0-d tensors in both, rounded alike; near the
    # optimum, a last-bit difference in a float32 loss may flip a stopping test, so the
    # comparison stops while progress is still well above float32 resolution. 1/(y.s) of
    # nearby gradients cancels digits, hence the looser relative tolerance. The history's
    # y = g_new - g_old are differences of O(1) gradients: their absolute error is that of the
    # gradients (a few float32 ulps of 1, which depend on the CPU's reduction order in each
    # library), not of their small size, hence the state's absolute tolerance.
    tol = dict(rtol=1e-4, atol=1e-6)
    for ours, theirs in zip(_run(plugtorch, np.float32, kwargs, 3),
                            _run(torch, np.float32, kwargs, 3)):
        assert ours[0] == pytest.approx(theirs[0], rel=1e-6)
        for a, b in zip(ours[1], theirs[1]):
            assert a.dtype == np.float32
            np.testing.assert_allclose(a, b, **tol)
        _assert_same_state(ours[2], theirs[2], dict(rtol=1e-4, atol=1e-5))


def _sum_of_squares(opt, p):
    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss
    return closure


def test_returns_at_once_when_the_gradient_is_already_zero(torch):
    for lib in (plugtorch, torch):
        p = lib.zeros(3, requires_grad=True)
        opt = lib.optim.LBFGS([p])
        assert float(opt.step(_sum_of_squares(opt, p)).detach()) == 0.0
        assert opt.state[p] == {"func_evals": 1, "n_iter": 0}


def test_minimises_a_quadratic_to_tolerance():
    target = plugtorch.tensor([1.0, -2.0, 3.0], dtype=plugtorch.float64)
    p = plugtorch.zeros(3, dtype=plugtorch.float64, requires_grad=True)
    opt = optim.LBFGS([p], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = ((p - target) ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    np.testing.assert_allclose(p.detach().numpy(), target.numpy(), atol=1e-7)


def test_options_and_errors_match_torch(torch):
    ours = optim.LBFGS([plugtorch.zeros(2, requires_grad=True)], max_iter=8)
    theirs = torch.optim.LBFGS([torch.zeros(2, requires_grad=True)], max_iter=8)
    assert ours.defaults == theirs.defaults and ours.defaults["max_eval"] == 10
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        optim.LBFGS([{"params": [plugtorch.zeros(1, requires_grad=True)]},
                     {"params": [plugtorch.zeros(1, requires_grad=True)]}])
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        optim.LBFGS([plugtorch.zeros(1, requires_grad=True)], lr=-1)
    p = plugtorch.ones(2, requires_grad=True)
    opt = optim.LBFGS([p], line_search_fn="backtracking")
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(_sum_of_squares(opt, p))
    with pytest.raises(RuntimeError, match="needs a closure"):
        optim.LBFGS([p]).step(None)
