"""Where a compiled training step spends its time: each replayed kernel call timed, summed by
op name (the profile behind the step tables of benchmarks/RESULTS.md).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/replay_profile.py mlp --batch 64
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/replay_profile.py cnn

The steps are ``bench_steps.py``'s (synthetic data, Adam). Prints the step's time, the
kernels' share of it, and the ops by total time with their call counts; the rest of the step
is the replay's own Python (see also ``compile_overhead.py``).
"""
from __future__ import annotations

import argparse
import collections
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import bench_steps


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", choices=("mlp", "cnn"))
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args(argv)
    step = bench_steps._plugtorch_step(args.model, args.batch, compiled=True)
    trace = next(t for t in step._traces.values() if hasattr(t, "steps"))
    for _ in range(10):
        step()
    total: collections.Counter = collections.Counter()
    calls: collections.Counter = collections.Counter()

    def timed(fn, name):
        def call(*a, **k):
            t = time.perf_counter()
            out = fn(*a, **k)
            total[name] += time.perf_counter() - t
            calls[name] += 1
            return out
        return call
    trace.steps = [(timed(fn, name), a, k, r) for (fn, a, k, r), name in zip(trace.steps, trace.names)]
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    per_step = (time.perf_counter() - start) / args.steps
    kernels = sum(total.values()) / args.steps
    print(f"{args.model} batch {args.batch}: {per_step * 1e3:.3f} ms per step, kernels {kernels * 1e3:.3f} ms "
          f"({kernels / per_step:.0%}), {len(trace.steps)} calls; {step.reused} reuse a dead buffer, "
          f"{step.fused} fused chains")
    for name, t in total.most_common(args.top):
        print(f"  {t / args.steps * 1e6:9.1f} us  x{calls[name] // args.steps:<3d} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
