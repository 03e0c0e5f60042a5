"""plugtorch.compile on the real models of ``benchmarks/models.py`` (ResNet, minGPT written out
and with SDPA, a TransformerEncoder stack, the word-language-model LSTM), dropout on: a
compiled training step is captured and replayed, and gives eager's losses and parameters bit for
bit on the NumPy backend, the dropout masks drawn fresh on each replay from the same generator
state as eager's."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plugtorch

# the builders' sizes (benchmarks/models.py), smaller than the benchmark's
SIZES = {"resnet": dict(batch=2), "gpt": dict(batch=2, block=8), "gpt_sdpa": dict(batch=2, block=8),
         "encoder": dict(batch=2, seq=8), "lstm": dict(batch=2, seq=6)}
STEPS = 5


def _run(models, name, compiled):
    # the builder seeds the generator: the same weights each run
    step, model, x, y = models.train_step(plugtorch, name, **SIZES[name])
    fn = plugtorch.compile(step) if compiled else step
    plugtorch.manual_seed(1)  # the dropout masks' stream, the same for both runs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = [fn(x, y).item() for _ in range(STEPS)]
    return losses, [p.detach().numpy().copy() for p in model.parameters()], fn, caught


@pytest.mark.parametrize("name", sorted(SIZES))
def test_a_compiled_step_replays_eagers_bits(bench_models, name):
    eager, eager_params, _, _ = _run(bench_models, name, False)
    comp, comp_params, fn, caught = _run(bench_models, name, True)
    assert fn.replays >= STEPS - 2, (fn.replays, sorted({str(w.message) for w in caught}))
    assert comp == eager
    for a, b in zip(comp_params, eager_params):
        np.testing.assert_array_equal(a, b)


def test_dropout_draws_a_fresh_mask_on_every_replay(bench_models):
    model, x, _, _ = bench_models.gpt(plugtorch, **SIZES["gpt"])
    f = plugtorch.compile(lambda x: model(x))
    with plugtorch.no_grad():  # a forward alone (with a graph it would run eagerly, and say so)
        outs = [f(x).numpy() for _ in range(4)]
    assert f.replays >= 2
    assert not np.array_equal(outs[-1], outs[-2])
