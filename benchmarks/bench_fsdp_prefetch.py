"""FSDP's forward prefetch against the alpha-beta model (docs/distributed.md, "Cost model").

    python benchmarks/bench_fsdp_prefetch.py                      # 2 ranks in memory
    sudo python benchmarks/bench_fsdp_prefetch.py --link 1gbit    # 2 namespace hosts (root)

A chain of L ``Linear(d, d, bias=False)`` layers, each ``fully_shard``ed, on 2 ranks. For each
batch size (which sets each layer's compute C) one job measures, on every rank at once:

* ``C``: one layer's forward with its full weight (no FSDP), the median over the layers;
* ``AG``: one layer's all-gather (``all_gather_into_tensor`` of its 4 d^2 bytes), alone;
* the FSDP forward with prefetch (the default: layer i+1's all-gather is posted before layer
  i computes) and without it (``set_modules_to_forward_prefetch([])`` on every layer).

and prints them beside the model's predictions from the measured C and AG:

    no prefetch:  L (AG + C)
    prefetch:     AG + (L - 1) max(C, AG) + C

Medians over ``--steps`` forwards (after two warm-up ones, the first of which records the
order that prefetch follows), the slowest rank's. Under ``no_grad``: backward's prefetch
follows the same rule in reverse order, with each layer's reduce-scatter sharing the link.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np


def worker(args) -> None:
    import plugtorch
    import plugtorch.distributed as dist
    from plugtorch import nn
    from plugtorch.distributed.fsdp import fully_shard

    dist.init()
    rank, world = dist.get_rank(), dist.get_world_size()
    d, layers = args.dim, args.layers

    def slowest(seconds: float) -> float:
        t = plugtorch.tensor([seconds])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def median_time(fn, steps) -> float:
        times = []
        for _ in range(steps):
            dist.barrier()
            t0 = time.perf_counter()
            fn()
            times.append(slowest(time.perf_counter() - t0))
        return float(np.median(times))

    for batch in (int(b) for b in args.batches.split(",")):
        plugtorch.manual_seed(0)
        x = plugtorch.randn(batch, d)
        plain = [nn.Linear(d, d, bias=False) for _ in range(layers)]
        with plugtorch.no_grad():
            def one_layer():
                for lin in plain:
                    lin(x)
            compute = median_time(one_layer, args.steps) / layers
            out = plugtorch.empty(d * d)
            piece = plugtorch.randn(d * d // world)
            gather = median_time(lambda: dist.all_gather_into_tensor(out, piece), args.steps)
            row = {"batch": batch, "C": compute, "AG": gather}
            for mode in ("prefetch", "none"):
                model = nn.Sequential(*[nn.Linear(d, d, bias=False) for _ in range(layers)])
                for lin in model:
                    fully_shard(lin)
                    if mode == "none":
                        lin.set_modules_to_forward_prefetch([])
                fully_shard(model)
                for _ in range(2):
                    model(x)
                row[mode] = median_time(lambda: model(x), args.steps)
        if rank == 0:
            print("ROW " + json.dumps(row), flush=True)


def driver(args) -> None:
    argv = [sys.executable, os.path.abspath(__file__), "--worker", "--dim", str(args.dim), "--layers",
            str(args.layers), "--batches", args.batches, "--steps", str(args.steps)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    if args.link:
        from plugtorch.distributed import netns
        with netns.Cluster(hosts=2, rate=None if args.link == "none" else args.link) as cluster:
            cmd = cluster.mpiexec(argv, ranks_per_host=1, env={
                k: env[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
            result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    else:
        result = subprocess.run([shutil.which("mpiexec") or "mpiexec", "-n", "2", *argv], capture_output=True,
                                text=True, env=env, timeout=1800)
    rows = [json.loads(line[4:]) for line in result.stdout.splitlines() if line.startswith("ROW ")]
    if result.returncode != 0 or not rows:
        sys.exit(f"failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    L = args.layers
    print(f"2 ranks, {args.link or 'memory'}; {L} x Linear({args.dim}, {args.dim}) fully_shard'ed "
          f"({4 * args.dim ** 2 / 2 ** 20:.1f} MB gathered per layer); ms, medians of {args.steps} forwards; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'batch':>6} {'C':>7} {'AG':>7} {'no prefetch':>12} {'predicted':>10} {'prefetch':>9} "
          f"{'predicted':>10}")
    for r in rows:
        c, ag = r["C"], r["AG"]
        none_pred = L * (ag + c)
        pre_pred = ag + (L - 1) * max(c, ag) + c
        print(f"{r['batch']:>6} {1e3 * c:7.1f} {1e3 * ag:7.1f} {1e3 * r['none']:12.1f} {1e3 * none_pred:10.1f} "
              f"{1e3 * r['prefetch']:9.1f} {1e3 * pre_pred:10.1f}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--batches", default="32,256,1024", help="rows per rank, comma-separated")
    p.add_argument("--steps", type=int, default=7)
    p.add_argument("--link", default="", help="a tc rate (1gbit) or none: 2 namespace hosts (root)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    worker(args) if args.worker else driver(args)


if __name__ == "__main__":
    main()
