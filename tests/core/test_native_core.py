"""The core's C paths (``_native.c``) against their Python twins, the references: ``wrap`` and
``node`` make the same objects; the backward loops give the same bits and the same errors and
keep nothing alive; and without the extension (or with a stale one) the Python paths run.

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
from hypothesis import given, settings
from hypothesis import strategies as st

import plugtorch
from plugtorch.core import dispatch, engine, native
from plugtorch.core.graph import Node
from plugtorch.core.node_names import class_for

from .fresh_process import script_lines

C = pytest.mark.skipif(native.ext is None, reason=f"the C paths do not run here ({native.status()})")


def test_built_wherever_a_c_compiler_is():
    if os.environ.get("PLUGTORCH_NATIVE_CORE") == "0":
        pytest.skip("PLUGTORCH_NATIVE_CORE=0 asks for the Python paths")
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) here: the install leaves the extension out by design")
    assert native.status() == "core C paths on (_native.c)"
    assert dispatch.wrap is native.ext.wrap and engine._native is native.ext


def _fields(obj, cls):
    return {name: getattr(obj, name, "<unset>") for name in cls.__slots__ if name != "__weakref__"}


@C
@pytest.mark.parametrize("requires_grad", [None, False, True])
def test_wrap_makes_the_tensor_the_python_wrap_makes(requires_grad):
    b = plugtorch.get_registry().backends["numpy"]
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    args = (data, b) if requires_grad is None else (data, b, requires_grad)
    c, py = native.ext.wrap(*args), dispatch.python_wrap(*args)
    assert type(c) is plugtorch.Tensor and _fields(c, plugtorch.Tensor) == _fields(py, plugtorch.Tensor)
    assert c._vc is not py._vc and c._data is data and c.dtype is plugtorch.float32
    assert gc.is_tracked(c) and weakref.ref(c)() is c
    assert (c * 2).tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]


def _edge_cases():
    """(name, tensor) pairs covering every branch of dispatch.edge."""
    leaf = plugtorch.ones(2, 3, requires_grad=True)
    made = leaf * 2
    base = plugtorch.ones(2, 3, requires_grad=True).clone()
    view, untracked = base[0], plugtorch.zeros(2, 3)[0]
    base.mul_(3)  # an in-place op with a graph: the view's node is now stale
    no_graph_base = plugtorch.zeros(2, 3)
    no_graph_view = no_graph_base[1]
    with plugtorch.no_grad():
        no_graph_base.add_(1)
    no_graph_base._vc.append(1)  # a newer generation, but the view was made without a graph
    return [("no grad", plugtorch.zeros(2)), ("leaf", leaf), ("result", made), ("stale view", view),
            ("untracked view", untracked), ("view without a graph", no_graph_view)]


@C
@pytest.mark.parametrize("case", range(6))
def test_edge_gives_the_node_the_python_edge_gives(case):
    name_c, t_c = _edge_cases()[case]
    name_py, t_py = _edge_cases()[case]
    c, py = native.ext.edge(t_c), dispatch.python_edge(t_py)
    assert type(c) is type(py), name_c
    if isinstance(c, Node):
        assert c.op == py.op and len(c.next) == len(py.next)
    if type(c).__name__ == "AccumulateGrad":
        assert c.variable is t_c and native.ext.edge(t_c) is c  # made once, kept on the tensor
    # the state either leaves behind (a regenerated view's node and generation) is the same
    assert (t_c.grad_fn is None) == (t_py.grad_fn is None) and t_c.requires_grad == t_py.requires_grad
    assert getattr(t_c, "_view", None) is None or t_c._view[4] == t_py._view[4]


@C
def test_edge_refuses_what_python_refuses():
    with pytest.raises(AttributeError):
        native.ext.edge(object())
    assert dispatch.edge is native.ext.edge


@C
def test_node_makes_the_node_the_class_makes():
    def rule(ctx, g):
        return g
    args = ("mul", rule, (None,), (((2,), plugtorch.float32),), None, None, {"k": 1})
    cls = class_for("mul", args[3], args[6])  # MulBackward0: a Node that adds no fields
    for kind in (Node, cls):
        c, py = native.ext.node(kind, *args), kind(*args)
        assert type(c) is kind and _fields(c, Node) == _fields(py, Node)
        assert gc.is_tracked(c) and weakref.ref(c)() is c


@C
def test_a_field_added_in_python_alone_is_refused_at_import():
    class Grown:
        __slots__ = native.ext.NODE_FIELDS + ("extra", "__weakref__")
    with pytest.raises(ImportError, match="update _native.c and native.py together"):
        native.check_slots(Grown, native.ext.NODE_FIELDS)
    native.check_slots(Node, native.ext.NODE_FIELDS)
    native.check_slots(plugtorch.Tensor, native.ext.TENSOR_FIELDS)


PROBE = """
import sys
how = sys.argv[1]
if how == "not built":
    sys.modules["plugtorch.core._native"] = None  # import fails, as without a C compiler
elif how == "other implementation":  # as PyPy: the C reads CPython's object layouts
    import types
    sys.implementation = types.SimpleNamespace(**{**vars(sys.implementation), "name": "pypy"})
elif how == "stale":
    import types
    sys.modules["plugtorch.core._native"] = types.ModuleType("plugtorch.core._native")  # no ABI
import plugtorch
from plugtorch.core import dispatch, engine, native
a = plugtorch.linspace(-1, 1, 12).reshape(3, 4).requires_grad_()
b = plugtorch.linspace(0.5, 2, 12).reshape(3, 4).requires_grad_()
y = a
for i in range(6):
    y = (y * b).tanh() if i % 2 else y + b
y.sum().backward()
print(native.status())
print(dispatch.wrap is dispatch.python_wrap, engine._native is None)
print(a.grad.numpy().tobytes().hex() + b.grad.numpy().tobytes().hex())
"""


def _probe(how, env_value=None):
    return script_lines(PROBE, how, "PLUGTORCH_NATIVE_CORE", env_value)


@C
@pytest.mark.parametrize("how, env_value, reason", [
    ("variable", "0", "core C paths off: PLUGTORCH_NATIVE_CORE=0"),
    ("not built", None, "core C paths off: not built ("),
    ("stale", None, "core C paths off: the built extension is stale (interface None, these sources expect"),
    ("other implementation", None, "core C paths off: written for CPython, this is pypy"),
])
def test_without_the_extension_the_python_paths_run_and_give_the_same_bits(how, env_value, reason):
    status, python_paths, bits = _probe(how, env_value)
    assert status.startswith(reason) and python_paths == "True True"
    on_status, on_python_paths, on_bits = _probe("built")
    assert on_status == "core C paths on (_native.c)" and on_python_paths == "False False"
    assert bits == on_bits


class _Scale(plugtorch.autograd.Function):
    """A Function's node (a Node subclass): the C loop hands it to _Walk.step."""

    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g * 3


OPS = {  # name -> fn (programs() reads the operand count off the lambda)
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


@C
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
