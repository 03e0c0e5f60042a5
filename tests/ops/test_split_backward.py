"""split and chunk give their pieces one node (torch's SplitBackward0 / SplitWithSizesBackward0)
whose rule concatenates the pieces' gradients, zeros only for a piece none reached, instead of a
full-size zero tensor per piece summed by the engine: values and gradients against torch."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch as pt

torch = pytest.importorskip("torch")

CASES = [("split", 3, 1), ("split", [2, 5, 3], 1), ("split", 4, -1), ("chunk", 3, 1), ("chunk", 4, 0),
         ("split", 10, 1)]


def _pair(shape=(4, 10, 6), transposed=False):
    a = np.random.default_rng(0).standard_normal(shape)
    if transposed:  # a strided input
        a = np.ascontiguousarray(a.transpose(2, 1, 0)).transpose(2, 1, 0)
    return pt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


@pytest.mark.parametrize("fn, arg, dim", CASES)
@pytest.mark.parametrize("used", ["all", "some"])
def test_gradients_match_torch(fn, arg, dim, used):
    x, tx = _pair(transposed=dim == 1)
    pieces, tpieces = getattr(x * 2, fn)(arg, dim), getattr(tx * 2, fn)(arg, dim)
    assert len(pieces) == len(tpieces)
    assert [p.grad_fn.name() for p in pieces] == [p.grad_fn.name() for p in tpieces]
    for p, tp in zip(pieces, tpieces):
        np.testing.assert_array_equal(p.detach().numpy(), tp.detach().numpy())
    keep = range(len(pieces)) if used == "all" else range(0, len(pieces), 2)
    loss = sum((pieces[i] * (i + 1)).sin().sum() for i in keep)
    tloss = sum((tpieces[i] * (i + 1)).sin().sum() for i in keep)
    loss.backward()
    tloss.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_no_full_size_zeros_per_piece(numpy_kernel_calls):
    calls = numpy_kernel_calls("index_put_zeros")
    x = pt.randn(2, 5, 12, requires_grad=True)
    q, k, v = x.split(4, dim=2)
    (q * k + v).sum().backward()
    assert calls == []
    np.testing.assert_allclose(x.grad.numpy()[..., :4], k.detach().numpy())


def test_pieces_are_views_and_share_the_version_counter():
    base = pt.zeros(3, 6, requires_grad=True) * 1
    a, b = base.split(3, 1)
    with pt.no_grad():
        base.add_(1)
    assert a._vc is base._vc and float(a.sum()) == 9.0
    (a * b).sum().backward()  # the saved pieces' versions were taken after the write


def test_hooks_retain_graph_and_autograd_grad():
    x, tx = _pair((6, 4))
    seen = []
    a, b = (x * 1).split([2, 4])
    a.register_hook(lambda g: seen.append(tuple(g.shape)))
    loss = (a.exp().sum() + b.sum())
    g1, = pt.autograd.grad(loss, x, retain_graph=True)
    g2, = pt.autograd.grad(loss, x)
    ta, tb = (tx * 1).split([2, 4])
    tg, = torch.autograd.grad(ta.exp().sum() + tb.sum(), tx)
    assert seen == [(2, 4), (2, 4)]
    np.testing.assert_allclose(g1.numpy(), tg.numpy())
    np.testing.assert_allclose(g2.numpy(), tg.numpy())


def test_gradcheck_and_double_backward():
    x = pt.randn(3, 7, dtype=pt.float64, requires_grad=True)

    def f(t):
        p, q, r = t.split([3, 1, 3], dim=1)
        return (p * r).tanh(), q.exp()  # the second piece is used by itself

    assert pt.autograd.gradcheck(f, (x,))
    assert pt.autograd.gradgradcheck(f, (x,))


def test_no_grad_and_modes_keep_plain_views():
    x = pt.randn(4, 6, requires_grad=True)
    with pt.no_grad():
        assert all(p.grad_fn is None for p in x.split(2, 1))
    with pt.autograd.forward_ad.dual_level():  # a mode: the pieces' graph is the slices'
        y = x * 1
        assert y.split(3, 1)[0].grad_fn.name() == "SliceBackward0"
