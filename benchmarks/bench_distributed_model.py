"""An alpha-beta model of DDP's step time, fitted to measured all-reduces, checked against
measured training, and used to predict efficiency at 8, 64 and 512 ranks.

    sudo python benchmarks/bench_distributed_network.py --out net.json   # the measurements
    python benchmarks/bench_distributed_model.py net.json                # this model

The cost of one all-reduce of n bytes over P ranks, for the bandwidth-optimal algorithm
MPICH uses on large buffers (reduce-scatter by recursive halving, then all-gather by
recursive doubling; a ring has the same bandwidth term):

    T_P(n) = 2 log2(P) alpha + 2 (P-1)/P n beta

alpha is the per-message latency, beta the seconds per byte of one link (the reduction
arithmetic is folded into beta). With 2 ranks T_2(n) = 2 alpha + n beta: a straight line
fitted (least squares on relative error) to each link's measured all-reduce times.

A step is forward F, backward B and optimizer O (measured without DDP). Backward hands
bucket i (n_i bytes) to communication at r_i (measured); buckets go out one after another,
so bucket i runs from s_i = max(r_i, e_{i-1}) to e_i = s_i + T_P(n_i), and backward ends
when the compute is done and the last bucket has arrived:

    step = F + max(B, e_last) + O,   efficiency = (F + B + O) / step

(weak scaling: the batch per rank stays the same). "no overlap" is the bound where every
bucket waits for the end of backward: step = F + B + sum_i T_P(n_i) + O.
"""
from __future__ import annotations

import json
import math
import sys

import numpy as np

RANKS = (2, 8, 64, 512)


def fit(sweep) -> tuple[float, float]:
    """(alpha, beta) from 2-rank all-reduce times: T = 2 alpha + n beta, relative least squares."""
    n = np.array([row["bytes"] for row in sweep], dtype=float)
    t = np.array([row["plugtorch"] for row in sweep], dtype=float)
    a = np.stack([np.ones_like(n), n], axis=1) / t[:, None]
    (two_alpha, beta), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    return max(two_alpha, 0.0) / 2, beta


def allreduce_time(p: int, nbytes: float, alpha: float, beta: float) -> float:
    return 2 * math.log2(p) * alpha + 2 * (p - 1) / p * nbytes * beta


def step_time(local, buckets, p, alpha, beta, overlap=True) -> float:
    f, b, o = local["forward"], local["backward"], local["optimizer"]
    if not overlap:
        return f + b + o + sum(allreduce_time(p, n, alpha, beta) for _, n, _ in buckets)
    end = 0.0
    for _, nbytes, ready in sorted(buckets):
        end = max(ready, end) + allreduce_time(p, nbytes, alpha, beta)
    return f + max(b, end) + o


def main(path: str) -> None:
    with open(path) as fh:
        results = json.load(fh)
    links = results["links"]
    print("Fitted per link (2 ranks): T_2(n) = 2 alpha + n beta")
    print(f"{'link':>8} {'alpha us':>9} {'beta ns/B':>10} {'1/beta MB/s':>12} {'worst fit error':>16}")
    fits = {}
    for name, link in links.items():
        alpha, beta = fits[name] = fit(link["sweep"])
        errors = [abs(2 * alpha + r["bytes"] * beta - r["plugtorch"]) / r["plugtorch"] for r in link["sweep"]]
        print(f"{name:>8} {1e6 * alpha:9.1f} {1e9 * beta:10.3f} {1 / beta / 2**20:12.0f} {max(errors):16.0%}")

    print("\nCheck at 2 ranks: the model's DDP step (default reduction) against the measured one")
    print(f"{'link':>8} {'model':>8} {'measured ms':>12} {'predicted ms':>13} {'error':>7} {'measured eff':>13} "
          f"{'predicted eff':>14}")
    for name, link in links.items():
        alpha, beta = fits[name]
        for model, runs in link["train"].items():
            local, ddp = runs["local"], runs["none"]
            compute = local["forward"] + local["backward"] + local["optimizer"]
            predicted = step_time(local, ddp["buckets"], 2, alpha, beta)
            print(f"{name:>8} {model:>8} {1e3 * ddp['step']:12.1f} {1e3 * predicted:13.1f} "
                  f"{predicted / ddp['step'] - 1:+7.0%} {local['step'] / ddp['step']:13.0%} "
                  f"{compute / predicted:14.0%}")

    print("\nPredicted efficiency (weak scaling, per-rank batch fixed; overlap / no overlap)")
    header = "".join(f"{p:>16}" for p in RANKS)
    print(f"{'link':>8} {'model':>8} {'grad MB':>8}{header}")
    for name, link in links.items():
        if name == "memory":
            continue  # shared memory does not reach across 8 or more hosts
        alpha, beta = fits[name]
        for model, runs in link["train"].items():
            local, buckets = runs["local"], runs["none"]["buckets"]
            compute = local["forward"] + local["backward"] + local["optimizer"]
            cells = []
            for p in RANKS:
                with_overlap = compute / step_time(local, buckets, p, alpha, beta)
                without = compute / step_time(local, buckets, p, alpha, beta, overlap=False)
                cells.append(f"{with_overlap:7.0%} / {without:5.0%}")
            grad_mb = sum(n for _, n, _ in buckets) / 2**20
            print(f"{name:>8} {model:>8} {grad_mb:8.1f}" + "".join(f"{c:>16}" for c in cells))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
