"""plugtorch.compile on the real models of ``benchmarks/models.py`` (ResNet, minGPT written out
and with SDPA, a TransformerEncoder stack, the word-language-model LSTM), dropout on: a
compiled training step is captured and replayed, and gives eager's losses and parameters bit for
bit on the NumPy backend, the dropout masks drawn fresh on each replay from the same generator
state as eager's."""
from __future__ import annotations

import importlib.util
import pathlib
import warnings

import numpy as np
import pytest

import plugtorch

_spec = importlib.util.spec_from_file_location(
    "bench_models_defs", pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "models.py")
models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(models)

SMALL = {
    "resnet": lambda lib: models.resnet(lib, batch=2),
    "gpt": lambda lib: models.gpt(lib, batch=2, block=8),
    "gpt_sdpa": lambda lib: models.gpt(lib, batch=2, block=8, sdpa=True),
    "encoder": lambda lib: models.encoder(lib, batch=2, seq=8),
    "lstm": lambda lib: models.lstm(lib, batch=2, seq=6),
}
STEPS = 5


def _run(name, compiled):
    model, x, y, loss_fn = SMALL[name](plugtorch)  # seeds the generator: the same weights each run
    opt = plugtorch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = plugtorch.compile(step) if compiled else step
    plugtorch.manual_seed(1)  # the dropout masks' stream, the same for both runs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = [fn(x, y).item() for _ in range(STEPS)]
    return losses, [p.detach().numpy().copy() for p in model.parameters()], fn, caught


@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_compiled_step_replays_eagers_bits(name):
    eager, eager_params, _, _ = _run(name, False)
    comp, comp_params, fn, caught = _run(name, True)
    assert fn.replays >= STEPS - 2, (fn.replays, sorted({str(w.message) for w in caught}))
    assert comp == eager
    for a, b in zip(comp_params, eager_params):
        np.testing.assert_array_equal(a, b)


def test_dropout_draws_a_fresh_mask_on_every_replay():
    model, x, _, _ = SMALL["gpt"](plugtorch)
    f = plugtorch.compile(lambda x: model(x))
    with plugtorch.no_grad():  # a forward alone (with a graph it would run eagerly, and say so)
        outs = [f(x).numpy() for _ in range(4)]
    assert f.replays >= 2
    assert not np.array_equal(outs[-1], outs[-2])
