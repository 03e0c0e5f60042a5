"""In-place ops on views write through to the viewed tensor, with gradients as torch's CopySlices.

Each case runs the same code on plugtorch and torch: the values every tensor sharing the memory
sees, and the gradients, must agree.
"""
import numpy as np
import pytest
import torch

import plugtorch as pt

CASES = {
    "int index": lambda z, w: z[0].sub_(1),
    "int index times a weight": lambda z, w: z[1].mul_(w[0]),
    "view": lambda z, w: z.view(2, 3).sub_(1),
    "view then row": lambda z, w: z.view(2, 3)[0].mul_(3),
    "slice, view, int": lambda z, w: z[1:].view(5)[0].mul_(5),
    "view, transpose, row": lambda z, w: z.view(2, 3).t()[0].sub_(w[:2]),
    "setitem on a view": lambda z, w: z.view(2, 3)[0].__setitem__(0, 9.0),
    "setitem of a tensor on a view": lambda z, w: z.view(2, 3)[1].__setitem__(slice(0, 2), w[:2]),
    "zero_ on a slice": lambda z, w: z[1:3].zero_(),
    "copy_ into a slice": lambda z, w: z[2:5].copy_(w[:3]),
    "two in-place ops on one view": lambda z, w: z[::2].mul_(w[:3]).add_(w[3:]),
    "exp_ on a strided view": lambda z, w: z[::2].exp_(),
}


def _run(lib, case):
    x = lib.tensor(np.arange(6.0), requires_grad=True)
    w = lib.tensor(np.linspace(0.5, 2.0, 6), requires_grad=True)
    z = x * 1
    CASES[case](z, w)
    values = z.detach().numpy().copy()
    (z * lib.arange(1.0, 7.0, dtype=z.dtype)).sum().backward()
    return values, x.grad.numpy(), None if w.grad is None else w.grad.numpy()


@pytest.mark.parametrize("case", CASES)
def test_values_and_gradients_as_torch(case):
    got, want = _run(pt, case), _run(torch, case)
    for g, t in zip(got, want):
        if t is None:
            assert g is None or not g.any()
        else:
            np.testing.assert_allclose(g, t, rtol=1e-6)


def test_an_in_place_op_on_the_base_reaches_its_views_with_a_graph():
    for lib in (pt, torch):
        x = lib.ones(4, requires_grad=True)
        z = x * 2
        v = z.view(2, 2)
        z.add_(lib.ones(4, requires_grad=True))
        assert v.tolist() == [[3.0, 3.0], [3.0, 3.0]], lib.__name__


def test_a_detached_tensor_shares_the_write():
    for lib in (pt, torch):
        x = lib.ones(3, requires_grad=True)
        z = x * 2
        d = z.detach()
        w = lib.full((3,), 3.0, requires_grad=True)
        d.mul_(w)
        assert z.tolist() == [6.0, 6.0, 6.0], lib.__name__


def test_an_in_place_op_on_a_view_of_a_leaf_that_requires_grad_is_refused():
    x = pt.ones(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[0].mul_(2)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[1:].zero_()
    with pt.no_grad():  # as torch: allowed without a graph, and written through
        x[0].mul_(2)
    assert x.tolist() == [2.0, 1.0, 1.0, 1.0]


def _saved_old_value(lib, op):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    z = x * 1
    op(z[1:])  # the node of the op needs the old tail values, or the new ones, or raises
    try:
        (z * z).sum().backward()
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e)
        return "raises"
    return x.grad.tolist()


@pytest.mark.parametrize("op", [lambda v: v.pow_(2), lambda v: v.mul_(v), lambda v: v.sigmoid_(),
                                lambda v: v.div_(v.detach() + 1)],
                         ids=["pow_", "mul_ by itself", "sigmoid_", "div_"])
def test_what_the_graph_saved_stays_as_in_torch(op):
    assert _saved_old_value(pt, op) == _saved_old_value(torch, op)


def test_a_zero_d_index_is_a_view_without_a_graph():
    z = pt.arange(4.0)
    z[0].sub_(1)
    z[3].mul_(2)
    assert z.tolist() == [-1.0, 1.0, 2.0, 6.0]
    m = pt.zeros(2, 2)
    m[1, 1].add_(5)
    assert m.tolist() == [[0.0, 0.0], [0.0, 5.0]]


OLDER_VIEWS = {
    # (the in-place op, run after the older views were taken)
    "row of a view": lambda z, w: z.view(2, 3)[0].mul_(w[:3]),
    "the base itself": lambda z, w: z.mul_(w),
    "setitem on the base": lambda z, w: z.__setitem__(slice(1, 3), w[:2]),
    "zero_ on a slice": lambda z, w: z[2:4].zero_(),
}


def _older_views(lib, case):
    x = lib.tensor(np.arange(6.0), requires_grad=True)
    w = lib.tensor(np.linspace(0.5, 2.0, 6), requires_grad=True)
    z = x * 1
    h = z.view(3, 2)          # views taken before the in-place op: their graph must follow it
    tail = z[1:]
    OLDER_VIEWS[case](z, w)
    loss = (h * lib.arange(1.0, 7.0, dtype=z.dtype).view(3, 2)).sum() + (tail * tail).sum()
    loss.backward()
    return float(loss), x.grad.numpy(), None if w.grad is None else w.grad.numpy()


@pytest.mark.parametrize("case", OLDER_VIEWS)
def test_views_taken_before_an_in_place_op_follow_it_as_in_torch(case):
    got, want = _older_views(pt, case), _older_views(torch, case)
    assert got[0] == pytest.approx(want[0], rel=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    if want[2] is None:
        assert got[2] is None or not got[2].any()
    else:
        np.testing.assert_allclose(got[2], want[2], rtol=1e-6)
