"""The Python state a compiled function reads besides its arguments (compiler/python_state.py):
each case changes such state between calls, after which replaying the old trace gave the old
number; each must now give eager's, and a function that changes that state itself runs eagerly."""
from __future__ import annotations

import argparse
import warnings

import numpy as np
import pytest

import plugtorch

SCALE = 2.0
OFFSET = plugtorch.tensor([1.0])
CONFIG = {"optim": {"clip": 1e9}, "scale": 1.0}
ARGS = argparse.Namespace(clip=1e9, scale=3.0)
COUNT = 0


def _scaled(x):
    return x * SCALE


def _offset(x):
    return x + OFFSET


def _configured(x):
    return x * CONFIG["scale"] + CONFIG["optim"]["clip"] * 0


def _with_args(x):
    return x * ARGS.scale


def _helper(x):
    return x * SCALE


def _through_a_helper(x):
    return _helper(x) + 1


def _counting(x):
    global COUNT
    COUNT += 1
    return x * COUNT


def _replayed(fn, x, calls=3):
    """``fn`` compiled and called until it replays; its result on the last call."""
    for _ in range(calls):
        out = fn(x)
    assert fn.replays >= 1
    return out


@pytest.fixture(autouse=True)
def _restore():
    global SCALE, OFFSET, COUNT
    saved = SCALE, OFFSET, COUNT, ARGS.scale, CONFIG["scale"], CONFIG["optim"]["clip"]
    yield
    SCALE, OFFSET, COUNT, ARGS.scale, CONFIG["scale"], CONFIG["optim"]["clip"] = saved


def test_a_rebound_global_number_is_read_again():
    global SCALE
    f, x = plugtorch.compile(_scaled), plugtorch.tensor([1.0, 2.0])
    _replayed(f, x)
    SCALE = 3.0
    assert f(x).tolist() == [3.0, 6.0]
    SCALE = 3  # an int: the same value, another dtype on an int tensor
    xi = plugtorch.tensor([1, 2])
    _replayed(f, xi)
    SCALE = 3.0
    assert f(xi).dtype == (xi * 3.0).dtype


def test_a_rebound_global_tensor_is_read_again():
    global OFFSET
    f, x = plugtorch.compile(_offset), plugtorch.tensor([1.0])
    _replayed(f, x)
    OFFSET = plugtorch.tensor([100.0])
    assert f(x).item() == 101.0


def test_entries_of_a_global_dict_and_namespace_are_read_again():
    f, x = plugtorch.compile(_configured), plugtorch.tensor([1.0])
    _replayed(f, x)
    CONFIG["scale"] = 0.5
    assert f(x).item() == 0.5
    CONFIG["optim"]["clip"] = float("inf")  # a nested entry: inf * 0 is nan
    assert np.isnan(f(x).item())
    g = plugtorch.compile(_with_args)
    _replayed(g, x)
    ARGS.scale = 5.0  # argparse's namespace, as pytorch/examples' scripts keep their options
    assert g(x).item() == 5.0


def test_a_helper_functions_globals_and_closures_are_read_again():
    global SCALE
    f, x = plugtorch.compile(_through_a_helper), plugtorch.tensor([1.0])
    _replayed(f, x)
    SCALE = 10.0
    assert f(x).item() == 11.0

    def make(k):
        def g(x):
            return x * k[0]
        return g
    k = [2.0]
    g = plugtorch.compile(make(k))
    _replayed(g, x)
    k[0] = 7.0  # a closed-over list's item
    assert g(x).item() == 7.0


def test_what_a_method_reads_through_self_is_read_again():
    class Scaler:
        def __init__(self):
            self.k = 2.0

        def apply(self, x):
            return x * self.k

    s, x = Scaler(), plugtorch.tensor([1.0])
    f = plugtorch.compile(s.apply)
    _replayed(f, x)
    s.k = 4.0
    assert f(x).item() == 4.0


def test_a_compiled_models_forward_reads_its_globals_again():
    global SCALE

    class Net(plugtorch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = plugtorch.nn.Linear(2, 2)

        def forward(self, x):
            return self.fc(x) * SCALE

    net = Net()
    f, x = plugtorch.compile(net), plugtorch.ones(1, 2)
    with plugtorch.no_grad():
        _replayed(f, x)
        SCALE = -1.0
        np.testing.assert_array_equal(f(x).numpy(), net(x).numpy())


def test_a_clip_value_changed_between_training_steps_takes_effect():
    model = plugtorch.nn.Linear(1, 1)
    opt = plugtorch.optim.SGD(model.parameters(), lr=0.1)
    clip = {"max_norm": 1e9}

    def step(x):
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        plugtorch.nn.utils.clip_grad_norm_(model.parameters(), clip["max_norm"])
        opt.step()
        return loss

    f, x = plugtorch.compile(step), plugtorch.ones(1, 1)
    _replayed(f, x)
    clip["max_norm"] = 0.0  # no update at all from here
    before = [p.detach().clone() for p in model.parameters()]
    f(x)
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.detach().numpy(), b.numpy())


def test_a_function_that_changes_state_it_reads_runs_eagerly_with_a_warning():
    f, x = plugtorch.compile(_counting), plugtorch.tensor([1.0])
    with pytest.warns(UserWarning, match="changes Python state it reads"):
        results = [f(x).item() for _ in range(4)]
    assert results == [1.0, 2.0, 3.0, 4.0] and f.replays == 0


def test_unchanged_state_keeps_replaying():
    f, x = plugtorch.compile(_configured), plugtorch.tensor([2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(6):
            assert f(x).item() == 2.0
    assert f.captures == 1 and f.replays == 4


def test_the_attributes_of_an_object_passed_in_are_read_again():
    """A plain object argument is keyed by identity: its contents are guarded too (a config)."""
    class Config:
        def __init__(self):
            self.scale = 2.0

    def f(x, cfg):
        return x * cfg.scale

    cfg, x = Config(), plugtorch.tensor([1.0])
    g = plugtorch.compile(f)
    for _ in range(3):
        g(x, cfg)
    assert g.replays == 1
    cfg.scale = 5.0
    assert g(x, cfg).item() == 5.0


def test_state_the_code_never_reads_does_not_make_each_call_capture():
    """A trainer that counts its steps beside the compiled one: the count is an attribute the
    step's code never names, so the step keeps replaying; an attribute it reads is guarded."""
    class Trainer:
        def __init__(self):
            self.model = plugtorch.nn.Linear(4, 4)
            self.opt = plugtorch.optim.SGD(self.model.parameters(), lr=0.1)
            self.global_step, self.scale = 0, 1.0
            self.step = plugtorch.compile(self._step)

        def _step(self, x):
            self.opt.zero_grad()
            loss = self.model(x).sum() * self.scale
            loss.backward()
            self.opt.step()
            return loss

    t, x = Trainer(), plugtorch.randn(8, 4)
    for _ in range(10):
        t.step(x)
        t.global_step += 1
    assert t.step.captures == 1 and t.step.replays == 8
    t.scale = 0.0  # read by the step: no update from here
    before = t.model.weight.detach().clone()
    t.step(x)
    np.testing.assert_array_equal(t.model.weight.detach().numpy(), before.numpy())
