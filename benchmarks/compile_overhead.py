"""How much of a compiled training step is Python: the MLP step (784-128-10, Adam, batch 64)
under plugtorch.compile, then the same replay with every kernel call answered by the array that
kernel returned on the previous replay, so what is left is the compiled call's own Python (guards,
argument lookups, the optimizer's attribute refresh, write-backs, result wrapping).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/compile_overhead.py
"""
from __future__ import annotations

import statistics
import time

import plugtorch
import plugtorch.nn.functional as F
from plugtorch import nn


def median_seconds(fn, calls=200, repeats=9) -> float:
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        runs.append((time.perf_counter() - t0) / calls)
    return statistics.median(runs)


def main() -> None:
    plugtorch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = plugtorch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = plugtorch.randn(64, 784), plugtorch.randint(0, 10, (64,))

    def step(x, y):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    compiled = plugtorch.compile(step, fullgraph=True)
    for _ in range(50):
        compiled(x, y)
    trace = compiled.traces()[0]
    whole = median_seconds(lambda: compiled(x, y))
    kernels = trace.steps
    outputs: list = []
    trace.steps = [((lambda fn: lambda *a, **k: outputs.append(fn(*a, **k)) or outputs[-1])(fn), a, k, r)
                   for fn, a, k, r in kernels]
    compiled(x, y)  # one replay that remembers each kernel's result
    trace.steps = [((lambda value: lambda *a, **k: value)(value), a, k, r)
                   for (fn, a, k, r), value in zip(kernels, outputs)]
    python_only = median_seconds(lambda: compiled(x, y))
    trace.steps = kernels
    print(f"compiled MLP step, batch 64: {whole * 1e6:.0f} us; without its kernels: {python_only * 1e6:.0f} us "
          f"({100 * python_only / whole:.1f} %); {len(kernels)} kernel calls per step")


if __name__ == "__main__":
    main()
