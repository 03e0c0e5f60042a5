"""Training steps of real models (``models.py``): plugtorch, eager and under plugtorch.compile, beside
PyTorch eager. Each step is zero_grad + forward + backward + AdamW on fixed synthetic data; each
test records its process's peak RSS (``extra_info["peak_rss_mib"]``).

    python benchmarks/compare_steps.py --bench bench_models.py --threads 1,2   # one process per library
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m pytest benchmarks/bench_models.py   # one process

``BENCH_LIB=plugtorch|torch`` keeps one library's tests (the others skip, saying so); no library is
imported at module level, so a ``BENCH_LIB=torch`` process never loads plugtorch.
"""
from __future__ import annotations

import os
import resource

import pytest
from models import MODELS, train_step

LIB = os.environ.get("BENCH_LIB")
# (rounds, warm-up rounds): the models take 50-600 ms a step on one thread
ROUNDS = {"resnet": (10, 2), "gpt": (10, 2), "gpt_sdpa": (10, 2), "encoder": (10, 2), "lstm": (10, 2)}


def _only(lib: str):
    if LIB and lib != LIB:
        pytest.skip(f"BENCH_LIB={LIB}: {lib} is measured in a process of its own")


def _torch():
    """PyTorch, skipping where it is not installed, on the benchmark's thread count."""
    torch = pytest.importorskip("torch", reason="PyTorch is the comparison peer; pip install torch==2.13.0")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    return torch


def _peak(benchmark):
    benchmark.extra_info["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    benchmark.extra_info["lib"] = LIB or "all in one process"


@pytest.mark.parametrize("model", MODELS)
def test_plugtorch(benchmark, model):
    _only("plugtorch")
    import plugtorch
    step, _, x, y = train_step(plugtorch, model)
    rounds, warmup = ROUNDS[model]
    benchmark.pedantic(step, (x, y), rounds=rounds, warmup_rounds=warmup)
    _peak(benchmark)


@pytest.mark.parametrize("model", MODELS)
def test_plugtorchcompiled(benchmark, model):
    _only("plugtorch")
    import warnings

    import plugtorch
    step, _, x, y = train_step(plugtorch, model)
    compiled = plugtorch.compile(step)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):  # warm-up, capture, first replay
            compiled(x, y)
    benchmark.extra_info["replays"] = compiled.replays
    benchmark.extra_info["fallbacks"] = sorted({str(w.message) for w in caught})
    rounds, warmup = ROUNDS[model]
    benchmark.pedantic(compiled, (x, y), rounds=rounds, warmup_rounds=warmup)
    _peak(benchmark)


@pytest.mark.parametrize("model", MODELS)
def test_torch(benchmark, model):
    _only("torch")
    step, _, x, y = train_step(_torch(), model)
    rounds, warmup = ROUNDS[model]
    benchmark.pedantic(step, (x, y), rounds=rounds, warmup_rounds=warmup)
    _peak(benchmark)
