"""The optimizer step alone: ``AdamW(lr=1e-3).step()`` (its defaults: weight decay 0.01,
decoupled) over the parameters of each model of ``models.py``, after one backward so every
parameter has a gradient. The LSTM word model has 1.7M parameters in 11 tensors, minGPT 0.42M in
29, the ResNet 43k in 32: the step's time is the update's arithmetic for the first and its
per-tensor cost for the last.

    python benchmarks/compare_steps.py --bench bench_optim.py --libs plugtorch,torch   # one process per library
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m pytest benchmarks/bench_optim.py

``BENCH_LIB=plugtorch|torch`` keeps one library's tests (the others skip, saying so).
"""
from __future__ import annotations

import pytest
from bench_models import _only, _peak, _torch
from models import MODELS


def _stepper(lib, model_name):
    model, x, y, loss_fn = MODELS[model_name](lib)
    loss_fn(model(x), y).backward()
    opt = lib.optim.AdamW(model.parameters(), lr=1e-3)
    opt.step()  # the state (exp_avg, exp_avg_sq) exists from here on, as in training
    return opt.step


@pytest.mark.parametrize("model", MODELS)
def test_plugtorch(benchmark, model):
    _only("plugtorch")
    import plugtorch
    benchmark.pedantic(_stepper(plugtorch, model), rounds=30, warmup_rounds=3)
    _peak(benchmark)


@pytest.mark.parametrize("model", MODELS)
def test_torch(benchmark, model):
    _only("torch")
    benchmark.pedantic(_stepper(_torch(), model), rounds=30, warmup_rounds=3)
    _peak(benchmark)
