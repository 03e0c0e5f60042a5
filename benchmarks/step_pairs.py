"""A model's training step in plugtorch over PyTorch's, measured in alternating process pairs.

    python benchmarks/step_pairs.py gpt_sdpa --pairs 5 --threads 1 [--compiled]

On a shared 2-vCPU machine one run of a model wanders by a third: a library's step time moves
with the load for minutes at a time. Each pair here is one plugtorch process and one PyTorch
process run back to back (which goes first alternates), each timing ``--steps`` training steps
of ``models.train_step`` after 3 and reporting their median; the pair's figure is the ratio of
the two medians, and the median of the pairs' ratios is the figure RESULTS.md quotes.
``--compiled`` runs plugtorch's step through ``plugtorch.compile`` (PyTorch's stays eager, the
issue's peer). Each library sees ``--threads`` BLAS threads, as compare_steps.py sets them.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from compare_steps import thread_env

HERE = Path(__file__).resolve().parent


def _worker(lib: str, model: str, steps: int, compiled: bool) -> None:
    """Time the steps in this process and print their median in milliseconds."""
    sys.path.insert(0, str(HERE))
    if lib == "torch":
        import torch as library
        library.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    else:
        import plugtorch as library
    from models import train_step
    step, _, x, y = train_step(library, model)
    if compiled:
        step = library.compile(step)
    for _ in range(3):
        step(x, y)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step(x, y)
        times.append(time.perf_counter() - start)
    print(f"{statistics.median(times) * 1e3:.3f}")


def _median_ms(lib: str, args) -> float:
    env = thread_env(args.threads)
    cmd = [sys.executable, str(Path(__file__).resolve()), args.model, "--worker", lib, "--steps", str(args.steps)]
    if args.compiled and lib == "plugtorch":
        cmd.append("--compiled")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{lib} {args.model} failed ({done.returncode}):\n{done.stderr}")
    return float(done.stdout.split()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a key of models.MODELS: resnet, gpt, gpt_sdpa, encoder, lstm")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=20, help="timed steps a process (after 3)")
    parser.add_argument("--compiled", action="store_true", help="plugtorch's step through plugtorch.compile")
    parser.add_argument("--worker", choices=("plugtorch", "torch"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.model, args.steps, args.compiled)
        return
    ratios = []
    for i in range(args.pairs):
        order = ("plugtorch", "torch") if i % 2 == 0 else ("torch", "plugtorch")
        ms = {lib: _median_ms(lib, args) for lib in order}
        ratios.append(ms["plugtorch"] / ms["torch"])
        print(f"pair {i + 1}: plugtorch {ms['plugtorch']:.1f} ms, PyTorch {ms['torch']:.1f} ms, "
              f"ratio {ratios[-1]:.2f}", flush=True)
    label = f"{'compiled ' if args.compiled else ''}{args.model}, {args.threads} thread{'s' * (args.threads > 1)}"
    print(f"{label}: {' / '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
