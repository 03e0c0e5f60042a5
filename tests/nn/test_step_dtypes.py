"""A float32 training step computes in float32 from end to end: every floating array that a
kernel or primitive of the MLP and CNN steps (forward, backward, Adam) receives or returns is
float32 (labels and indices are int64, masks bool), so no op upcasts to float64 behind the
user's back and pays twice the memory traffic for it; and the primitive copies a step makes
are counted, so a new copy on the hot path shows up here."""
from __future__ import annotations

import collections

import numpy as np
import pytest

import plugtorch
import plugtorch.nn.functional as F
from plugtorch.apps.train import CNN, MLP


def _arrays(obj):
    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _arrays(o)


def traced_step(model_name):
    plugtorch.manual_seed(0)
    model = CNN(dropout=0.25) if model_name == "cnn" else MLP()
    opt = plugtorch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = plugtorch.randn(8, 1, 28, 28), plugtorch.randint(0, 10, (8,))

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    step()  # optimizer state is made on the first step
    backend = plugtorch.get_registry().backends["numpy"]
    seen: dict = collections.defaultdict(set)  # dtype -> names of the calls that touched it
    calls: collections.Counter = collections.Counter()
    tables = [(backend.kernels, dict(backend.kernels)), (backend.primitives, dict(backend.primitives))]

    def watched(name, fn):
        def call(*args, **kwargs):
            out = fn(*args, **kwargs)
            calls[name] += 1
            for a in _arrays(list(args) + list(kwargs.values()) + [out]):
                seen[a.dtype.name].add(name)
            return out
        return call
    try:
        for table, saved in tables:
            for name, fn in saved.items():
                table[name] = watched(name, fn)
        step()
    finally:
        for table, saved in tables:
            table.clear()
            table.update(saved)
    return seen, calls


@pytest.mark.parametrize("model_name", ["mlp", "cnn"])
def test_a_float32_step_has_no_float64_intermediate(model_name):
    seen, _ = traced_step(model_name)
    assert "float64" not in seen, f"float64 arrays in the {model_name} step, from: {sorted(seen['float64'])}"
    assert set(seen) <= {"float32", "int64", "bool"}, dict(seen)


@pytest.mark.parametrize("model_name, copies", [("mlp", 4), ("cnn", 8)])
def test_the_copies_a_step_makes(model_name, copies):
    """Only the gradients handed to parameters are copied (clone: .grad owns its memory)."""
    _, calls = traced_step(model_name)
    made = calls["clone"] + calls["copy"] + calls["contiguous"]
    assert made <= copies, f"{model_name} step: {made} copies ({dict(calls)})"
