"""Kernel launches per training step, kept in a budget: the CPU proxy for GPU launch overhead.

On a GPU every dispatched kernel or primitive is at least one launch, and launch overhead is
what small steps pay. Here the NumPy backend's dispatch table is wrapped with counters and
one optimizer step of the MNIST MLP and CNN is counted after a warm-up step. A change that
adds calls must raise the budget on purpose (and say why in its commit).
"""
from __future__ import annotations

import collections

import pytest

import plugtorch
import plugtorch.nn.functional as F
from plugtorch.apps.train import CNN, MLP

# calls per Adam step at batch 8 (MLP 28, CNN 128: linear is one op, and the label-range check
# reads the targets once on the host instead of dispatching five ops), plus about 5% headroom
BUDGET = {"mlp": 30, "cnn": 135}


def count_calls(step) -> collections.Counter:
    kernels = plugtorch.get_registry().backends["numpy"].kernels
    saved = dict(kernels)
    counts: collections.Counter = collections.Counter()

    def counted(name, fn):
        def call(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)
        return call
    try:
        for name, fn in saved.items():
            kernels[name] = counted(name, fn)
        step()
    finally:
        kernels.clear()
        kernels.update(saved)
    return counts


@pytest.mark.parametrize("model_name", ["mlp", "cnn"])
def test_dispatched_calls_per_training_step_stay_within_budget(model_name):
    plugtorch.manual_seed(0)
    model = CNN(dropout=0.25) if model_name == "cnn" else MLP()
    opt = plugtorch.optim.Adam(model.parameters(), lr=1e-3)
    x = plugtorch.randn(8, 1, 28, 28)
    y = plugtorch.randint(0, 10, (8,))

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    step()  # optimizer state is created on the first step
    counts = count_calls(step)
    total = sum(counts.values())
    print(model_name, total, dict(counts))
    assert total <= BUDGET[model_name], (f"{model_name} step dispatches {total} calls (budget "
                                         f"{BUDGET[model_name]}): {dict(counts.most_common())}")
    assert counts["_fused_adam_"] == 1 and counts["adam_step_"] == 0  # one update for the whole group
