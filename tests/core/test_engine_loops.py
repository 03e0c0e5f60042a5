"""The backward pass's two loops: ``_walk.c``'s runs built-in nodes and leaves in C, ``engine.py``'s
is the reference. They must give the same bits, the same errors, and keep nothing alive.

(tests/core/test_engine.py and tests/autograd run every test with each loop too.)
"""
from __future__ import annotations

import gc
import os
import re
import shutil
import sysconfig
import weakref

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import plugtorch
from plugtorch.core import engine


def test_built_wherever_a_c_compiler_is():
    if os.environ.get("PLUGTORCH_NATIVE_ENGINE") == "0":
        pytest.skip("PLUGTORCH_NATIVE_ENGINE=0 asks for the Python loop")
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) here: the install leaves the extension out by design")
    assert engine._native is not None, engine.native_status()
    assert engine.native_status() == "backward loop: C (_walk.c)"


class _Scale(plugtorch.autograd.Function):
    """A Function's node (a Node subclass): the C loop hands it to _Walk.step."""

    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g * 3


OPS = {  # (name, number of operands) -> fn
    "add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub_bcast": lambda a, b: a - b[:1],
    "div": lambda a, b: a / (b * b + 1), "tanh": lambda a: a.tanh(), "exp": lambda a: (a * 0.3).exp(),
    "scale_fn": lambda a: _Scale.apply(a), "sum_keep": lambda a: a.sum(0, keepdim=True) * a,
    "double_hooked": lambda a: _hooked(a * 2),
}


def _hooked(t):
    t.register_hook(lambda g: g * 0.5)
    return t


@st.composite
def programs(draw):
    steps = []
    for _ in range(draw(st.integers(1, 8))):
        name = draw(st.sampled_from(sorted(OPS)))
        n = OPS[name].__code__.co_argcount
        steps.append((name, [draw(st.integers(0, 20)) for _ in range(n)]))
    return steps, draw(st.integers(0, 2 ** 16)), draw(st.booleans())


def _grads(steps, seed, leaf_hook, use_native):
    saved = engine._native
    engine._native = saved if use_native else None
    try:
        rng = np.random.default_rng(seed)
        leaves = [plugtorch.tensor(rng.uniform(-1, 1, (3, 4)).astype(np.float32), requires_grad=True)
                  for _ in range(3)]
        seen = []
        if leaf_hook:
            leaves[0].register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.numpy().copy()))
        for _ in range(2):  # the second pass accumulates into .grad
            values = list(leaves)
            for name, picks in steps:
                values.append(OPS[name](*(values[p % len(values)] for p in picks)))
            sum(v.sum() for v in values[3:]).backward()
        return [None if t.grad is None else t.grad.numpy().tobytes() for t in leaves], seen
    finally:
        engine._native = saved


@pytest.mark.skipif(engine._native is None, reason="the C loop does not run here: it is compared with itself")
@settings(max_examples=60, deadline=None)
@given(program=programs())
def test_both_loops_give_the_same_bits(program):
    steps, seed, leaf_hook = program
    c_grads, c_seen = _grads(steps, seed, leaf_hook, True)
    py_grads, py_seen = _grads(steps, seed, leaf_hook, False)
    assert c_grads == py_grads
    assert [s.tobytes() for s in c_seen] == [s.tobytes() for s in py_seen]


def _mul_graph():
    a = plugtorch.ones(2, requires_grad=True)
    b = plugtorch.full((2,), 2.0, requires_grad=True)
    return a, b, a * b


@pytest.mark.parametrize("rule, error, message", [
    (lambda ctx, g: (g,), RuntimeError, "function MulBackward0 returned an incorrect number of gradients "
                                        "(expected 2, got 1)"),
    (lambda ctx, g: g, RuntimeError, "returned an incorrect number of gradients (expected 2, got 1)"),
    (lambda ctx, g: (plugtorch.ones(3), g), RuntimeError,
     "Function MulBackward0 returned an invalid gradient at index 0 - got [3] but expected shape compatible with [2]"),
    (lambda ctx, g: (1.0, g), AttributeError, "'float' object has no attribute '_data'"),
    (lambda ctx, g: 1 / 0, ZeroDivisionError, "division by zero"),
], ids=["too few", "not a tuple", "wrong shape", "not a tensor", "raises"])
def test_a_wrong_rule_fails_alike_in_both_loops(engine_loop, rule, error, message):
    a, b, y = _mul_graph()
    y.grad_fn.rule = rule
    with pytest.raises(error, match=re.escape(message)):
        y.sum().backward()
    assert plugtorch.is_grad_enabled()  # the grad mode is restored however the pass ends


def test_gradients_are_fitted_to_their_input_in_both_loops(engine_loop):
    a, b, y = _mul_graph()
    y.grad_fn.rule = lambda ctx, g: (plugtorch.ones(3, 2, dtype=plugtorch.float64), g)  # summed down, cast back
    y.sum().backward()
    assert a.grad.tolist() == [3.0, 3.0] and a.grad.dtype == plugtorch.float32


def test_an_inplace_change_and_a_second_pass_fail_in_both_loops(engine_loop):
    a, b, y = _mul_graph()
    z = y.tanh()
    with plugtorch.no_grad():
        z.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    a, b, y = _mul_graph()
    s = (y * y).sum()
    s.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        s.backward()


def test_nothing_is_kept_alive_after_the_pass(engine_loop):
    a, b, _ = _mul_graph()
    y1 = a * b
    y2 = y1.tanh()
    seen = []
    y1.register_hook(lambda g: seen.append(weakref.ref(g)))  # the gradient the C loop made and passed on
    (y2 + b).sum().backward()
    nodes = [weakref.ref(y1.grad_fn), weakref.ref(y2.grad_fn)]
    grad = weakref.ref(a.grad)
    del y1, y2
    a.grad = None
    gc.collect()
    assert [r() for r in seen + nodes + [grad]] == [None] * 4


def test_many_passes_leave_no_tensors_behind(engine_loop):
    a, b, _ = _mul_graph()

    def step():
        y = a
        for i in range(6):
            y = (y * b).tanh() if i % 2 else y + b
        y.sum().backward()

    def tensors():
        gc.collect()
        return sum(type(o) is plugtorch.Tensor for o in gc.get_objects())

    step()
    before = tensors()
    for _ in range(200):
        step()
    assert tensors() <= before  # a leaked reference a pass would leave 200 behind
