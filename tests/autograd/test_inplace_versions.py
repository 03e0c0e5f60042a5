"""In-place ops and version counters: a backward that needs a value modified since raises torch's error."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch

MODIFIED = "one of the variables needed for gradient computation has been modified by an inplace operation"


def _leaf(*values):
    return plugtorch.tensor(list(values), dtype=plugtorch.float64, requires_grad=True)


@pytest.mark.parametrize("modify", [
    lambda t: t.add_(1), lambda t: t.sub_(1), lambda t: t.mul_(2), lambda t: t.div_(2),
    lambda t: t.zero_(), lambda t: t.fill_(3.0), lambda t: t.copy_(plugtorch.ones(3, dtype=plugtorch.float64)),
    lambda t: t.clamp_(0, 1), lambda t: t.__setitem__(0, 5.0),
], ids=["add_", "sub_", "mul_", "div_", "zero_", "fill_", "copy_", "clamp_", "setitem"])
def test_modifying_a_saved_input_makes_backward_raise(modify):
    x = _leaf(1.0, 2.0, 3.0)
    y = x * 1
    z = y.sin()  # sin saves its input y
    modify(y)
    with pytest.raises(RuntimeError, match=MODIFIED) as info:
        z.sum().backward()
    msg = str(info.value)
    assert "SinBackward0" in msg and "is at version 1; expected version 0" in msg


def test_modifying_a_saved_output_makes_backward_raise():
    x = _leaf(0.5, 1.5)
    y = x.exp()  # exp saves its output
    y.mul_(2)
    with pytest.raises(RuntimeError, match=MODIFIED + r".*the output of ExpBackward0"):
        y.sum().backward()


def test_modifying_through_a_view_is_seen():
    x = _leaf(1.0, 2.0, 3.0, 4.0)
    y = x * 1
    z = y.sin()
    y.view(2, 2)[0].add_(1)  # a view shares the version counter
    with pytest.raises(RuntimeError, match=MODIFIED):
        z.sum().backward()


def test_in_place_on_a_value_no_one_saved_keeps_gradients_correct():
    x = _leaf(1.0, 2.0, 3.0)
    y = x * 2
    y.add_(1)       # add saves nothing: allowed, as in torch
    y.mul_(3)       # saves only the number
    (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (3 * (2 * np.array([1.0, 2.0, 3.0]) + 1)) * 3 * 2)


def test_multiplying_a_tensor_in_place_by_itself_raises_as_in_torch():
    x = _leaf(1.0, 2.0)
    y = x * 2
    y.mul_(y)  # mul saved y as its other operand, and then bumped y's version
    with pytest.raises(RuntimeError, match=MODIFIED + r".*MulBackward0"):
        y.sum().backward()


def test_in_place_on_a_leaf_that_requires_grad_raises():
    x = _leaf(1.0, 2.0)
    for op in (lambda: x.add_(1), lambda: x.zero_(), lambda: x.__setitem__(0, 1.0),
               lambda: x.masked_fill_(x > 1, 0.0)):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            op()
    with plugtorch.no_grad():
        x.add_(1)  # what optimizers do
    assert x.tolist() == [2.0, 3.0] and x._version == 1


def test_setitem_gradients_flow_to_the_value_and_around_the_overwritten_part():
    x = _leaf(1.0, 2.0, 3.0, 4.0)
    v = _leaf(10.0, 20.0)
    y = x * 1
    y[1:3] = v * 2
    (y * plugtorch.tensor([1.0, 2.0, 3.0, 4.0], dtype=plugtorch.float64)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 0.0, 0.0, 4.0])
    np.testing.assert_allclose(v.grad.numpy(), [4.0, 6.0])


def test_version_counter_counts_each_in_place_op():
    t = plugtorch.zeros(3)
    assert t._version == 0
    t.add_(1)
    t[0] = 2.0
    t.masked_fill_(t > 1, 0.0)
    assert t._version == 3 and t.tolist() == [0.0, 1.0, 1.0]
