"""How close each real model's training step (``models.py``) is to its matrix products' floor.

    python benchmarks/product_floor.py --threads 1 [--models lstm,resnet] [--torch]

For each model, one plugtorch step on the NumPy backend with every product kernel (matmul,
linear, the convolutions and their gradients, the LSTM layers' recurrences, attention) wrapped
to count its multiply-adds and time it. The floor is those products run at this core's peak:
the rate of a float32 (2048 x 2048) @ (2048 x 2048) ``np.matmul`` measured in the same process,
which no library's kernels beat by much. A step cannot take less than that floor however its
other ops shrink; ``--torch`` also times PyTorch's step (in a process of its own) so the floor
reads against a target such as 0.8x PyTorch. Times are medians of ``--steps`` steps after 3, with
the counting wrappers on (they made minGPT's step 2-4 ms slower than without), so "rest", each
step's time outside the products, is an upper bound; the floor does not depend on them.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _macs(name: str, args: tuple, kwargs: dict, out) -> int:
    """Multiply-adds of one product kernel call, from its operands and result (the full product:
    a causal mask's skipped half counts, as torch's counters count it)."""
    if name == "matmul":
        return out.size * args[0].shape[-1]
    if name == "linear":
        return out.size * args[1].shape[1]
    if name == "conv2d":  # (input, weight, bias): every output entry sums C/groups * kh * kw products
        return out.size * math.prod(args[1].shape[1:])
    if name == "conv2d_input_grad":  # (grad_output, weight): the forward's products, transposed
        return args[0].size * math.prod(args[1].shape[1:])
    if name == "conv2d_weight_grad":  # (grad_output, input, weight_shape=): again the forward's
        return args[0].size * math.prod(kwargs["weight_shape"][1:])
    if name in ("lstm_layer", "lstm_layer_backward"):  # T steps of (N x H) @ (H x 4H)
        weight_hh = args[3] if name == "lstm_layer" else args[2]
        steps_rows = args[0].size // args[0].shape[-1] if name == "lstm_layer" else args[3][0].size // args[3].shape[-1]
        return steps_rows * weight_hh.size
    if name in ("scaled_dot_product_attention", "scaled_dot_product_attention_backward"):
        q, k, v = args[:3] if name.endswith("attention") else args[1:4]
        lead_l = q.size // q.shape[-1]  # batch * heads * L
        forward = lead_l * k.shape[-2] * (q.shape[-1] + v.shape[-1])  # scores + mix
        return forward if name.endswith("attention") else 2 * forward
    return 0


PRODUCTS = ("matmul", "linear", "conv2d", "conv2d_input_grad", "conv2d_weight_grad", "lstm_layer",
            "lstm_layer_backward", "scaled_dot_product_attention", "scaled_dot_product_attention_backward")


def peak_gflops() -> float:
    import numpy as np
    a = np.random.default_rng(0).random((2048, 2048), dtype=np.float32)
    np.matmul(a, a)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        np.matmul(a, a)
        times.append(time.perf_counter() - t0)
    return 2 * 2048**3 / min(times) / 1e9


def measure(model: str, steps: int) -> dict:
    sys.path.insert(0, HERE)
    from models import train_step

    import plugtorch
    from plugtorch.core.device import get_backend
    kernels = get_backend("numpy").kernels
    tally = {"macs": 0, "seconds": 0.0}

    def counted(name, kernel):
        def call(*args, **kwargs):
            t0 = time.perf_counter()
            out = kernel(*args, **kwargs)
            tally["seconds"] += time.perf_counter() - t0
            tally["macs"] += _macs(name, args, kwargs, out)
            return out
        return call

    step, _, x, y = train_step(plugtorch, model)
    originals = {name: kernels[name] for name in PRODUCTS if name in kernels}
    kernels.update({name: counted(name, k) for name, k in originals.items()})
    try:
        for _ in range(3):
            step(x, y)
        per_step = []  # (multiply-adds, step seconds, product seconds): the same steps, so rest >= 0
        for _ in range(steps):
            tally.update(macs=0, seconds=0.0)
            t0 = time.perf_counter()
            step(x, y)
            per_step.append((tally["macs"], time.perf_counter() - t0, tally["seconds"]))
    finally:
        kernels.update(originals)
    return {"gflop": 2 * per_step[-1][0] / 1e9, "step_s": statistics.median(s for _, s, _ in per_step),
            "products_s": statistics.median(p for _, _, p in per_step),
            "rest_s": statistics.median(s - p for _, s, p in per_step), "peak": peak_gflops()}


def torch_step(model: str, steps: int, threads: int) -> float:
    code = (f"import sys, time, statistics; sys.path.insert(0, {HERE!r})\n"
            f"import torch; torch.set_num_threads({threads})\n"
            "from models import train_step\n"
            f"step, _, x, y = train_step(torch, {model!r})\n"
            "[step(x, y) for _ in range(3)]\n"
            "ts = []\n"
            f"for _ in range({steps}):\n"
            "    t0 = time.perf_counter(); step(x, y); ts.append(time.perf_counter() - t0)\n"
            "print(statistics.median(ts))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1, help="BLAS and native-kernel threads")
    p.add_argument("--models", default="resnet,gpt,gpt_sdpa,encoder,lstm")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--torch", action="store_true", help="also time PyTorch's step, in its own process")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(measure(args.worker, args.steps)))
        return 0
    env = {**os.environ, **{v: str(args.threads) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                             "MKL_NUM_THREADS")}}
    print(f"{args.threads} thread(s), load {os.getloadavg()[0]:.2f}; floor = the step's products at the "
          "peak rate of a (2048 x 2048) float32 np.matmul measured in the same process")
    print(f"{'model':>9} {'GFLOP':>6} {'peak GF/s':>9} {'floor ms':>8} {'products ms':>11} {'their GF/s':>10} "
          f"{'step ms':>8} {'rest ms':>8}" + (f" {'torch ms':>8} {'0.8x torch':>10}" if args.torch else ""))
    for model in args.models.split(","):
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", model, "--steps",
                               str(args.steps)], capture_output=True, text=True, env=env)
        if done.returncode:
            print(f"{model}: failed\n{done.stderr}")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        floor = r["gflop"] / r["peak"]
        row = (f"{model:>9} {r['gflop']:6.2f} {r['peak']:9.1f} {floor * 1e3:8.1f} {r['products_s'] * 1e3:11.1f} "
               f"{r['gflop'] / r['products_s']:10.1f} {r['step_s'] * 1e3:8.1f} {r['rest_s'] * 1e3:8.1f}")
        if args.torch:
            t = torch_step(model, args.steps, args.threads)
            row += f" {t * 1e3:8.1f} {0.8 * t * 1e3:10.1f}"
        print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
