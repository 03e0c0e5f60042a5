"""Dispatch modes: a mode in force sees every op called on tensors, whichever path runs it."""
import pytest

import plugtorch as pt
from plugtorch.core.dispatch import call_op
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
