"""plugtorch.compile runs elementwise chains in dead temporaries (compiler/reuse.py): fewer
allocations, the same values as eager, and never a buffer something else still reads."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch


def _replayed(fn, *args):
    """fn's eager result, and its compiled replay's (after the warm-up and capture calls)."""
    expected = fn(*args)
    compiled = plugtorch.compile(fn, fullgraph=True)
    compiled(*args), compiled(*args)
    got = compiled(*args)
    assert compiled.captures == 1 and compiled.replays == 1
    return expected, got, compiled


def _same(a, b):
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_an_elementwise_chain_runs_in_one_buffer():
    def fn(x):
        return (((x * 1.5 + 1.0).exp() - 2.0) / 3.0).sqrt()
    expected, got, compiled = _replayed(fn, plugtorch.rand(64, 33))
    _same(expected, got)
    assert compiled.reused == 5  # every call after the first writes into its predecessor's result


def test_a_result_still_returned_is_not_written_into():
    def fn(x):
        a = x * 2.0
        c = (a + 1.0) * 3.0
        return a, c
    expected, got, compiled = _replayed(fn, plugtorch.randn(10))
    _same(expected, got)
    assert compiled.reused == 1  # (a + 1) is reused by * 3; a, returned, is not


def test_a_buffer_with_a_live_view_is_not_written_into():
    def fn(x):
        a = x * 2.0
        row = a[0]                  # a view of a, read after a's last elementwise use
        b = a + 1.0
        return b * row
    expected, got, compiled = _replayed(fn, plugtorch.randn(4, 5))
    _same(expected, got)
    assert compiled.reused == 1     # b * row goes into b; b may not go into a, which row views


def test_an_operand_overlapping_the_buffer_blocks_reuse():
    def fn(x):
        a = x * 2.0
        return a * a.t()            # a dies here, but its transpose is the other operand
    expected, got, compiled = _replayed(fn, plugtorch.randn(6, 6))
    _same(expected, got)
    assert compiled.reused == 0


@pytest.mark.parametrize("dtype", [plugtorch.float32, plugtorch.float64, plugtorch.int64])
def test_dtype_changes_are_not_written_into_a_buffer_of_another_dtype(dtype):
    def fn(x):
        m = x * 3                   # x's dtype
        return (m > 2) & (m < 9)    # bool results: a bool buffer is reused, m is not
    expected, got, compiled = _replayed(fn, plugtorch.arange(12).to(dtype))
    _same(expected, got)
    assert compiled.reused == 1


def test_an_input_of_another_layout_is_a_new_capture():
    def fn(x):
        return (x * 2.0 + 1.0).exp()
    compiled = plugtorch.compile(fn, fullgraph=True)
    x = plugtorch.randn(5, 7)
    xt = plugtorch.randn(7, 5).t()  # same shape, column-major
    for arg in (x, x, x, xt, xt, xt):
        _same(fn(arg), compiled(arg))
    assert compiled.captures == 2 and compiled.replays == 2


def test_training_steps_reuse_and_stay_bitwise_equal():
    """The MNIST CNN step under compile reuses buffers (test_compile checks 50 steps bitwise)."""
    from plugtorch.apps.train import CNN
    plugtorch.manual_seed(0)
    model = CNN()
    opt = plugtorch.optim.Adam(model.parameters(), lr=1e-3)

    def step(x, y):
        opt.zero_grad()
        loss = plugtorch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled = plugtorch.compile(step, fullgraph=True)
    x, y = plugtorch.randn(8, 1, 28, 28), plugtorch.randint(0, 10, (8,))
    compiled(x, y), compiled(x, y)
    assert compiled.captures == 1 and compiled.reused > 0
