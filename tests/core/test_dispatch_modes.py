"""Dispatch modes: a mode in force sees every op called on tensors, whichever path runs it.

The in-place methods' fast path (``p.add_(t)`` with no graph, straight into the backend's out=
variant) tests no dispatch mode per call: entering a mode empties its cache, and nothing is
learnt while a mode is in force, so a mode still sees every in-place op; the variant is called
with its output positional where it is a ufunc, by keyword otherwise."""
import numpy as np
import pytest
import torch

import plugtorch as pt
from plugtorch.core.dispatch import call_op
from plugtorch.core.ops import inplace
from plugtorch.core.optable import MODES, DispatchMode


class Recorder(DispatchMode):
    def __init__(self):
        self.seen = []

    def dispatch(self, opdef, operands, attrs):
        self.seen.append(opdef.name)
        return super().dispatch(opdef, operands, attrs)


def test_a_mode_sees_the_fast_paths_and_call_op():
    x = pt.randn(3, 4)
    with Recorder() as r:
        y = x.exp()                  # an elementwise front
        z = y + x                    # a binary front on two tensors
        w = z * 2.0                  # a binary front with a number
        s = w.sum(1)                 # call_op1
        m = x @ x.t()                # call_op
        c = x.to(pt.float64)         # cast
    for name in ("exp", "add", "mul", "sum", "matmul", "cast"):
        assert name in r.seen, (name, r.seen)
    assert pt.allclose(s, ((x.exp() + x) * 2).sum(1))
    assert m.shape == (3, 3) and c.dtype is pt.float64
    assert MODES.on == 0


def test_the_in_place_fast_path_is_seen_and_still_in_place():
    x = pt.zeros(4)
    before = x.clone()
    with Recorder() as r:
        x.add_(pt.ones(4))
    assert "add" in r.seen
    assert x.tolist() == (before + 1).tolist()


def test_a_mode_can_change_the_result():
    class Doubling(DispatchMode):
        def dispatch(self, opdef, operands, attrs):
            out = call_op(opdef, operands, attrs)
            return out * 2 if opdef.name == "exp" else out
    x = pt.zeros(2)
    with Doubling():
        y = x.exp()
    assert y.tolist() == [2.0, 2.0]


def test_modes_nest_and_the_outer_sees_what_the_inner_calls():
    outer, inner = Recorder(), Recorder()
    x = pt.ones(2)
    with outer, inner:
        x.neg()
    # the inner mode computes neg by call_op while it is off: the outer mode sees that call
    assert inner.seen == ["neg"] and outer.seen == ["neg"]


def test_a_mode_is_off_inside_its_own_dispatch_and_the_grad_graph_is_recorded():
    x = pt.randn(3, requires_grad=True)
    with Recorder() as r:
        y = (x * x).sum()
    y.backward()
    assert pt.allclose(x.grad, 2 * x.detach())
    assert r.seen == ["mul", "sum"]


def test_leaving_modes_out_of_order_is_an_error():
    a, b = Recorder(), Recorder()
    a.__enter__()
    b.__enter__()
    with pytest.raises(RuntimeError, match="out of order"):
        a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)
    assert MODES.on == 0


def test_modes_are_per_thread():
    import threading
    results, errors = [], []

    def work():
        try:
            x = pt.ones(3)
            for _ in range(200):
                x = (x * 1.0).neg().abs() + 0.0
            results.append(x.tolist())
        except Exception as e:
            errors.append(e)

    with Recorder() as r:
        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        pt.ones(2).neg()
        for t in threads:
            t.join()
    assert not errors, errors
    assert results == [[1.0, 1.0, 1.0]] * 2
    assert r.seen == ["neg"]  # only this thread's op
    assert MODES.on == 0


# -- the in-place fast path under modes ------------------------------------------------------------

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
