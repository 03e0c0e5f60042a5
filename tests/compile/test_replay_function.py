"""The function a trace replays (compiler/trace.py's replay_function): each kind of argument
spec reaches the kernel as the value it names, results are dropped after their last use, and
write-backs and outputs land where the loop it replaced put them."""
from __future__ import annotations

import gc
import math
import weakref

import numpy as np

import plugtorch
from plugtorch.compiler.guards import Guards
from plugtorch.compiler.trace import _CONST, _GRAD, _IN, _SEQ, _SLOT, Trace, liveness, replay_function


class Box:
    """An array that can be weakly referenced, so a test can see when a replay drops it."""

    def __init__(self, value):
        self.value = value

    def __getitem__(self, k):
        return self.value[k]


def _replay(steps, outputs=(), backends=(), structure=("tuple",), writebacks=(), versions=()):
    release = liveness(steps, list(outputs) + [s for _, _, s in writebacks])[0]
    return replay_function(steps, release, list(outputs), list(backends), structure, list(writebacks),
                           list(versions))


def test_every_spec_reaches_the_kernel_as_its_value():
    seen = []
    marker = object()

    def kernel(*args, **kwargs):
        seen.append((args, kwargs))
        return Box((10, 20))

    grad_owner = plugtorch.zeros(2, requires_grad=True)
    grad_owner.grad = plugtorch.ones(2)
    steps = [
        (kernel, ((_IN, 1), (_CONST, math.nan), (_CONST, -math.inf), (_CONST, np.float32(2.5)),
                  (_CONST, marker), (_CONST, "s'q\"uote")), (), None),
        (kernel, ((_SLOT, 0, None), (_SEQ, tuple, ((_CONST, 1), (_CONST, 2))),
                  (_SEQ, list, ((_SLOT, 0, None), (_CONST, None))), (_SEQ, tuple, ((_IN, 0),)),
                  (_GRAD, grad_owner)),
         (("dim", (_CONST, -1)), ("not-a-name", (_CONST, True)), ("lambda", (_CONST, -0.0))), None),
        (kernel, ((_SLOT, 1, 0),), (), lambda: {"step": 7}),
    ]
    _replay(steps)(["first", "second"])
    args, kwargs = seen[0]
    assert args[0] == "second" and math.isnan(args[1]) and args[2] == -math.inf
    assert type(args[3]) is np.float32 and args[3] == 2.5 and args[4] is marker and args[5] == "s'q\"uote"
    assert kwargs == {}
    args, kwargs = seen[1]
    assert isinstance(args[0], Box) and args[1] == (1, 2) and args[3] == ("first",)
    assert type(args[2]) is list and args[2][0] is args[0] and args[2][1] is None
    assert args[4] is grad_owner.grad._data
    assert kwargs == {"dim": -1, "not-a-name": True, "lambda": 0.0} and math.copysign(1, kwargs["lambda"]) == -1
    assert seen[2] == ((10,), {"step": 7})


def test_a_list_argument_is_a_new_list_on_each_replay():
    lists = []
    steps = [(lambda xs: lists.append(xs) or xs, ((_SEQ, list, ((_CONST, 1),)),), (), None)]
    replay = _replay(steps)
    replay([]), replay([])
    assert lists[0] == lists[1] == [1] and lists[0] is not lists[1]


def test_a_result_is_dropped_after_its_last_reader():
    refs, alive = [], []

    def make():
        box = Box(None)
        refs.append(weakref.ref(box))
        return box

    steps = [
        (make, (), (), None),                                       # 0: read by step 1 only
        (make, (), (), None),                                       # 1: read by step 3
        (lambda a: None, ((_SLOT, 0, None),), (), None),
        (lambda b: alive.append([r() is not None for r in refs]), ((_SLOT, 1, None),), (), None),
    ]
    gc.disable()  # no collector pass between the steps: a drop is the last reference going
    try:
        _replay(steps)([])
    finally:
        gc.enable()
    assert alive == [[False, True]]  # 0 was gone before step 3 ran, 1 was still held for it


def test_write_backs_and_outputs():
    backend = plugtorch.zeros(1)._backend
    p = plugtorch.zeros(3)
    q = plugtorch.zeros(3, requires_grad=True)
    old_grad = plugtorch.zeros(3)
    q.grad = old_grad
    new_data, new_grad, out = np.ones(3, np.float32), np.full(3, 2, np.float32), np.arange(3, dtype=np.float32)
    steps = [(lambda: new_data, (), (), None), (lambda: new_grad, (), (), None), (lambda: (out, out), (), (), None)]
    version = p._vc[0]
    replay = _replay(steps, outputs=[(_SLOT, 2, 1)], backends=[backend], structure=("T", None),
                     writebacks=[(p, "data", (_SLOT, 0, None)), (q, "grad", (_SLOT, 1, None))],
                     versions=[(p._vc, 2)])
    result = replay([])
    assert p._data is new_data and p._vc[0] == version + 2  # moved as the capture saw eager move it
    assert q.grad is not old_grad and q.grad._data is new_grad
    np.testing.assert_array_equal(old_grad.numpy(), np.zeros(3))  # the tensor a caller kept is untouched
    assert isinstance(result, plugtorch.Tensor) and result._data is out


def test_write_backs_to_an_argument_reach_the_tensor_of_each_call():
    """An argument is named by its position: each replay writes the gradient and moves the
    version of the tensor it was given, not of the one the capture saw."""
    grad = np.full(2, 3, np.float32)
    replay = _replay([(lambda: grad, (), (), None)], writebacks=[(0, "grad", (_SLOT, 0, None))], versions=[(0, 1)])
    for _ in range(2):
        x = plugtorch.zeros(2, requires_grad=True)
        replay([x._data], [x])
        assert x.grad._data is grad and x._vc[0] == 1


def test_setting_a_traces_steps_writes_its_replay_again():
    calls = []
    trace = Trace([(lambda x: x, ((_IN, 0),), (), None)], [(_SLOT, 0, None)], ("T", None),
                  [plugtorch.zeros(1)._backend], [], Guards([], [], [], [], []))
    trace.steps = [((lambda x: calls.append(x) or x), a, k, r) for _, a, k, r in trace.steps]
    arr = np.zeros(2, np.float32)
    assert trace.replay([arr])._data is arr and calls == [arr]
