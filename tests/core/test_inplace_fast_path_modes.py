"""The in-place methods' fast path (``p.add_(t)`` with no graph, straight into the backend's
out= variant) tests no dispatch mode per call: entering a mode empties its cache, and nothing is
learnt while a mode is in force, so a mode still sees every in-place op; the variant is called
with its output positional where it is a ufunc, by keyword otherwise."""
import numpy as np
import pytest
import torch

import plugtorch as pt
from plugtorch.core.ops import inplace
from plugtorch.core.optable import MODES, DispatchMode


class Recorder(DispatchMode):
    def __init__(self):
        self.seen = []

    def dispatch(self, opdef, operands, attrs):
        self.seen.append(opdef.name)
        return super().dispatch(opdef, operands, attrs)


@pytest.mark.parametrize("name", ["add_", "sub_", "mul_", "div_"])
def test_a_mode_entered_after_the_fast_path_was_learnt_sees_the_op(name):
    x, y = pt.ones(3) * 2, pt.ones(3) * 4
    t, u = torch.ones(3) * 2, torch.ones(3) * 4  # the same calls in torch

    def both():
        assert getattr(x, name)(y) is x
        getattr(t, name)(u)
    for _ in range(2):  # the first call learns the variant, the second runs the shortcut
        both()
    assert any(inplace._SEEN), "the shortcut's cache holds the learnt variant"
    with Recorder() as r:
        assert not any(inplace._SEEN), "entering a mode empties the cache"
        both()
        both()  # nothing was learnt meanwhile: the mode sees the second call too
    assert r.seen == [name[:-1]] * 2
    assert not MODES.on
    for _ in range(2):  # after the mode the general path learns again, and the shortcut runs
        both()
    assert any(inplace._SEEN)
    np.testing.assert_allclose(x.numpy(), t.numpy(), rtol=1e-6)


def test_nothing_is_learnt_while_a_mode_is_in_force():
    x, y = pt.ones(3), pt.ones(3)
    with Recorder():
        x.add_(y)
        x.add_(y)
        assert not any(inplace._SEEN)
    assert x.tolist() == [3.0, 3.0, 3.0]


def test_the_variant_takes_its_output_by_position_only_where_it_is_a_ufunc():
    assert inplace._positional(np.add) is np.add
    assert inplace._positional(None) is None
    calls = []

    def keyword_only(a, b, *, out):
        calls.append(out)
        return np.add(a, b, out=out)
    a, b = np.ones(2), np.ones(2)
    inplace._positional(keyword_only)(a, b, a)
    assert calls == [a] and a.tolist() == [2.0, 2.0]
    unary = inplace._positional(np.negative)  # one operand: called by keyword, as before
    assert unary is not np.negative


@pytest.mark.parametrize("shape", [(2, 3), (3,), (1, 3)])
def test_the_shortcut_against_torch_broadcasts_and_refuses_as_torch(shape):
    base = np.arange(6, dtype=np.float32).reshape(2, 3)
    other = np.linspace(1, 2, int(np.prod(shape)), dtype=np.float32).reshape(shape)
    x, t = pt.tensor(base), torch.tensor(base)
    for _ in range(2):
        x.add_(pt.tensor(other))
        t.add_(torch.tensor(other))
    np.testing.assert_array_equal(x.numpy(), t.numpy())
    small = pt.tensor(base[:1])
    with pytest.raises(RuntimeError, match="add_"):
        small.add_(pt.tensor(base))
    with pytest.raises(RuntimeError):
        torch.tensor(base[:1]).add_(torch.tensor(base))
