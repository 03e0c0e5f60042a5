"""A leaf's first gradient becomes its ``.grad`` without a copy when nothing else holds it (as
PyTorch's AccumulateGrad steals a gradient whose use count is one), and is copied whenever
something does: another leaf given the same gradient, a hook or the caller that kept it, a
tensor sharing its array, a view. Optimizers and users write ``.grad`` in place, so a missed
copy would change a tensor someone else holds; each test below writes into ``.grad`` and checks
the other holder did not change."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch as pt
from plugtorch.core import engine


def _owns(grad) -> bool:
    return grad._data.base is None


def test_a_fresh_gradient_is_taken_without_a_copy(numpy_kernel_calls):
    if engine._SOLE is None:
        pytest.skip("no reference counts on this interpreter: every gradient is copied")
    calls = numpy_kernel_calls("clone")
    layer = pt.nn.Linear(4, 3)
    layer(pt.randn(5, 4)).sum().backward()
    assert calls == []  # the weight's product and the bias's sum, each held by the engine alone
    assert _owns(layer.weight.grad) and _owns(layer.bias.grad)


def test_one_gradient_for_two_leaves_is_copied_for_one():
    a = pt.randn(3, requires_grad=True)
    b = pt.randn(3, requires_grad=True)
    (a + b).sum().backward()  # add's rule hands the same tensor to both
    assert not np.shares_memory(a.grad._data, b.grad._data)
    a.grad.add_(1)
    np.testing.assert_array_equal(b.grad.numpy(), [1, 1, 1])


def test_a_gradient_the_caller_holds_is_copied():
    x = pt.randn(3, requires_grad=True)
    given = pt.tensor([1.0, 2.0, 3.0])
    (x + 1).backward(given)  # add's rule passes the caller's tensor through
    x.grad.mul_(0)
    np.testing.assert_array_equal(given.numpy(), [1, 2, 3])


def test_a_gradient_a_hook_kept_is_copied():
    x = pt.randn(3, requires_grad=True)
    kept = []
    x.register_hook(kept.append)
    (x * 2).sum().backward()
    x.grad.zero_()
    np.testing.assert_array_equal(kept[0].numpy(), [2, 2, 2])


def test_a_gradient_a_hook_returns_and_keeps_is_copied():
    x = pt.randn(3, requires_grad=True)
    kept = []

    def hook(g):
        kept.append(g * 1)
        return kept[-1]
    x.register_hook(hook)
    (x * 2).sum().backward()
    x.grad.zero_()
    np.testing.assert_array_equal(kept[0].numpy(), [2, 2, 2])


def test_a_gradient_sharing_its_array_is_copied():
    class Passes(pt.autograd.Function):
        keep = None

        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            out = g * 3
            Passes.keep = out.detach()  # another tensor on the same array
            return out

    x = pt.randn(2, requires_grad=True)
    Passes.apply(x).sum().backward()
    x.grad.zero_()
    np.testing.assert_array_equal(Passes.keep.numpy(), [3, 3])


def test_a_view_is_copied():
    x = pt.randn(2, 3, requires_grad=True)
    g = pt.ones(6)
    x.reshape(6).backward(g)  # reshape's rule gives a view of the caller's tensor
    assert _owns(x.grad)
    x.grad.zero_()
    np.testing.assert_array_equal(g.numpy(), np.ones(6))


def test_a_second_backward_adds_into_a_new_tensor_not_the_first_gradient():
    layer = pt.nn.Linear(2, 2)
    x = pt.randn(3, 2)
    layer(x).sum().backward()
    first = layer.weight.grad
    kept = first.clone()
    layer(x).sum().backward()
    np.testing.assert_array_equal(first.numpy(), kept.numpy())  # accumulation is out of place
    np.testing.assert_allclose(layer.weight.grad.numpy(), 2 * kept.numpy())


def test_a_compiled_step_hands_over_its_gradients_too():
    # the capture's record of a result is no other holder: the replay makes the gradient anew
    # each time, so it copies nothing, and the gradients of successive steps stay apart
    if engine._SOLE is None:
        pytest.skip("no reference counts on this interpreter: every gradient is copied")
    pt.manual_seed(0)
    layer = pt.nn.Linear(4, 3)
    x = pt.randn(5, 4)

    def step():
        layer.zero_grad()
        (layer(x) ** 2).sum().backward()
        with pt.no_grad():
            layer.weight.sub_(0.1 * layer.weight.grad)

    compiled = pt.compile(step)
    kept = []
    for _ in range(5):
        compiled()
        kept.append((layer.weight.grad._data, layer.weight.grad.numpy().copy()))
    traces = compiled.traces()
    assert traces and all("clone" not in t.names for t in traces)
    assert len({id(a) for a, _ in kept}) == len(kept)  # a new array every step
    for array, values in kept:  # and no later step wrote into an earlier step's
        np.testing.assert_array_equal(array, values)
    assert not np.array_equal(kept[0][1], kept[-1][1])
